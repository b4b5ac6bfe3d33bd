"""The import contracts of pyproject.toml ([tool.importlinter]), checked by import-linter: dependencies point
one way (the command line -> the Lambda entry points and the HTTP API -> operator reads, maintenance and the
worker runtime -> the pipeline and the store -> the domain), the product never imports the local stand-in for
AWS (onward_infra, moto), and the domain imports no AWS SDK, no Lambda library and no store. Without this test
each rule held only as long as every reviewer noticed a stray import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[3]
PRODUCT_FOLDERS = ("domain", "store", "pipeline", "runtime", "maintenance", "operator", "api", "entrypoints", "cli")


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 6 kept, 0 broken." in done.stdout


def test_no_product_module_imports_the_local_stack_or_moto():
    """Every module of `onward` (the wheel, the Lambda builds, the container image): none imports onward_infra
    or moto, directly or through another module. import-linter checks the same rule; this reads grimp's graph
    so that a module it cannot see (a new top-level package) would show up here by name."""
    graph = grimp.build_graph("onward", "onward_infra", include_external_packages=True)
    product = sorted(module for module in graph.modules if module == "onward" or module.startswith("onward."))
    assert "onward.store.service" in product and "onward.store.claims" in product
    wrong = {module: sorted(imported for imported in graph.find_modules_directly_imported_by(module)
                            if imported.split(".")[0] in {"onward_infra", "moto"})
             for module in product}
    assert {module: imported for module, imported in wrong.items() if imported} == {}


def test_every_folder_of_the_product_says_what_lives_there():
    """Each folder by role opens with a docstring of at most two lines saying what lives there: the tree is
    the architecture's first page for a newcomer."""
    for folder in PRODUCT_FOLDERS:
        init = ROOT / "onward" / folder / "__init__.py"
        text = init.read_text()
        assert text.startswith('"""') and 0 < len(text.strip().strip('"').splitlines()) <= 2, folder


def test_nothing_outside_the_store_reads_a_stores_recorder():
    """No module of the product outside onward/store (nor a SAM function folder) names `.recorder`: an entry
    point, an operator read or a maintenance pass reads the store through JobStore and the readers the
    bootstrap builds (onward.store.reads), so the recorder's protocol can change behind them. Without this
    test `deployment.job_store.recorder` crept back into routes, the reaper and the CLI."""
    folders = [ROOT / "onward", *(ROOT / name for name in ("handlers", "relay", "projector"))]
    store = ROOT / "onward" / "store"
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if path.is_relative_to(store):
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.Attribute) and node.attr == "recorder"]
    assert found == []
def test_only_the_dynamodb_adapter_knows_the_item_layout():
    """The store's ports (the recorder's roles and what they speak in) and the in-memory adapter import nothing
    of onward.store.dynamo, directly or through another module: item keys, index names and item shapes live
    only in the DynamoDB adapter. Without it a write plan could build DynamoDB items again, or the memory
    recorder imitate them, and every change of the layout would be made twice."""
    graph = grimp.build_graph("onward", cache_dir=None)
    layout_free = sorted(module for module in graph.modules
                         if module.startswith(("onward.store.ports", "onward.store.memory")))
    assert "onward.store.ports.write_plans" in layout_free and "onward.store.memory.recorder" in layout_free
    wrong = {module: sorted(imported for imported in graph.find_upstream_modules(module)
                            if imported.startswith("onward.store.dynamo"))
             for module in layout_free}
    assert {module: imported for module, imported in wrong.items() if imported} == {}

"""The import contracts of pyproject.toml ([tool.importlinter]), checked by import-linter: dependencies point
one way (the command line -> the local emulation -> the Lambda handlers -> relay/projector -> the core),
production code never imports the local emulation (onward_infra, moto), and the pure policies and value
objects import no AWS SDK and no Lambda library. Without this test each rule held only as long as every
reviewer noticed a stray import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout


OUTER = ("onward.cli", "onward_infra", "onward.entrypoints", "onward.pipeline.relay", "onward.pipeline.projector")


def _outer(module: str) -> bool:
    return any(module == outer or module.startswith(outer + ".") for outer in OUTER)


def test_the_core_imports_no_entry_point_and_no_emulation():
    """The core is every module of `onward` outside the entry points and the emulation: it imports none of
    them, nor moto (import-linter's layers cannot name "every other module", so this reads its graph)."""
    graph = grimp.build_graph("onward", include_external_packages=True)
    core = sorted(module for module in graph.modules if module.startswith("onward") and not _outer(module))
    assert "onward.store.service" in core and "onward.store.claims" in core
    wrong = {module: sorted(imported for imported in graph.find_modules_directly_imported_by(module)
                            if _outer(imported) or imported.split(".")[0] == "moto")
             for module in core}
    assert {module: imported for module, imported in wrong.items() if imported} == {}

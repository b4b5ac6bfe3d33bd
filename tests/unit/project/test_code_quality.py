"""Lint and types, checked by `make test`: `ruff check .` ([tool.ruff] in pyproject.toml) and `mypy`
([tool.mypy]: the runtime packages and the local tooling; onward/ strict). Without this test a new problem
held only until someone happened to run the tools.

Formatting is not checked: the tree is not run through `ruff format` (its layout is the authors'), so there
is deliberately no `ruff format --check` here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent  # the environment's own tools, installed with the dev extras
TAIL_CHARS = 4000


def _run(tool: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    assert executable.exists(), f"{executable} is missing: `make test` installs the dev extras (ruff, mypy)"
    return subprocess.run([str(executable), *arguments], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    output = (done.stdout + done.stderr).strip()
    return f"exit {done.returncode}; the output's tail:\n{output[-TAIL_CHARS:]}"


def test_ruff_check_finds_no_problem() -> None:
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, _tail(done)


def test_mypy_finds_no_error() -> None:
    done = _run("mypy")
    assert done.returncode == 0, _tail(done)

"""The import contracts of pyproject.toml ([tool.importlinter]), checked by import-linter: dependencies point
one way (entry points -> relay/projector -> the core), production code never imports the local emulation
(infra, moto), and the pure policies and value objects import no AWS SDK and no Lambda library. Without
this test each rule held only as long as every reviewer noticed a stray import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout

"""docs/client.md's tour runs as written: its Python blocks, each in a process of its own with API and TOKEN in
the environment as the page says to export them, against the platform as `onward up` runs it; each prints what
the page's console block after it shows (job ids apart)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.client.conftest import TOKENS

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read and write streams

PAGE = Path(__file__).resolve().parents[3] / "docs" / "client.md"
BLOCK = re.compile(r"```python\n(.*?)```\n\n```console\n(.*?)```", re.DOTALL)
JOB_ID = re.compile(r"\b[0-9a-f]{32}\b")


def run_the_tour(url: str, token: str) -> None:
    """Each Python block of docs/client.md in a process of its own, with API and TOKEN exported as the page
    says: it must exit 0 and print what the console block after it shows (job ids apart)."""
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) == 2, "the sync tour and the asyncio one"
    environment = {**os.environ, "API": url, "TOKEN": token}
    for code, shown in blocks:
        ran = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                             timeout=180, check=False)
        assert ran.returncode == 0, ran.stderr
        assert JOB_ID.sub("<job>", ran.stdout) == JOB_ID.sub("<job>", shown), (ran.stdout, shown)


def test_the_tour_of_docs_client_md_runs_as_written(platform):
    """Without this, the page's examples could drift from the client (a renamed method, a field no longer there)
    and nothing would say so."""
    run_the_tour(platform.url, TOKENS["acme"])

"""`onward up --data-dir` as a person uses it: run the demo, Ctrl-C, start again with the same directory.

How it would break without the code: without the restore the second start would deploy a fresh stack
(other table names) and answer 404 for every job of the first; without the tokens kept in the directory
the second start would print new secrets and the first ones would get 401; without the endpoint stopping
after the platform (its last snapshot then), the writes of the platform's own shutdown would be lost.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import get, read_until
from tests.integration.api_support import http_call

pytestmark = pytest.mark.integration


def _start(data_dir: Path, *flags: str) -> tuple[subprocess.Popen[str], int]:
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--data-dir", str(data_dir), "--port", str(free_port()),
                                "--http-port", str(http_port), *flags], stdout=subprocess.PIPE, text=True)
    return process, http_port


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 0


def test_a_restart_with_the_same_data_dir_keeps_every_job_its_view_and_the_tokens(tmp_path: Path) -> None:
    data_dir = tmp_path / "onward"
    first, http_port = _start(data_dir, "--demo")
    try:
        printed = "".join(read_until(first, "All demo jobs reached a terminal state", 180))
        assert f"(state kept in {data_dir})" in printed
        tokens = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))
        operator = re.search(r"operator\s+token (\S+)", printed)
        assert set(tokens) == {"acme", "globex", "initech"} and operator is not None
        before = {tenant: sorted((job["job_id"], job["status"], job["version"])
                                 for job in get(f"http://127.0.0.1:{http_port}/jobs?limit=100", token)["jobs"])
                  for tenant, token in tokens.items()}
        assert sum(len(jobs) for jobs in before.values()) == 8
    finally:
        _stop(first)

    second, http_port = _start(data_dir)  # no --demo: nothing new is enqueued
    try:
        printed = "".join(read_until(second, "Serving; Ctrl-C", 120))
        assert f"(state kept in {data_dir})" in printed
        assert dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed)) == tokens  # the same secrets
        after = {tenant: sorted((job["job_id"], job["status"], job["version"])
                                for job in get(f"http://127.0.0.1:{http_port}/jobs?limit=100", token)["jobs"])
                 for tenant, token in tokens.items()}
        assert after == before
        assert get(f"http://127.0.0.1:{http_port}/whoami", operator.group(1))["operator"] is True
    finally:
        _stop(second)


def test_a_restart_shows_the_drain_switch_and_pauses_kept_in_the_data_dir(tmp_path: Path) -> None:
    """Catches `onward up` starting silently with the platform drained or a tenant paused (nothing would run and
    nothing would say why): the switches are in the jobs table, kept by --data-dir."""
    data_dir = tmp_path / "onward"
    first, http_port = _start(data_dir)
    try:
        printed = "".join(read_until(first, "Serving; Ctrl-C", 120))
        operator = re.search(r"operator\s+token (\S+)", printed)
        assert operator is not None and "Paused" not in printed
        url = f"http://127.0.0.1:{http_port}"
        assert http_call(url, "POST", "/ops/drain", token=operator.group(1), body={"on": True}).status == 200
        assert http_call(url, "POST", "/ops/pause", token=operator.group(1), body={"tenant": "acme"}).status == 200
    finally:
        _stop(first)
    second, _ = _start(data_dir)
    try:
        printed = "".join(read_until(second, "Serving; Ctrl-C", 120))
        assert "Paused (drain switch: ON (no job starts anywhere)" in printed
        assert "  tenant acme is paused" in printed
    finally:
        _stop(second)

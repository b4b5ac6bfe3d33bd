"""onward.client against `onward up` as a person runs it: the command `make up` runs (`onward up --demo`), its
printed tenant token taken once its demo jobs are done, and docs/client.md's tour run as written against its
HTTP API (sync and asyncio)."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until
from tests.integration.client.test_client_docs import run_the_tour

pytestmark = pytest.mark.integration


def test_the_client_tour_runs_against_onward_up():
    """The client speaks to what `onward up` serves (the local gateway, its printed tokens, its workers and
    pipeline), not only to the platform a fixture builds: a tour that only passed under the fixture would not
    be the one a reader runs."""
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--demo", "--port", str(free_port()), "--http-port", str(http_port)],
                               stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        tokens = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))
        run_the_tour(f"http://127.0.0.1:{http_port}", tokens["acme"])
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0

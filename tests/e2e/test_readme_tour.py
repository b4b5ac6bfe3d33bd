"""README.md's tour runs as written: the command `make up` runs (`onward up --demo`, here with `--otlp` as the
tour starts it), its printed acme token exported as the tour says, and the tour's Python block run in a
process of its own; it prints what the console block after it shows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
TOUR = re.compile(r"## A five-minute tour\n(.*?)\n## ", re.DOTALL)
BLOCK = re.compile(r"```python\n(.*?)```\n\n```console\n(.*?)```", re.DOTALL)
OTLP_PORT = "port=4318"


def test_the_readme_tour_runs_as_written_against_onward_up():
    """Without it the README's tour could drift from the product (a client method renamed, a span no longer
    exported, a webhook body changed) and nothing would say so. The one change made to the block: the OTLP
    receiver's port is a free one, which `onward up --otlp` is started with, so that the test cannot meet
    another process on 4318."""
    (tour,) = TOUR.findall(README.read_text())
    (code, shown), = BLOCK.findall(tour)
    assert "make up UP_ARGS=\"--otlp http://127.0.0.1:4318\"" in tour and OTLP_PORT in code
    otlp_port, http_port = free_port(), free_port()
    code = code.replace(OTLP_PORT, f"port={otlp_port}")
    process = subprocess.Popen([*ONWARD, "up", "--demo", "--port", str(free_port()), "--http-port", str(http_port),
                                "--otlp", f"http://127.0.0.1:{otlp_port}"], stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 300))
        tokens = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))
        environment = {**os.environ, "API": f"http://127.0.0.1:{http_port}", "TOKEN": tokens["acme"]}
        ran = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                             timeout=300, check=False)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == shown
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0

"""What the commands that run against AWS load: `onward worker`, the production runtime, loads neither the
local emulation (infra) nor moto; `onward up --aws` / `--endpoint-url` runs the local platform (infra) without
moto, which only the embedded endpoint needs. Each command runs for real in a child process (against the
embedded endpoint of this session, as if it were AWS), which then reports the top-level packages it loaded.
Without the lazy imports in onward/cli/main.py (and WorkerPool in onward/pool.py, the stack helpers in
onward/local/stack.py), a production host would need moto installed, and would run emulator code at start."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from onward.local.endpoint import REGION, EmbeddedEndpoint

pytestmark = pytest.mark.integration

# Runs `onward <argv>`; a command that serves until SIGTERM gets it once it has installed its handler.
RUN_AND_REPORT = """
import os, signal, sys, threading, time
from onward.cli.main import main

def stop_once_serving():
    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=stop_once_serving, daemon=True).start()
status = main(sys.argv[1:])
print("LOADED", sorted({name.split(".")[0] for name in sys.modules} & {"infra", "moto"}), flush=True)
sys.exit(status)
"""


def run_onward(argv: list[str], environment: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, *argv], env=environment,
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def test_the_worker_command_loads_neither_infra_nor_moto(environment: dict[str, str]) -> None:
    output = run_onward(["worker", "--module", "onward.demo", "--concurrency", "1"],
                        {**os.environ, **environment})
    assert "onward worker: 1 workers running" in output
    assert "LOADED []" in output


@pytest.mark.parametrize("target", ["--aws", "--endpoint-url"])
def test_up_against_another_endpoint_loads_the_platform_but_not_moto(endpoint: EmbeddedEndpoint,
                                                                      target: str) -> None:
    """`--aws` takes AWS's default endpoint and credentials chain: here AWS_ENDPOINT_URL points it at this
    session's endpoint, as a person would point it at LocalStack."""
    stack = f"imports-{uuid.uuid4().hex[:8]}"
    endpoint.deploy(stack)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("ONWARD_", "AWS_")) and not name.endswith(("_TABLE", "_STREAM"))}
    environment |= {"AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing"}
    if target == "--aws":
        argv, environment["AWS_ENDPOINT_URL"] = ["up", "--aws"], endpoint.url
    else:
        argv = ["up", "--endpoint-url", endpoint.url]
    output = run_onward([*argv, "--stack", stack, "--workers", "0", "--http-port", "0", "--exit-when-done"],
                        environment)
    assert "HTTP API and status page: http://127.0.0.1:" in output
    assert "LOADED ['infra']" in output

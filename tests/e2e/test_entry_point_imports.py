"""What the commands that run against AWS load: `onward worker`, the production runtime (the container
image's entry point), loads neither the local emulation (onward_infra) nor moto; `onward up --aws` /
`--endpoint-url` runs the local platform (onward_infra) without moto, which only the embedded endpoint needs.
Each command runs for real in a child process (against the embedded endpoint of this session, as if it were
AWS), which then reports the modules it loaded, by full name. Without the lazy imports in onward/cli/main.py
(and WorkerPool in onward/runtime/pool.py, the stack helpers in infra/onward_infra/stack.py), a production host would
need
moto installed, and would run emulator code at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from onward_infra.endpoint import REGION, EmbeddedEndpoint
from tests.support import as_on_aws

pytestmark = pytest.mark.integration

# Runs `onward <argv>`; a command that serves until SIGTERM gets it once it has installed its handler. Then
# prints the loaded modules of the emulation and of moto, full names (`onward` itself is loaded by every command).
RUN_AND_REPORT = """
import json, os, signal, sys, threading, time
from onward.cli.main import main

def stop_once_serving():
    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

def emulation(name):
    return any(name == package or name.startswith(package + ".") for package in ("onward_infra", "moto"))

threading.Thread(target=stop_once_serving, daemon=True).start()
status = main(sys.argv[1:])
print("LOADED " + json.dumps(sorted(filter(emulation, sys.modules))), flush=True)
sys.exit(status)
"""


def loaded_by_onward(argv: list[str], environment: dict[str, str]) -> tuple[str, list[str]]:
    """Runs `onward <argv>` to its end (exit status 0) and answers its output and the emulation's modules
    it loaded (onward_infra, onward_infra.*, moto, moto.*)."""
    result = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, *argv], env=environment,
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = [line for line in result.stdout.splitlines() if line.startswith("LOADED ")]
    assert len(report) == 1, result.stdout[-2000:]
    return result.stdout, json.loads(report[0].removeprefix("LOADED "))


def test_the_worker_command_loads_neither_the_emulation_nor_moto(environment: dict[str, str]) -> None:
    """Breaks when `onward worker`, or anything it imports, imports a module of onward_infra or moto: the
    container image (Dockerfile) has no moto, and the emulation, though it ships in the wheel, must not run
    in production."""
    output, loaded = loaded_by_onward(["worker", "--module", "onward.runtime.demo_jobs", "--concurrency", "1"],
                                      as_on_aws({**os.environ, **environment}))
    assert "onward worker: 1 workers running" in output
    assert loaded == []


def test_the_report_names_an_emulation_module_the_worker_imports(environment: dict[str, str],
                                                                  tmp_path: Path) -> None:
    """The check above is only as good as its report: here the handlers' module itself imports the emulation
    (onward_infra.stack), and the report must name it. Without this, a renamed package made the check above
    pass vacuously (it once looked for a top-level `infra` that no longer existed)."""
    (tmp_path / "handlers_importing_the_emulation.py").write_text(
        "import onward_infra.stack\nfrom onward.runtime.demo_jobs import registry\n")
    environment = {**as_on_aws({**os.environ, **environment}),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    output, loaded = loaded_by_onward(
        ["worker", "--module", "handlers_importing_the_emulation", "--concurrency", "1"], environment)
    assert "onward worker: 1 workers running" in output
    assert {"onward_infra", "onward_infra.stack", "onward_infra.template"} <= set(loaded)


@pytest.mark.parametrize("target", ["--aws", "--endpoint-url"])
def test_up_against_another_endpoint_loads_the_platform_but_not_moto(endpoint: EmbeddedEndpoint,
                                                                      target: str) -> None:
    """`--aws` takes AWS's default endpoint and credentials chain: here AWS_ENDPOINT_URL points it at this
    session's endpoint, as a person would point it at LocalStack. Breaks when the local platform (pollers,
    gateway) or the stack helpers import moto, or the embedded endpoint is imported without being used."""
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
    output, loaded = loaded_by_onward(
        [*argv, "--stack", stack, "--workers", "0", "--http-port", "0", "--exit-when-done"], environment)
    assert "HTTP API and status page: http://127.0.0.1:" in output
    assert "onward_infra.platform" in loaded
    assert [name for name in loaded if name == "moto" or name.startswith("moto.")] == []
    assert "onward_infra.endpoint" not in loaded

"""The package as a team installs it, and the container image's entry point, checked without Docker.

The wheel is built from what the Dockerfile's builder stage receives (its COPY instructions, from the build
context .dockerignore leaves), then installed with its dependencies into a clean virtualenv, as the image's
final stage installs it. There the Dockerfile's ENTRYPOINT + CMD run exactly as written: `--help`, then for
real against this session's embedded endpoint (as if it were AWS), with the environment the ECS task gives.
What `docker build` alone would add (the base image, the non-root user, the layers) is not checked here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.domain.states import TERMINAL_STATES
from onward.store.service import JobStore
from tests.support import as_on_aws

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
# Names a wheel must not put at the top of site-packages (the layout before onward/ held everything).
GENERIC_NAMES = {"cli", "infra", "handlers", "relay", "projector", "local", "web", "tests", "bench", "template.yaml"}


# --- the Dockerfile, read as `docker build` reads it ------------------------------------------------------------

def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction, continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        pending = ""
    return found


def stages() -> list[list[tuple[str, str]]]:
    """The build stages, each from its FROM on."""
    result: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions(DOCKERFILE.read_text()):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, arguments))
    return result


def exec_form(keyword: str) -> list[str]:
    """The final stage's ENTRYPOINT or CMD, which must be in exec form (a JSON array): the shell form would run
    `/bin/sh -c`, which neither passes CMD on to the entry point nor forwards SIGTERM to the worker."""
    values = [arguments for found, arguments in stages()[-1] if found == keyword]
    assert values, f"the Dockerfile's final stage has no {keyword}"
    parsed = json.loads(values[-1])
    assert isinstance(parsed, list) and all(isinstance(word, str) for word in parsed), (keyword, values[-1])
    return parsed


def stop_signal() -> signal.Signals:
    values = [arguments for keyword, arguments in stages()[-1] if keyword == "STOPSIGNAL"]
    return signal.Signals[values[-1]] if values else signal.SIGTERM


def dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """(re-includes, pattern) of each line of .dockerignore, as Docker matches them: `*` and `?` within one
    path segment, `**` across segments."""
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        include = text.startswith("!")
        text = text.removeprefix("!").strip().strip("/")
        regex = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?)", text):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        patterns.append((include, re.compile(regex)))
    return patterns


def in_build_context(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parent directories decides."""
    parts = relative.split("/")
    paths = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for include, pattern in patterns:
        if any(pattern.fullmatch(path) for path in paths):
            included = include
    return included


def fill_builder_workdir(workdir: Path) -> None:
    """Copies into `workdir` what the builder stage's COPY instructions (the first stage's, none `--from`)
    take from the build context: a file into the destination directory, a directory's content into it,
    symbolic links as links. A source .dockerignore leaves out fails here as `docker build` would."""
    patterns = dockerignore()
    for keyword, arguments in stages()[0]:
        if keyword != "COPY":
            continue
        words = arguments.split()
        assert not any(word.startswith("--") for word in words), f"COPY flags are not read here: {arguments}"
        *sources, destination = words
        target = workdir / destination
        target.mkdir(parents=True, exist_ok=True)
        for source in sources:
            path = ROOT / source
            assert in_build_context(source.strip("/"), patterns), f"COPY {source}: .dockerignore leaves it out"
            if not path.is_dir():
                shutil.copy2(path, target / path.name, follow_symlinks=False)
                continue
            for directory, _, files in os.walk(path):
                for name in files:
                    file = Path(directory) / name
                    if in_build_context(file.relative_to(ROOT).as_posix(), patterns):
                        copied = target / file.relative_to(path)
                        copied.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(file, copied, follow_symlinks=False)


# --- the wheel and the clean install ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Install:
    sources: Path  # the builder stage's working directory: what the wheel was built from
    wheel: Path
    bin: Path
    python: Path
    workdir: Path  # an empty directory to run in: nothing of the source tree on sys.path

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A process environment without this session's Python, AWS or Onward settings (the dev virtualenv
        and the source tree are nowhere on its path), the install's bin/ first on PATH as /usr/local/bin is
        in the image."""
        kept = {name: value for name, value in os.environ.items()
                if not name.startswith(("PYTHON", "ONWARD_", "AWS_", "VIRTUAL_ENV", "POWERTOOLS_"))
                and not name.endswith(("_TABLE", "_STREAM"))}
        kept["PATH"] = os.pathsep.join([str(self.bin), os.environ.get("PATH", os.defpath)])
        return kept | {"AWS_DEFAULT_REGION": "us-east-1"} | (extra or {})

    def run_python(self, script: str) -> Any:
        """Runs `script` with the install's Python (isolated mode) and answers the JSON it prints last."""
        result = subprocess.run([str(self.python), "-I", "-c", script], cwd=self.workdir, env=self.environment(),
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Install:
    """The wheel built from the builder stage's sources, installed with its dependencies (from the package
    index pip is configured for, through pip's cache) into a fresh virtualenv holding nothing else."""
    base = tmp_path_factory.mktemp("wheel")
    sources, wheels, environment, workdir = base / "src", base / "wheels", base / "venv", base / "run"
    workdir.mkdir()
    fill_builder_workdir(sources)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(sources)]
    built = subprocess.run(pip_wheel, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = wheels.glob("onward-*.whl")
    venv.create(environment, with_pip=False)  # this session's pip installs into it (--python): seconds faster
    python = environment / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                                "--disable-pip-version-check", str(wheel)],
                               cwd=workdir, capture_output=True, text=True, timeout=600, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return Install(sources, wheel, environment / "bin", python, workdir)


# --- the tests -------------------------------------------------------------------------------------------------

def test_the_wheel_holds_the_package_its_page_and_its_template_and_nothing_else(install: Install) -> None:
    """Breaks when packages.find picks up another top-level package (tests/, bench/), a subpackage of onward is
    left out (a directory without __init__.py is silently skipped), the page or py.typed is not package data,
    or the symlinked template goes in as a link rather than as the file."""
    with zipfile.ZipFile(install.wheel) as wheel:
        names = set(wheel.namelist())
        template = wheel.read("onward/template.yaml")
    assert {name.split("/")[0] for name in names} == {"onward", install.wheel.name.split("-py")[0] + ".dist-info"}
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "onward").rglob("*.py")}
    assert modules - names == set()
    page = {f"onward/web/{path.name}" for path in (ROOT / "onward" / "web").iterdir() if path.is_file()}
    assert page and page <= names
    assert "onward/py.typed" in names
    assert (install.sources / "onward" / "template.yaml").is_symlink()  # as in the repository
    assert template == (install.sources / "template.yaml").read_bytes()


def test_the_dockerfile_entry_point_runs_in_the_clean_install(install: Install) -> None:
    """Runs the Dockerfile's ENTRYPOINT + CMD with --help appended, as the image would. Breaks when the
    entry point names a command the wheel does not install (a renamed console script, a missing
    [project.scripts]) or the CMD a subcommand `onward` does not have, or when importing the command line
    needs anything the wheel's dependencies do not bring."""
    command = exec_form("ENTRYPOINT") + exec_form("CMD")
    executable = shutil.which(command[0], path=str(install.bin))
    assert executable is not None, f"the wheel installs no {command[0]!r} (the Dockerfile's ENTRYPOINT)"
    result = subprocess.run([executable, *command[1:], "--help"], cwd=install.workdir, env=install.environment(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage: onward worker" in result.stdout and "ONWARD_WORKER_MODULE" in result.stdout


FACTS = """
import importlib.metadata, importlib.util, json, pathlib, sys
import onward

package = pathlib.Path(onward.__file__).parent
site = package.parent
print(json.dumps({
    "package": str(package),
    "site_packages": sorted(path.name for path in site.iterdir()),
    "distribution_tops": sorted({file.parts[0] for file in importlib.metadata.files("onward")
                                 if file.parts[0] != ".."}),
    "moto": importlib.util.find_spec("moto") is not None,
    "local_stack": importlib.util.find_spec("onward_infra") is not None,
    "real_files": {name: (package / name).is_file() and not (package / name).is_symlink()
                   for name in ("web/index.html", "template.yaml", "py.typed")},
}))
"""


def test_the_install_holds_onward_alone_with_its_page_and_template_and_no_moto(install: Install) -> None:
    """Breaks when the distribution installs anything beside onward/ (a generic top-level package such as
    `cli`, or the local stack's onward_infra), the dependencies pull in moto (the local stack, infra/, belongs
    to development), or the page or template is missing from the install."""
    facts = install.run_python(FACTS)
    package = Path(facts["package"])
    assert package.parent.name == "site-packages" and install.bin.parent in package.parents
    assert facts["distribution_tops"] == sorted(["onward", install.wheel.name.split("-py")[0] + ".dist-info"])
    assert GENERIC_NAMES & set(facts["site_packages"]) == set()
    assert facts["moto"] is False and facts["local_stack"] is False
    assert facts["real_files"] == {"web/index.html": True, "template.yaml": True, "py.typed": True}


HARNESS = """
import json, logging, sys
logging.disable(logging.INFO)
from onward.testing import JobHarness

harness = JobHarness()

@harness.register("t.flaky")
def flaky(context):
    if context.attempt == 1:
        raise ConnectionError("once")
    return {"token": context.fencing_token}

record = harness.run("t.flaky", max_attempts=2)
print(json.dumps({"outcomes": record.outcomes, "result": record.result, "job_id": record.job_id,
                  "imported": sorted(name for name in ("moto", "pytest", "onward_infra") if name in sys.modules)}))
"""


def test_the_installed_testing_harness_runs_a_handlers_job_without_the_development_extras(install: Install) -> None:
    """onward.testing, imported from the install, runs a handler's job through a failed attempt and its retry.
    Breaks when the harness needs what only the development extras bring (pytest, moto) or reaches the local
    emulation, or when its subpackage is not in the wheel: a team testing its handlers has only the wheel."""
    answer = install.run_python(HARNESS)
    assert answer["outcomes"] == ["failed", "succeeded"]
    assert answer["result"] == {"token": f"{answer['job_id']}:2"}
    assert answer["imported"] == []


STATUS_PAGE = """
import json, time
from onward.api.app import handler

class Context:
    function_name = "onward-api"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:onward-api"
    aws_request_id = "wheel-test"

    def get_remaining_time_in_millis(self):
        return 29_000

now = time.time()
event = {  # API Gateway's HTTP API (payload 2.0) GET /, as infra/onward_infra/gateway.py builds it
    "version": "2.0", "routeKey": "$default", "rawPath": "/", "rawQueryString": "",
    "headers": {"host": "api.example", "user-agent": "test"}, "isBase64Encoded": False,
    "requestContext": {"accountId": "123456789012", "apiId": "api", "domainName": "api.example",
                       "domainPrefix": "api", "requestId": "r-1", "routeKey": "$default", "stage": "$default",
                       "http": {"method": "GET", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1",
                                "userAgent": "test"},
                       "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                       "timeEpoch": int(now * 1000)},
}
response = handler(event, Context())
print(json.dumps({"status": response["statusCode"], "type": response["headers"]["Content-Type"],
                  "body": response["body"]}))
"""


def test_the_installed_api_handler_serves_the_status_page(install: Install) -> None:
    """The API function's handler, imported from the install, answers GET / with the page. Breaks when the
    page is not in the wheel or the handler looks for it outside the package (onward/web beside the
    handlers), or when the handler's imports need a package the wheel does not declare."""
    answer = install.run_python(STATUS_PAGE)
    assert answer["status"] == 200 and answer["type"].startswith("text/html")
    assert answer["body"] == (ROOT / "onward" / "web" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("argv", [["up"], ["endpoint"]])
def test_the_local_commands_say_how_to_install_the_emulator(install: Install, argv: list[str]) -> None:
    """Without the local stack (infra/, which a production install does not have), `onward up` and `onward
    endpoint` end with status 2 and how to install it, not argparse's "invalid choice" or a traceback."""
    result = subprocess.run([str(install.bin / "onward"), *argv], cwd=install.workdir, env=install.environment(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    assert "the local stack is not installed" in result.stderr and "pip install -e ./infra" in result.stderr
    assert "Traceback" not in result.stderr


def imported_modules(importtime_log: str) -> set[str]:
    """The modules a process imported, from its -X importtime report (PYTHONPROFILEIMPORTTIME) on stderr."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime_log.splitlines()
            if line.startswith("import time:") and "|" in line}


def messages(log: Path) -> str:
    """The end of a process's stderr without its import report."""
    return "\n".join(line for line in log.read_text().splitlines() if not line.startswith("import time:"))[-3000:]


def test_the_entry_point_runs_jobs_from_the_clean_install_and_stops_on_the_stop_signal(
        install: Install, environment: dict[str, str], settings: Any, dynamodb: Any, tmp_path: Path) -> None:
    """The Dockerfile's ENTRYPOINT + CMD, run as the ECS task runs it (no flags; the stack's tables and
    ONWARD_WORKER_MODULE in the environment), runs demo jobs to their results, imports no module of the
    emulation, and ends with status 0 on the Dockerfile's STOPSIGNAL. Breaks when the worker command needs
    --module (the image has no shell to expand a variable), when anything it imports reaches onward_infra,
    or when the signal ECS sends does not stop it cleanly."""
    store = JobStore(settings, client=dynamodb)
    job_ids = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(3)]
    command = exec_form("ENTRYPOINT") + exec_form("CMD")
    executable = shutil.which(command[0], path=str(install.bin))
    assert executable is not None
    log = tmp_path / "stderr.log"  # the import report is larger than a pipe holds
    with log.open("w") as stderr:
        worker = subprocess.Popen(
            [executable, *command[1:]], cwd=install.workdir, stdout=subprocess.PIPE, stderr=stderr, text=True,
            env=install.environment({**as_on_aws(environment), "ONWARD_WORKER_MODULE": "onward.runtime.demo_jobs",
                                     "POWERTOOLS_METRICS_DISABLED": "true", "PYTHONPROFILEIMPORTTIME": "1"}))
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and worker.poll() is None:
                if all(store.get(job_id).state in TERMINAL_STATES for job_id in job_ids):
                    break
                time.sleep(0.2)
            assert [store.result(job_id) for job_id in job_ids] == [{"n": n} for n in range(3)], messages(log)
        finally:
            worker.send_signal(stop_signal())
            status = worker.wait(timeout=60)
    assert status == 0, messages(log)
    imported = imported_modules(log.read_text())
    assert "onward.runtime.pool" in imported  # the report is read right: the worker's own modules are in it
    assert {name for name in imported if name.split(".")[0] == "moto" or name.startswith("onward_infra")} == set()

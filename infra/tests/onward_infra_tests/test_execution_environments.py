"""Lambda execution environments on this machine (infra/onward_infra/environments.py): processes that each run a
handler one invocation at a time, which the local gateway uses for the HTTP API (`onward up`, the benches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from onward_infra.environments import EnvironmentFailed, ExecutionEnvironments
from onward_infra.gateway import LocalGateway
from onward_infra_tests import environment_handlers
from onward_infra_tests.processes import eventually_gone, gone

HANDLERS = environment_handlers.__name__


@pytest.fixture(autouse=True)
def handlers_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environments' processes import the handlers by module name: the local stack's tests on their path."""
    tests_folder = str(Path(environment_handlers.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (tests_folder, os.environ.get("PYTHONPATH")))))


def test_invocations_run_at_once_each_in_its_own_environment_with_its_own_module_state() -> None:
    """Two invocations that each keep their event in module state for a while: each answers its own tag, from
    two different processes, in about the time of one. A mutant running the handler in threads of one
    process would answer one invocation with the other's tag (as Powertools' shared current_event would);
    one serving them one after another would take twice as long (held long enough to tell)."""
    with ExecutionEnvironments(2, f"{HANDLERS}:hold", function_name="holder") as environments:
        events = [{"tag": "first", "hold_s": 1.5}, {"tag": "second", "hold_s": 1.5}]
        started = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(environments, events))
        took = time.monotonic() - started
    assert [answer["tag"] for answer in answers] == ["first", "second"]
    assert answers[0]["pid"] != answers[1]["pid"]
    assert all(answer["function"] == "holder" for answer in answers)
    assert answers[0]["request_id"] != answers[1]["request_id"]
    assert took < 2 * 1.5, f"the two invocations did not overlap ({took:.1f}s)"


def test_one_environment_runs_one_invocation_at_a_time() -> None:
    """With one environment, the second invocation waits for the first (as a function at its concurrency
    limit): its module state is never overwritten mid-invocation. A mutant handing an environment a second
    event while it runs one would interleave them."""
    with ExecutionEnvironments(1, f"{HANDLERS}:hold") as environments, ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(environments, [{"tag": "a", "hold_s": 0.5}, {"tag": "b", "hold_s": 0.5}]))
    assert [answer["tag"] for answer in answers] == ["a", "b"]
    assert answers[0]["pid"] == answers[1]["pid"]


def test_a_handler_that_raises_fails_its_invocation_without_its_message_and_the_environment_serves_on() -> None:
    """The error names the exception's class only (a message may quote the request: a token), and the
    environment is kept (same process next time). A mutant replacing it would start a new process."""
    with ExecutionEnvironments(1, f"{HANDLERS}:fail") as environments:
        (pid,) = environments.pids
        with pytest.raises(EnvironmentFailed) as failed:
            environments({"secret": "hunter2"})
        assert "ValueError" in str(failed.value) and "hunter2" not in str(failed.value)
        assert environments.pids == [pid]


def test_an_environment_that_dies_fails_its_invocation_and_is_replaced() -> None:
    """A process that ends mid-invocation: that invocation fails, a new environment takes the dead one's
    place, and the next invocation is answered. A mutant putting the dead environment back would fail every
    later invocation it gets."""
    with ExecutionEnvironments(1, f"{HANDLERS}:fail") as environments:
        (dead,) = environments.pids
        with pytest.raises(EnvironmentFailed):
            environments({"die": True})
        (replacement,) = environments.pids
        assert replacement != dead and gone(dead)
        with pytest.raises(EnvironmentFailed, match="ValueError"):  # answered by the new one: it raises as told
            environments({"secret": "x"})
        assert environments.pids == [replacement]


def test_stop_ends_every_environment_and_refuses_later_invocations() -> None:
    """After stop no process is left, and an invocation fails instead of waiting for ever for a free
    environment."""
    environments = ExecutionEnvironments(2, f"{HANDLERS}:answer_pid").start()
    pids = environments.pids
    assert len(pids) == 2 and not any(gone(pid) for pid in pids)
    environments.stop()
    assert all(gone(pid) for pid in pids)
    with pytest.raises(EnvironmentFailed, match="stopped"):
        environments({})


def test_environments_end_when_the_platform_process_dies_even_if_a_fork_of_it_lives_on() -> None:
    """The platform's process killed outright (no stop): its environments end on their own, although a
    process it forked (as the workers fork job processes) still holds its end of their connections, so
    they never see the connection close. A mutant waiting only for end-of-file would leave them running."""
    program = textwrap.dedent(f"""
        import os, sys, time
        from onward_infra.environments import ExecutionEnvironments
        environments = ExecutionEnvironments(2, "{HANDLERS}:answer_pid").start()
        fork = os.fork()
        if fork == 0:  # a job process of the workers: outlives its parent here
            os.close(1)
            os.close(2)
            time.sleep(30)
            os._exit(0)
        print(fork, " ".join(map(str, environments.pids)), flush=True)
        os._exit(9)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          cwd=os.getcwd(), check=False)
    fork, *pids = [int(pid) for pid in done.stdout.split()]
    try:
        assert len(pids) == 2, done.stderr
        assert not gone(fork)
        assert all(eventually_gone(pid, within_s=15) for pid in pids)
    finally:
        os.kill(fork, 9)


def test_the_gateway_answers_from_the_environments(stack_environment: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP API served through execution environments, as `onward up` runs it: a job created over HTTP
    by one environment is read back by another, and each saw its own request (a mutant mixing requests
    would answer one tenant with another's job)."""
    monkeypatch.setenv("ONWARD_TOKENS", "acme=acme-secret,globex=globex-secret")
    monkeypatch.delenv("ONWARD_AUTH", raising=False)
    monkeypatch.delenv("ONWARD_JOB_TYPES", raising=False)

    def call(base: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(base + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    with ExecutionEnvironments(2) as environments, LocalGateway(environments, port=0) as gateway:
        with ThreadPoolExecutor(4) as pool:
            created = list(pool.map(
                lambda n: (n, call(gateway.url, "POST", "/jobs", ("acme", "globex")[n % 2] + "-secret",
                                   {"type": "demo.echo", "params": {"n": n}})), range(8)))
        for n, (status, body) in created:
            assert status == 202, body
            tenant_token = ("acme", "globex")[n % 2] + "-secret"
            other_token = ("globex", "acme")[n % 2] + "-secret"
            read, job = call(gateway.url, "GET", f"/jobs/{body['job_id']}/params", tenant_token)
            assert read == 200 and job["params"] == {"n": n}
            assert call(gateway.url, "GET", f"/jobs/{body['job_id']}/params", other_token)[0] == 404

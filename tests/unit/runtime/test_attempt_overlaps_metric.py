"""The AttemptOverlaps metric from both worker runtimes when a fenced late report finds an overlap: the Lambda
worker (onward/entrypoints/worker.py, per invocation) and `onward worker`'s pool (onward/runtime/pool.py, after each
attempt, through onward.telemetry.OverlapsPublisher), each read from its EMF output on stdout, as CloudWatch
Logs reads it.

Without the pool's publisher (or the worker's `attempt_ended` call) the default runtime would find overlaps and
say nothing; without the Lambda handler's count the Lambda worker would not either; a publisher that forgot
what it had published would publish the same overlap again after every attempt, and one that printed a zero
after each attempt would fill the log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.domain.states import RunOutcome
from onward.entrypoints import worker as worker_handler
from onward.runtime.pool import WorkerPool
from onward.runtime.worker import JobContext, Registry
from onward.store.service import JobStore, ReportStatus
from onward.telemetry import OverlapsPublisher
from onward_infra.lambda_context import LocalLambdaContext
from tests.support import ManualClock

LEASE_S = 30
WAIT_S = 60  # a bound for what a machine under load may take, never what a test expects

registry = Registry()


@registry.register("test.wait_for_file")
def wait_for_file(context: JobContext) -> dict[str, bool]:
    """Runs until the file `go` exists (the test creates it once the attempt has been reaped and succeeded)."""
    go = Path(context.params["go"])
    deadline = time.monotonic() + WAIT_S
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"late": True}


@pytest.fixture(autouse=True)
def metrics_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)


def published(stdout: str) -> list[tuple[str, str, dict[str, Any], Any]]:
    """Each metric of the EMF lines printed: (namespace, name, dimensions, value: the sum of its values, as
    CloudWatch's Sum statistic reads a list of them)."""
    found = []
    for line in stdout.splitlines():
        try:
            document = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(document, dict) or "_aws" not in document:
            continue
        for directive in document["_aws"]["CloudWatchMetrics"]:
            dimensions = {name: document[name] for names in directive["Dimensions"] for name in names}
            for metric in directive["Metrics"]:
                value = document[metric["Name"]]
                found.append((directive["Namespace"], metric["Name"], dimensions,
                              sum(value) if isinstance(value, list) else value))
    return found


def overlaps_in(stdout: str) -> list[tuple[str, dict[str, Any], Any]]:
    return [(namespace, dimensions, value) for namespace, name, dimensions, value in published(stdout)
            if name == "AttemptOverlaps"]


def test_the_lambda_worker_publishes_the_overlap_a_fenced_late_report_finds(monkeypatch, capsys) -> None:
    """The invocation's worker is the zombie of attempt 1: reaped, attempt 2 claimed by another worker, then it
    reports: fenced, one overlapping pair found."""
    clock = ManualClock()
    store = JobStore.in_memory(clock=clock)
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    zombie = store.claim("w-zombie", LEASE_S)
    assert zombie is not None
    clock.advance(LEASE_S + 1)
    assert [job.job_id for job in store.reap()] == [job_id]
    assert store.claim("w-successor", LEASE_S) is not None
    clock.advance(5)

    class LateReporter:
        reported = False

        def run_once(self) -> bool:
            if self.reported:
                return False
            self.reported = True
            assert store.complete(zombie, {"late": True}).status is ReportStatus.FENCED
            return True

    deployment = SimpleNamespace(job_store=store, workers=(LateReporter(),), worker_lease_s=1)
    monkeypatch.setattr(worker_handler.Deployment, "from_environment", lambda: deployment)
    capsys.readouterr()
    assert worker_handler.handler({}, LocalLambdaContext("onward-worker")) == {"ran": 1}
    assert store.runs(job_id)[0].overlapped_with == [2]
    assert overlaps_in(capsys.readouterr().out) == [("Onward", {"service": "worker"}, 1.0)]


def test_onward_workers_pool_publishes_the_overlap_its_fenced_late_report_finds(tmp_path, capsys) -> None:
    """A real pool of one worker runs attempt 1 (in its child process); meanwhile the attempt is reaped and
    attempt 2 claimed elsewhere; then the handler returns and the worker's report is fenced: AttemptOverlaps 1,
    namespace Onward, service worker, published once."""
    clock = ManualClock()
    store = JobStore.in_memory(clock=clock)
    go = tmp_path / "go"
    job_id = store.create("acme", NewJob(type="test.wait_for_file", params={"go": str(go)})).job.job_id
    pool = WorkerPool(store, registry, size=1, lease_s=LEASE_S)
    capsys.readouterr()
    pool.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while pool.running < 1:
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.01)
        clock.advance(LEASE_S + 1)
        assert [job.job_id for job in store.reap()] == [job_id]
        successor = store.claim("w-successor", LEASE_S)
        assert successor is not None and successor.attempt == 2
        clock.advance(5)  # the zombie works on while attempt 2 runs
        go.touch()
        while store.runs(job_id)[0].outcome is not RunOutcome.FENCED or pool.running:
            assert time.monotonic() < deadline, "the late report was not made"
            time.sleep(0.01)
    finally:
        drained = pool.drain(stop_timeout_s=WAIT_S)
    assert drained.stuck == 0
    assert store.runs(job_id)[0].overlapped_with == [2]
    assert overlaps_in(capsys.readouterr().out) == [("Onward", {"service": "worker"}, 1.0)]


def test_the_publisher_publishes_each_rise_once_and_nothing_without_one(capsys) -> None:
    found = [3]  # overlaps found before the process's pool started are not its to publish
    publisher = OverlapsPublisher(lambda: found[0])
    capsys.readouterr()
    assert publisher.publish() == 0
    found[0] = 5
    assert publisher.publish() == 2
    assert publisher.publish() == 0
    assert overlaps_in(capsys.readouterr().out) == [("Onward", {"service": "worker"}, 2.0)]


def test_the_publisher_is_quiet_when_metrics_are_disabled(monkeypatch, capsys) -> None:
    """`onward up` and the tests set POWERTOOLS_METRICS_DISABLED: a local pool prints no EMF lines."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    found = [0]
    publisher = OverlapsPublisher(lambda: found[0])
    found[0] = 1
    capsys.readouterr()
    assert publisher.publish() == 1
    assert published(capsys.readouterr().out) == []

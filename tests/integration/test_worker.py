"""The Worker against the embedded endpoint with the real clock: handlers, retries, cancellation,
crashes, lost leases and graceful shutdown."""

from __future__ import annotations

import threading
import time

import pytest

from onward.backoff import BackoffPolicy
from onward.demo import registry as demo_registry
from onward.models import NewJob
from onward.reaper import reap_once
from onward.states import TERMINAL_STATES, JobState, RunOutcome
from onward.store import JobStore
from onward.worker import JobContext, Registry, Worker


@pytest.fixture
def live_store(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb, backoff=BackoffPolicy(base_s=0.05, cap_s=0.2))


def wait_terminal(store: JobStore, job_ids: list[str], timeout_s: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        jobs = {job_id: store.get(job_id) for job_id in job_ids}
        if all(job.state in TERMINAL_STATES for job in jobs.values()):
            return jobs
        time.sleep(0.1)
    raise AssertionError(f"not terminal in time: {[(j.job_id, j.state) for j in jobs.values()]}")


class Pool:
    def __init__(self, store: JobStore, registry: Registry, size: int, lease_s: float = 1.0, **options) -> None:
        self.workers = [Worker(store, registry, worker_id=f"w{n}", lease_s=lease_s, idle_s=0.05, **options)
                        for n in range(size)]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=w.run) for w in self.workers]
        self.threads.append(threading.Thread(target=self._reap, args=(store,)))

    def _reap(self, store: JobStore) -> None:
        while not self.stop.wait(0.1):
            reap_once(store)

    def __enter__(self) -> Pool:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for worker in self.workers:
            worker.shutdown()
        for thread in self.threads:
            thread.join(timeout=30)


def test_the_demo_job_types_end_where_they_should(live_store):
    create = lambda request: live_store.create("acme", request).job.job_id  # noqa: E731
    echo = create(NewJob(type="demo.echo", params={"hello": "world"}))
    flaky = create(NewJob(type="demo.flaky", params={"failures": 2}, max_attempts=3))
    failing = create(NewJob(type="demo.fail", max_attempts=2))
    permanent = create(NewJob(type="demo.fail", params={"permanent": True}, max_attempts=5))
    crash = create(NewJob(type="demo.crash", max_attempts=2))
    unknown = create(NewJob(type="nobody.handles_this"))
    with Pool(live_store, demo_registry, size=4, lease_s=0.5):
        jobs = wait_terminal(live_store, [echo, flaky, failing, permanent, crash, unknown])
    assert jobs[echo].state is JobState.SUCCEEDED and live_store.result(echo) == {"hello": "world"}
    assert jobs[flaky].state is JobState.SUCCEEDED and jobs[flaky].attempt == 3
    assert live_store.result(flaky) == {"succeeded_on_attempt": 3}
    assert jobs[failing].state is JobState.DEAD and jobs[failing].attempt == 2
    assert jobs[permanent].state is JobState.DEAD and jobs[permanent].attempt == 1
    assert jobs[crash].state is JobState.QUARANTINED
    assert [r.outcome for r in live_store.runs(crash)] == [RunOutcome.LEASE_EXPIRED] * 2
    assert jobs[unknown].state is JobState.DEAD
    assert live_store.runs(unknown)[0].error.error_type == "UnknownJobType"


def test_handlers_get_the_fencing_token(live_store):
    seen: list[tuple[str, str]] = []
    registry = Registry()

    @registry.register("t.token")
    def token(context: JobContext) -> str:
        seen.append((context.job_id, context.fencing_token))
        return context.fencing_token

    job_id = live_store.create("acme", NewJob(type="t.token")).job.job_id
    assert Worker(live_store, registry).run_once()
    assert seen == [(job_id, f"{job_id}:1")]


def test_cancel_reaches_a_running_handler_through_the_heartbeat(live_store):
    job_id = live_store.create("acme", NewJob(type="demo.sleep", params={"seconds": 30})).job.job_id
    with Pool(live_store, demo_registry, size=1, lease_s=0.6):
        while live_store.get(job_id).state is not JobState.RUNNING:
            time.sleep(0.05)
        started = time.monotonic()
        assert live_store.cancel(job_id, "acme").status.value == "cancel_requested"
        jobs = wait_terminal(live_store, [job_id])
    assert jobs[job_id].state is JobState.CANCELLED
    assert time.monotonic() - started < 25  # stopped early, not after the full 30 s sleep
    assert live_store.runs(job_id)[0].outcome is RunOutcome.CANCELLED


def test_graceful_shutdown_releases_the_job_it_holds(live_store):
    job_id = live_store.create("acme", NewJob(type="demo.sleep", params={"seconds": 30})).job.job_id
    worker = Worker(live_store, demo_registry, lease_s=5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    while live_store.get(job_id).state is not JobState.RUNNING:
        time.sleep(0.05)
    worker.shutdown()
    thread.join(timeout=10)
    assert not thread.is_alive()
    job = live_store.get(job_id)
    assert job.state is JobState.QUEUED and job.attempt == 1
    assert live_store.runs(job_id)[0].outcome is RunOutcome.RELEASED


def test_a_worker_that_lost_its_lease_stops_and_its_report_is_fenced(live_store):
    """Heartbeats slower than the lease: the reaper reclaims, the next heartbeat tells the handler."""
    stopped = threading.Event()
    registry = Registry()

    @registry.register("t.slow")
    def slow(context: JobContext) -> None:
        try:
            context.wait(10)
        finally:
            stopped.set()

    job_id = live_store.create("acme", NewJob(type="t.slow", max_attempts=1)).job.job_id
    worker = Worker(live_store, registry, lease_s=0.3, heartbeat_s=1.0)
    thread = threading.Thread(target=worker.run_once)
    thread.start()
    time.sleep(0.6)
    reap_once(live_store)
    assert live_store.get(job_id).state is JobState.QUARANTINED
    assert stopped.wait(5), "the handler learned it lost the lease"
    thread.join(timeout=5)
    (run,) = live_store.runs(job_id)
    assert run.outcome is RunOutcome.FENCED and run.reclaimed_as is RunOutcome.LEASE_EXPIRED
    assert run.late_report is RunOutcome.RELEASED

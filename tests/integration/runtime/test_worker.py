"""The Worker against the embedded endpoint with the real clock: handlers, retries, cancellation,
crashes, lost leases and graceful shutdown."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import Self

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import system_clock
from onward.domain.models import NewJob
from onward.domain.states import TERMINAL_STATES, JobState, RunOutcome
from onward.maintenance.reaper import reap_once
from onward.runtime.demo_jobs import registry as demo_registry
from onward.runtime.worker import JobContext, Registry, Worker
from onward.store.service import JobStore

pytestmark = pytest.mark.integration
# Handlers run in a child forked from the worker: what they tell a test goes through their result, or an Event
# or queue shared across the fork.
FORK = multiprocessing.get_context("fork")


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

    def __enter__(self) -> Self:
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
    def create(request: NewJob) -> str:
        return live_store.create("acme", request).job.job_id

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
    registry = Registry()

    @registry.register("t.token")
    def token(context: JobContext) -> list[str]:
        return [context.job_id, context.fencing_token]

    job_id = live_store.create("acme", NewJob(type="t.token")).job.job_id
    assert Worker(live_store, registry).run_once()
    assert live_store.result(job_id) == [job_id, f"{job_id}:1"]


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
    """Heartbeats slower than the lease: the reaper reclaims, the next heartbeat tells the handler. (The
    worker's clock lags a minute, so only the store's answer can tell it: its own expiry watch would stop the
    handler at the expiry, before the reaper.)"""
    stopped = FORK.Event()
    registry = Registry()

    @registry.register("t.slow")
    def slow(context: JobContext) -> None:
        try:
            context.wait(10)
        finally:
            stopped.set()

    job_id = live_store.create("acme", NewJob(type="t.slow", max_attempts=1)).job.job_id
    worker = Worker(live_store, registry, lease_s=0.3, heartbeat_s=1.0, clock=lambda: system_clock() - 60_000)
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


# --- lease renewal through transient store errors -----------------------------------------------------------

def throttled() -> Exception:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem")


def unreachable() -> Exception:
    return EndpointConnectionError(endpoint_url="http://127.0.0.1:1")


class FailingRenewals:
    """The store, except that its lease renewals (`heartbeat`) raise `error()`: the first `failures` of them,
    or every one when `failures` is None; each after hanging `hang_s` (botocore retrying a dead endpoint)."""

    def __init__(self, store: JobStore, error: Callable[[], Exception], failures: int | None,
                 hang_s: float = 0.0) -> None:
        self._store = store
        self._error = error
        self._failures = failures
        self._hang_s = hang_s
        self.calls = 0
        self.renewed = 0

    def renew_lease(self, lease, lease_s):
        self.calls += 1
        if self._failures is None or self.calls <= self._failures:
            time.sleep(self._hang_s)
            raise self._error()
        self.renewed += 1
        return self._store.renew_lease(lease, lease_s)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


@pytest.mark.parametrize("error", [throttled, unreachable])
def test_a_transient_renewal_error_is_retried_and_the_job_completes(live_store, error, caplog):
    """Without the retry the first error ends the renewal thread silently: the lease lapses while the
    handler works on, the reaper requeues the job and the finished work is answered fenced. The lease is 3 s
    (renewed every 1 s) so that a renewal delayed by a loaded machine is not mistaken for a lapse."""
    registry = Registry()

    @registry.register("t.long")
    def long(context: JobContext) -> str:
        context.wait(4.0)
        return "done"

    job_id = live_store.create("acme", NewJob(type="t.long", max_attempts=1)).job.job_id
    flaky = FailingRenewals(live_store, error, failures=1)
    with Pool(flaky, registry, size=1, lease_s=3.0):  # its reaper takes a lapsed lease back at once
        job = wait_terminal(live_store, [job_id], timeout_s=20)[job_id]
    assert (job.state, job.attempt) == (JobState.SUCCEEDED, 1)
    assert live_store.runs(job_id)[0].outcome is RunOutcome.SUCCEEDED
    assert flaky.calls >= 2 and flaky.renewed >= 1
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == ["lease renewal failed"]


@pytest.mark.parametrize("hang_s", [0.0, 2.5], ids=["failing fast", "hanging past the lease"])
def test_renewals_that_keep_failing_stop_the_work_once_the_lease_expired(live_store, hang_s):
    """Without it the work goes on past the lease (the reaper may already have handed the job to another
    worker): the handler never sees should_stop(), or sees it only when a renewal call that hung past the
    expiry returns. It must see it at the expiry, not before it."""
    told = FORK.SimpleQueue()
    registry = Registry()

    @registry.register("t.loop")
    def loop(context: JobContext) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if context.should_stop():
                told.put((system_clock(), context.lease_lost.is_set()))
                context.stop_if_asked()
            time.sleep(0.01)

    job_id = live_store.create("acme", NewJob(type="t.loop")).job.job_id
    broken = FailingRenewals(live_store, unreachable, failures=None, hang_s=hang_s)
    assert Worker(broken, registry, lease_s=1.0).run_once()
    (run,) = live_store.runs(job_id)
    seen = []
    while not told.empty():
        seen.append(told.get())
    assert seen, "the handler was never told to stop"
    (stopped_at, lease_lost), = seen
    assert lease_lost and run.lease_expires_at <= stopped_at <= run.lease_expires_at + 500
    assert broken.calls >= (3 if not hang_s else 1), "retried within the lease"
    assert run.outcome is RunOutcome.RELEASED  # the store answers again: the attempt hands the job back


# --- what a handler hands back or raises --------------------------------------------------------------------

class Opaque:
    pass


@pytest.mark.parametrize("result", [
    {1, 2}, b"bytes", Opaque(), float("nan"), {"x": float("-inf")}, 10 ** 39 + 1, {"big": 1e130},
    {"tiny": 1e-140}, "lone \ud800", {"": 1}, {"x": {"\udfff": 1}},
], ids=["set", "bytes", "object", "nan", "-infinity", "40 digits", "1e130", "1e-140", "surrogate",
        "empty key", "surrogate key"])
def test_a_result_dynamodb_cannot_store_ends_the_job_dead_with_the_reason(live_store, result):
    """Without it the worker loop raises on the result, nothing is reported, the lease lapses and the reaper
    eventually quarantines the job with no word about the result."""
    registry = Registry()
    registry.register("t.odd")(lambda context: result)
    job_id = live_store.create("acme", NewJob(type="t.odd", max_attempts=3)).job.job_id
    assert Worker(live_store, registry, lease_s=30).run_once()
    job = live_store.get(job_id)
    assert (job.state, job.attempt) == (JobState.DEAD, 1)
    assert job.last_error.error_type == "UnstorableResult" and job.last_error.message.startswith("result")
    (run,) = live_store.runs(job_id)
    assert (run.outcome, run.error) == (RunOutcome.FAILED, job.last_error)
    assert live_store.result(job_id) is None


def test_a_handler_error_with_a_lone_surrogate_is_reported(live_store):
    """A handler's message that is not valid Unicode must not make the failure report itself unstorable."""
    registry = Registry()

    @registry.register("t.raise")
    def raises(context: JobContext) -> None:
        raise ValueError("bad byte \udcff here")

    job_id = live_store.create("acme", NewJob(type="t.raise", max_attempts=1)).job.job_id
    assert Worker(live_store, registry, lease_s=30).run_once()
    job = live_store.get(job_id)
    assert job.state is JobState.DEAD and job.last_error.error_type == "ValueError"
    assert job.last_error.message.startswith("bad byte ") and job.last_error.message.endswith(" here")

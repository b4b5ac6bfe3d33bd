"""WorkerPool.drain, the graceful stop of `onward worker`, on the in-memory store: what it waits for, what it
hands back, and how a second signal (`hurried`) cuts the wait short. The same against the embedded endpoint
with a real process and SIGTERM is tests/e2e/test_cli_worker_graceful_stop.py."""

from __future__ import annotations

import threading
import time

from onward.domain.models import NewJob
from onward.domain.states import JobState, RunOutcome
from onward.runtime.demo_jobs import registry
from onward.runtime.pool import WorkerPool
from onward.store.service import JobStore


def running_pool(store: JobStore, jobs: int) -> WorkerPool:
    pool = WorkerPool(store, registry, size=2, lease_s=30.0)
    pool.start()
    deadline = time.monotonic() + 30
    while pool.running < jobs:
        assert time.monotonic() < deadline, "the jobs did not start"
        time.sleep(0.02)
    return pool


def test_an_idle_pool_stops_at_once_with_nothing_to_hand_back() -> None:
    """Without stop_claiming ending the idle waits, the drain would last the whole stop timeout."""
    pool = WorkerPool(JobStore.in_memory(), registry, size=2, lease_s=30.0)
    pool.start()
    started = time.monotonic()
    drained = pool.drain(stop_timeout_s=30.0)
    assert time.monotonic() - started < 5
    assert (drained.held, drained.ended, drained.released, drained.stuck) == (0, 0, 0, 0)


def test_a_job_that_ends_within_the_stop_timeout_succeeds_and_nothing_else_is_claimed() -> None:
    """Were the running job asked to stop at once (the old stop), it would be released, not succeed; were
    claims not stopped, the job queued during the drain would be run."""
    store = JobStore.in_memory()
    job = store.create("acme", NewJob(type="demo.sleep", params={"seconds": 1})).job.job_id
    pool = running_pool(store, 1)
    waiting = store.create("acme", NewJob(type="demo.echo")).job.job_id
    drained = pool.drain(stop_timeout_s=20.0)
    assert (drained.held, drained.ended, drained.released, drained.stuck) == (1, 1, 0, 0)
    assert store.get(job).state is JobState.SUCCEEDED
    assert store.get(waiting).state is JobState.QUEUED


def test_hurry_releases_the_running_jobs_before_the_stop_timeout_uncharged() -> None:
    """The second Ctrl-C / SIGTERM: without `hurried` the drain would wait the whole 60 s."""
    store = JobStore.in_memory()
    jobs = [store.create("acme", NewJob(type="demo.sleep", params={"seconds": 60}, max_attempts=1)).job.job_id
            for _ in range(2)]
    pool = running_pool(store, 2)
    hurry = threading.Event()
    threading.Timer(0.3, hurry.set).start()
    started = time.monotonic()
    drained = pool.drain(stop_timeout_s=60.0, hurried=hurry.is_set)
    assert time.monotonic() - started < 10
    assert (drained.held, drained.ended, drained.released, drained.stuck) == (2, 0, 2, 0)
    for job_id in jobs:
        released = store.get(job_id)
        assert (released.state, released.attempts_used, released.last_outcome) == \
            (JobState.QUEUED, 0, RunOutcome.RELEASED)


def test_a_claim_under_way_when_the_stop_begins_is_counted_and_its_job_runs_to_its_end() -> None:
    """The race CI met: the claim's transaction had committed (the row read RUNNING) but its answer was not
    back, so the worker was not busy yet when SIGTERM came. Counting the busy workers at the start said
    "0 of 2 running jobs ended" for three jobs held; counting what the workers did says 1 of 1."""
    store = JobStore.in_memory()
    job = store.create("acme", NewJob(type="demo.echo")).job.job_id
    committed, answer = threading.Event(), threading.Event()
    claim = store.claim

    def slow_answer(worker_id: str, lease_s: float, *, polling: bool = False) -> object:
        lease = claim(worker_id, lease_s, polling=polling)
        if lease is not None:
            committed.set()
            answer.wait(10)
        return lease

    store.claim = slow_answer  # type: ignore[method-assign]
    pool = WorkerPool(store, registry, size=1, lease_s=30.0)
    pool.start()
    assert committed.wait(10), "the job was not claimed"
    assert store.get(job).state is JobState.RUNNING and pool.running == 0
    threading.Timer(0.3, answer.set).start()
    drained = pool.drain(stop_timeout_s=20.0)
    assert (drained.held, drained.ended, drained.released, drained.stuck) == (1, 1, 0, 0)
    assert store.get(job).state is JobState.SUCCEEDED

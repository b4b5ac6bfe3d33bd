"""A worker pool under its job types' retry policies, and handlers that snooze (issue 37), on the embedded AWS
endpoint with the real clock and the handlers in the workers' child processes (as `onward up` runs them).

Times are compared only with the delays the policy and the snooze asked for (a lower bound each: a retry or a
snoozed job must never come back early), never with how long the machine took.
"""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from onward.domain.models import NewJob
from onward.domain.retry_policy import RetryPolicy
from onward.domain.states import TERMINAL_STATES, JobState, RunOutcome
from onward.runtime.pool import WorkerPool
from onward.runtime.worker import Registry, Snooze
from onward.store.service import JobStore

pytestmark = pytest.mark.integration

FLAKY = RetryPolicy(max_attempts=3, base_s=0.4, cap_s=2, jitter="none")
SNOOZE_S = 1.0

registry = Registry()


@registry.register("policy.flaky", retry=FLAKY)
def flaky(context):
    raise ConnectionError("upstream down")


@registry.register("policy.snooze")
def snooze_once(context):
    if context.attempt == 1:
        raise Snooze(SNOOZE_S)
    return {"attempt": context.attempt}


@registry.register("policy.forever", retry=RetryPolicy(max_attempts=1, max_snoozes=2))
def snooze_forever(context):
    raise Snooze(0.2)


@pytest.fixture
def pool(settings, dynamodb):
    store = JobStore(settings, client=dynamodb)
    workers = WorkerPool(store, registry, 2, lease_s=10)
    workers.start()  # publishes the registry's types and policies first
    yield store
    workers.stop()


def _ended(store: JobStore, job_id: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while (job := store.get(job_id)).state not in TERMINAL_STATES:
        assert time.monotonic() < deadline, f"{job_id} still {job.state.value}"
        time.sleep(0.1)
    return job, store.runs(job_id)


def test_a_type_with_a_policy_retries_with_its_delays_and_stops_at_its_max(pool) -> None:
    """Without the worker's policy the job (created without max_attempts) would get the platform's 3 attempts
    by chance but 1 s equal-jitter waits: the waits here must be at least the policy's 0.4 s then 0.8 s, and a
    job created without max_attempts gets the policy's from the declaration the pool published."""
    job = pool.create("acme", NewJob(type="policy.flaky")).job
    assert job.max_attempts == FLAKY.max_attempts

    ended, runs = _ended(pool, job.job_id)

    assert ended.state is JobState.DEAD and [run.outcome for run in runs] == [RunOutcome.FAILED] * 3
    waits = [later.claimed_at - (earlier.finished_at or 0) for earlier, later in pairwise(runs)]
    assert waits[0] >= 400 and waits[1] >= 800, waits


def test_a_snoozing_handler_comes_back_after_its_snooze_not_charged(pool) -> None:
    """Without Snooze crossing the child's pipe the first attempt would fail (charged, error type Snooze); the
    job must come back no earlier than the snooze and succeed with a `snoozed` run record before it."""
    job = pool.create("acme", NewJob(type="policy.snooze", max_attempts=1)).job

    ended, runs = _ended(pool, job.job_id)

    assert ended.state is JobState.SUCCEEDED, ended.last_error
    assert [run.outcome for run in runs] == [RunOutcome.SNOOZED, RunOutcome.SUCCEEDED]
    assert runs[1].claimed_at - (runs[0].finished_at or 0) >= SNOOZE_S * 1000
    assert (ended.snoozes, ended.attempts_used) == (1, 1)


def test_snoozes_past_the_bound_are_failed_attempts(pool) -> None:
    """Without the bound a handler that always snoozes would keep its job forever; its type allows 2."""
    job = pool.create("acme", NewJob(type="policy.forever")).job

    ended, runs = _ended(pool, job.job_id)

    assert [run.outcome for run in runs] == [RunOutcome.SNOOZED, RunOutcome.SNOOZED, RunOutcome.FAILED]
    assert ended.state is JobState.DEAD and ended.last_error is not None
    assert ended.last_error.error_type == "SnoozeLimit"
    assert pool.type_catalog.declared_types(fresh=True)["policy.forever"].policy.max_snoozes == 2

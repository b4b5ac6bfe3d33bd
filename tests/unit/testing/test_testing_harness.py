"""onward.testing.JobHarness, as a handler author uses it: a handler's job runs through the real store, worker
and lifecycle on the in-memory store with a manual clock, in the test's thread; retries, timeouts, cancels and
crashes land where their moments fall on that clock, and the run records say what each attempt came to.

Each test states what it proves of the harness, and so what a handler author can rely on when a test of theirs
passes on it."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import botocore.session
import pytest

from onward.domain.backoff import BackoffPolicy
from onward.domain.models import NewJob
from onward.domain.states import TERMINAL_STATES, JobState
from onward.runtime.worker import JobContext, PermanentError, Registry, SimulatedCrash, Stopped, Worker
from onward.store.service import CancelStatus, JobStore
from onward.testing import AttemptCut, JobHarness, JobRecord, NotSettled, TimeAlreadyMoving


@pytest.fixture
def harness() -> JobHarness:
    return JobHarness()


def test_a_handler_that_returns_succeeds_with_its_result_and_the_fencing_token_of_its_attempt(harness):
    """Proves the handler gets the worker's JobContext (job id, tenant, type, params, attempt, the fencing
    token `<job_id>:<attempt>`, its timeout) and that what it returns is the job's stored result, after the
    transitions a worker commits (queued, running, succeeded)."""
    @harness.register("reports.export", timeout_s=600)
    def export(context: JobContext) -> dict[str, Any]:
        return {"job_id": context.job_id, "tenant": context.tenant_id, "type": context.type,
                "params": context.params, "attempt": context.attempt, "token": context.fencing_token,
                "timeout_s": context.timeout_s}

    record = harness.run("reports.export", {"month": "2026-11"})

    record.assert_succeeded({"job_id": record.job_id, "tenant": "tests", "type": "reports.export",
                             "params": {"month": "2026-11"}, "attempt": 1, "token": f"{record.job_id}:1",
                             "timeout_s": 600.0})
    assert record.outcomes == ["succeeded"]
    assert record.fencing_tokens == [f"{record.job_id}:1"]
    assert record.statuses == ["queued", "running", "succeeded"]


def test_a_failed_attempt_is_retried_after_its_backoff_without_waiting_for_it(harness):
    """Proves a failure is retried as the store's lifecycle says (retry_wait, then a new attempt with a new
    fencing token once its backoff has passed on the clock) and that the run records name each attempt's
    outcome and error class and message. The clock, not the test, waits the backoff (the default policy: at
    least half a second after the first failure)."""
    tokens: list[str] = []

    @harness.register("billing.charge")
    def charge(context: JobContext) -> str:
        tokens.append(context.fencing_token)
        if context.attempt == 1:
            raise ConnectionError("the gateway hung up")
        return "charged"

    record = harness.run("billing.charge", max_attempts=3)

    record.assert_succeeded("charged")
    record.assert_outcomes(["failed", "succeeded"])
    first, second = record.runs
    assert first.error is not None
    assert (first.error.error_type, first.error.message) == ("ConnectionError", "the gateway hung up")
    assert second.error is None
    assert tokens == record.fencing_tokens == [f"{record.job_id}:1", f"{record.job_id}:2"]
    assert record.statuses == ["queued", "running", "retry_wait", "running", "succeeded"]
    assert first.finished_at is not None
    assert second.claimed_at - first.finished_at >= BackoffPolicy().ceiling(1) * 1000 / 2


def test_a_handler_that_always_fails_ends_dead_after_its_attempts_and_a_permanent_error_at_once(harness):
    """Proves the attempt budget is the real one (max_attempts failed attempts, then dead with the last
    error) and that PermanentError is not retried, as in a worker."""
    @harness.register("mail.send")
    def send(context: JobContext) -> None:
        if context.params.get("address") == "":
            raise PermanentError("no address")
        raise TimeoutError("smtp timed out")

    exhausted = harness.run("mail.send", {"address": "a@example.org"}, max_attempts=3)
    refused = harness.run("mail.send", {"address": ""}, max_attempts=3)

    exhausted.assert_state("dead")
    exhausted.assert_outcomes(["failed", "failed", "failed"])
    exhausted.assert_error("TimeoutError", "smtp timed out")
    refused.assert_state(JobState.DEAD)
    refused.assert_outcomes(["failed"])
    refused.assert_error("PermanentError", "no address")


def test_a_worker_dying_mid_job_lets_the_lease_lapse_and_a_job_that_kills_every_worker_is_quarantined(harness):
    """Proves a crashed attempt (SimulatedCrash: the worker dies holding the lease) is closed by the reaper
    only once its lease has expired on the clock (`lease_expired`), the job then claimed again, and that a job
    whose every attempt kills its worker ends quarantined, as the lifecycle decides."""
    @harness.register("video.encode")
    def encode(context: JobContext) -> str:
        if context.params["crash_until"] >= context.attempt:
            raise SimulatedCrash()
        return "encoded"

    recovered = harness.run("video.encode", {"crash_until": 1}, max_attempts=2)
    poison = harness.run("video.encode", {"crash_until": 99}, max_attempts=2)

    recovered.assert_succeeded("encoded")
    recovered.assert_outcomes(["lease_expired", "succeeded"])
    crashed, retried = recovered.runs
    assert retried.claimed_at > crashed.lease_expires_at  # not before the lease lapsed
    poison.assert_state("quarantined")
    poison.assert_outcomes(["lease_expired", "lease_expired"])
    poison.assert_error("LeaseExpired")
    assert harness.crashes == 3


def test_an_attempt_past_its_timeout_fails_with_timeout_at_that_moment_and_is_retried(harness):
    """Proves the worker's timeout applies: a handler whose waits run past the job's timeout_s is cut at that
    moment of the clock (5 s after its claim, however long it meant to wait) and its attempt fails with the
    worker's `Timeout` error, then retried; a handler busy past its type's timeout (`advance`) is cut too."""
    @harness.register("feeds.fetch")
    def fetch(context: JobContext) -> str:
        if context.attempt == 1:
            context.wait(60)
        return "fetched"

    @harness.register("feeds.parse", timeout_s=2)
    def parse(context: JobContext) -> str:
        harness.advance(3)  # busy 3 s, never looking at its stops
        return "never reported"

    slow = harness.run("feeds.fetch", timeout_s=5, max_attempts=2)
    busy = harness.run("feeds.parse", max_attempts=1)

    slow.assert_succeeded("fetched")
    slow.assert_outcomes(["failed", "succeeded"])
    timed_out = slow.runs[0]
    assert timed_out.error is not None and timed_out.error.error_type == "Timeout"
    assert timed_out.error.message == "the attempt ran past its timeout of 5 s and was stopped"
    assert timed_out.finished_at == timed_out.claimed_at + 5_000
    busy.assert_state("dead")
    busy.assert_error("Timeout", "timeout of 2 s")
    assert busy.runs[0].finished_at == busy.runs[0].claimed_at + 2_000


def test_a_cancel_reaches_a_waiting_handler_through_its_lease_renewal_and_ends_the_job_cancelled(harness):
    """Proves a tenant's cancel while the handler runs reaches it as in a worker (the lease renewal answers
    cancel_requested, the handler's `context.wait` raises Stopped) at the moment it is made (2.5 s into the
    attempt: two chunks done, the third not), and the job ends cancelled with its run record `cancelled`."""
    done: list[int] = []

    @harness.register("files.copy")
    def copy(context: JobContext) -> int:
        for chunk in range(10):
            context.wait(1)
            done.append(chunk)
        return len(done)

    job_id = harness.submit("files.copy")
    harness.cancel_after(job_id, 2.5)
    [record] = harness.run_until_settled()

    record.assert_state("cancelled")
    record.assert_outcomes(["cancelled"])
    assert done == [0, 1]
    assert record.runs[0].finished_at == record.runs[0].claimed_at + 2_500


def test_a_cancel_from_inside_the_handler_stops_it_at_its_next_check_and_completion_still_wins(harness):
    """Proves `cancel` made while the handler runs sets `context.cancel_requested` before the handler's next
    `stop_if_asked()` (which raises Stopped: cancelled), and that a handler which returns without looking
    succeeds, the cancel answered too late: completion wins, as the lifecycle says."""
    seen: list[bool] = []

    @harness.register("t.cancelled")
    def heeds(context: JobContext) -> None:
        assert harness.cancel(context.job_id).status is CancelStatus.REQUESTED
        seen.append(context.cancel_requested.is_set())
        context.stop_if_asked()

    @harness.register("t.finishes")
    def finishes(context: JobContext) -> str:
        harness.cancel(context.job_id)
        return "finished"

    stopped = harness.run("t.cancelled")
    finished = harness.run("t.finishes")

    assert seen == [True]
    stopped.assert_state("cancelled")
    stopped.assert_outcomes(["cancelled"])
    finished.assert_succeeded("finished")
    assert harness.cancel(finished.job_id).status is CancelStatus.ALREADY_ENDED


def test_a_handler_deaf_to_a_cancel_is_ended_after_the_stop_grace_and_the_cancel_is_acknowledged():
    """Proves the worker's stop grace applies: a handler busy without looking at its stops is cut
    `stop_grace_s` after the cancel reached it (AttemptCut raised in it, where a worker kills its process)
    and the job still ends cancelled."""
    harness = JobHarness(stop_grace_s=3)
    cut: list[bool] = []

    @harness.register("t.deaf")
    def deaf(context: JobContext) -> str:
        try:
            for _ in range(100):
                harness.advance(1)
        except AttemptCut:
            cut.append(True)
            raise
        return "never reported"

    job_id = harness.submit("t.deaf")
    harness.cancel_after(job_id, 2)
    [record] = harness.run_until_settled()

    assert cut == [True]
    record.assert_state("cancelled")
    record.assert_outcomes(["cancelled"])
    assert record.runs[0].finished_at == record.runs[0].claimed_at + 5_000


def test_a_handler_waiting_past_its_lease_keeps_it_through_the_workers_renewals():
    """Proves the worker's LeaseRenewal runs as the clock passes (every lease_s / 3) while a handler waits
    longer than its lease: the lease is renewed, not lost, and the job succeeds; without the renewals the
    handler would see `lease_lost` at 30 s."""
    harness = JobHarness(lease_s=30)
    renewals = CountingCalls(harness.store, "renew_lease")

    @harness.register("t.long")
    def long(context: JobContext) -> str:
        context.wait(100)
        return "done" if not context.lease_lost.is_set() else "lost"

    record = harness.run("t.long", timeout_s=600)

    record.assert_succeeded("done")
    assert renewals.calls == 10  # at 10, 20, ... 100 s


def test_a_worker_that_cannot_renew_tells_the_handler_its_lease_is_lost_when_it_expires(harness, monkeypatch):
    """Proves the worker's failure path of the renewal: renewals that fail (the store unreachable) are retried
    within the lease, and only when the lease has expired unrenewed (30 s after the claim, on the clock) is
    the handler told `lease_lost`; it stops, the worker hands the job back (released, not charged) and the
    next attempt succeeds."""
    stopped_at: list[int] = []

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the store is unreachable")

    @harness.register("t.long")
    def long(context: JobContext) -> str:
        if context.attempt == 1:
            monkeypatch.setattr(harness.store, "renew_lease", unreachable)
            try:
                context.wait(100)
            except Stopped:
                stopped_at.append(harness.clock())
                assert context.lease_lost.is_set() and not context.cancel_requested.is_set()
                raise
        return "done"

    job_id = harness.submit("t.long", timeout_s=600, max_attempts=1)
    claimed_at = harness.clock()
    harness.run_next()
    monkeypatch.undo()
    record = harness.run_until_settled()[0]

    assert record.job_id == job_id
    assert stopped_at == [claimed_at + 30_000]
    record.assert_succeeded("done")
    record.assert_outcomes(["released", "succeeded"])  # a release is not charged: max_attempts=1 sufficed


def test_a_delayed_job_runs_when_its_time_comes_on_the_clock_and_not_before(harness):
    """Proves `delay_s` is the store's: nothing is due before it (run_next answers None and the clock does not
    move), and run_until_settled moves the clock to its start and runs it there."""
    harness.register("t.later")(lambda context: "ran")
    created_at = harness.clock()
    job_id = harness.submit("t.later", delay_s=3600)

    assert harness.run_next() is None
    assert harness.clock() == created_at
    [record] = harness.run_until_settled()

    assert record.job_id == job_id
    record.assert_succeeded("ran")
    assert record.runs[0].claimed_at == created_at + 3_600_000


def test_a_job_that_never_ends_fails_the_test_saying_what_its_attempts_came_to(harness):
    """Proves run_until_settled cannot spin for ever: a handler that raises Stopped unasked is handed back and
    claimed again without end (as in a worker); NotSettled comes after the step budget, with the attempts."""
    @harness.register("t.restless")
    def restless(context: JobContext) -> None:
        raise Stopped()

    harness.submit("t.restless")
    with pytest.raises(NotSettled, match=r"1 jobs not ended after 250 steps[\s\S]*attempt 1: released"):
        harness.run_until_settled()


def test_what_a_worker_cannot_store_or_run_ends_the_job_as_a_worker_ends_it(harness):
    """Proves the answer travels as the child's does (pickled): a result that does not pickle fails the job
    permanently (UnstorableResult), as does a result the store refuses, and a type with no handler
    (UnknownJobType)."""
    @harness.register("t.lock")
    def lock(context: JobContext) -> Any:
        return threading.Lock()

    @harness.register("t.float")
    def not_json(context: JobContext) -> Any:
        return float("nan")

    harness.run("t.lock").assert_error("UnstorableResult", "does not pickle")
    harness.run("t.float").assert_state("dead")
    harness.run("t.unknown").assert_error("UnknownJobType")


def test_the_harness_answers_as_a_worker_with_its_handler_process_does():
    """Proves the harness's in-process runner changes nothing a test can see: the same handlers run by a
    real Worker (its child process, real time, the same in-memory store kind) end with the same states,
    outcomes, errors and results (a success, retries, a permanent error, an unpicklable result, a timeout,
    an unknown type)."""
    cases: list[tuple[str, dict[str, Any]]] = [
        ("t.echo", {"params": {"n": 1}}), ("t.flaky", {"max_attempts": 3}), ("t.permanent", {"max_attempts": 3}),
        ("t.lock", {}), ("t.slow", {"timeout_s": 0.2, "max_attempts": 1}), ("t.missing", {})]

    def summary(record: JobRecord) -> tuple[Any, ...]:
        return (record.state, record.outcomes, [error and error.error_type for error in record.errors],
                record.result)

    harness = JobHarness(shared_registry())
    in_harness = [summary(harness.run(job_type, **options)) for job_type, options in cases]

    store = JobStore.in_memory(backoff=BackoffPolicy(base_s=0.001, cap_s=0.002))
    worker = Worker(store, shared_registry(), lease_s=30)
    try:
        job_ids = [store.create("tests", NewJob(type=job_type, **options)).job.job_id for job_type, options in cases]
        deadline = time.monotonic() + 60
        while any(store.get(job_id).state not in TERMINAL_STATES for job_id in job_ids):
            assert time.monotonic() < deadline, "the real worker did not settle the jobs in a minute"
            if not worker.run_once():
                time.sleep(0.003)
    finally:
        worker.shutdown()
        worker.run()  # returns at once, ending its handler process
    in_a_worker = [summary(JobRecord(store.get(job_id), tuple(store.runs(job_id)), store.result(job_id), ()))
                   for job_id in job_ids]

    assert in_harness == in_a_worker


def test_two_hundred_jobs_run_with_no_process_thread_socket_or_real_wait(harness, monkeypatch):
    """Proves the harness is the fast path: 200 jobs, each waiting 1 s and half of them failing once, all
    settle with no endpoint or AWS client made (no socket, no botocore client), no process forked, no thread
    started and no real sleep: 200 s and more pass on the clock only. The endpoint-based path makes a socket
    and a request per store call and a child process per worker."""
    made = CountCalls(monkeypatch)
    made.count(socket, "socket")
    made.count(botocore.session.Session, "create_client")
    made.count(os, "fork")
    made.count(threading.Thread, "start")
    made.count(threading.Event, "wait")
    made.count(time, "sleep")

    @harness.register("t.batch")
    def batch(context: JobContext) -> int:
        context.wait(1)
        if context.params["n"] % 2 and context.attempt == 1:
            raise ValueError("first try")
        return int(context.params["n"])

    started_at = harness.clock()
    job_ids = [harness.submit("t.batch", {"n": n}) for n in range(200)]
    records = harness.run_until_settled()

    assert [record.job_id for record in records] == job_ids
    assert [record.result for record in records] == list(range(200))
    assert sum(record.outcomes == ["failed", "succeeded"] for record in records) == 100
    assert harness.clock() - started_at >= 300 * 1000  # 300 attempts of 1 s each, on the clock
    assert made.calls == {"socket": 0, "create_client": 0, "fork": 0, "start": 0, "wait": 0, "sleep": 0}


def test_an_action_that_moves_the_clock_is_refused_and_fails_the_test_not_the_attempt(harness):
    """Proves an action scheduled with `after` that moves the clock itself is refused, saying why, instead of
    moving time twice over; and that an action failing inside a handler's wait fails the test (the error
    raised from run_next) instead of passing for the handler's failure and being retried."""
    harness.after(1, lambda: harness.advance(1))
    with pytest.raises(TimeAlreadyMoving, match="cannot move the clock"):
        harness.advance(5)

    @harness.register("t.waits")
    def waits(context: JobContext) -> None:
        context.wait(10)

    harness.submit("t.waits")
    harness.after(2, lambda: harness.advance(1))
    with pytest.raises(TimeAlreadyMoving):
        harness.run_next()


# --- helpers ------------------------------------------------------------------------------------------------

def shared_registry() -> Registry:
    """Handlers both the harness and a real worker run (no handler refers to a harness)."""
    registry = Registry()

    @registry.register("t.echo")
    def echo(context: JobContext) -> Any:
        return context.params

    @registry.register("t.flaky")
    def flaky(context: JobContext) -> int:
        if context.attempt < 3:
            raise ConnectionError(f"attempt {context.attempt}")
        return context.attempt

    @registry.register("t.permanent")
    def permanent(context: JobContext) -> None:
        raise PermanentError("bad input")

    @registry.register("t.lock")
    def lock(context: JobContext) -> Any:
        return threading.Lock()

    @registry.register("t.slow")
    def slow(context: JobContext) -> str:
        context.wait(5)
        return "slept"

    return registry


class CountingCalls:
    """Counts one method's calls on one object, passing them through."""

    def __init__(self, target: Any, method: str) -> None:
        self.calls = 0
        real: Callable[..., Any] = getattr(target, method)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        setattr(target, method, counted)


class CountCalls:
    """Counts calls of module functions and class methods made while the test runs, passing them through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.calls: dict[str, int] = {}

    def count(self, owner: Any, name: str) -> None:
        real = getattr(owner, name)
        self.calls[name] = 0

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return real(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, counted)


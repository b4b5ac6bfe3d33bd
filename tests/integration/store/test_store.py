"""Every JobStore operation and each of its refusal paths, on each backend: in memory (fast tier) and over
real HTTP to the embedded endpoint (marked `integration`), through tests/conftest.py's `store_backend`."""

from __future__ import annotations

import pytest

from onward.domain.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    PayloadTooLarge,
    UnstorableValue,
)
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState, RunOutcome
from onward.store.service import CancelStatus, JobStore, ReportStatus

ECHO = NewJob(type="demo.echo", params={"n": 1})


@pytest.fixture
def store(store_backend) -> JobStore:
    return store_backend.store()


def statuses(store: JobStore, job_id: str) -> list[tuple[int, str]]:
    return [(event.version, event.status.value) for event in store.events(job_id)]


# --- create ---------------------------------------------------------------------------------------------

def test_create_writes_job_v1_and_its_outbox_event_together(store):
    job = store.create("acme", ECHO).job
    assert store.get(job.job_id) == job
    event = store.events(job.job_id)[0]
    assert (event.event_id, event.version, event.status, event.tenant_id) == (
        f"{job.job_id}:1", 1, JobState.QUEUED, "acme")
    assert event.occurred_at.endswith("Z")


def test_an_idempotent_retry_returns_the_same_job_and_writes_nothing(store, store_backend):
    first = store.create("acme", ECHO, idempotency_key="order-7")
    items = store_backend.item_counts()
    again = store.create("acme", ECHO, idempotency_key="order-7")
    assert (first.created, again.created) == (True, False)
    assert again.job.job_id == first.job.job_id
    assert store_backend.item_counts() == items


def test_the_same_key_with_another_body_is_refused(store, store_backend):
    store.create("acme", ECHO, idempotency_key="order-7")
    before = store_backend.item_counts()
    with pytest.raises(IdempotencyConflict):
        store.create("acme", NewJob(type="demo.echo", params={"n": 2}), idempotency_key="order-7")
    assert store_backend.item_counts() == before


def test_idempotency_keys_are_per_tenant(store):
    a = store.create("acme", ECHO, idempotency_key="k").job
    b = store.create("globex", ECHO, idempotency_key="k").job
    assert a.job_id != b.job_id


@pytest.mark.parametrize(
    ("tenant", "request_", "key", "error"),
    [
        ("acme", NewJob(type="demo.echo", params={"blob": "x" * 300_001}), None, PayloadTooLarge),
        ("bad#tenant", ECHO, None, InvalidRequest),
        ("", ECHO, None, InvalidRequest),
        ("acme", ECHO, "", InvalidRequest),
        ("acme", ECHO, "k" * 129, InvalidRequest),
        ("acme", ECHO, "line\nbreak", InvalidRequest),
    ],
)
def test_bad_input_is_refused_clearly_and_writes_nothing(store, store_backend, tenant, request_, key, error):
    with pytest.raises(error) as refused:
        store.create(tenant, request_, idempotency_key=key)
    assert str(refused.value)
    assert store_backend.item_counts() == (0, 0)


@pytest.mark.parametrize("job_type", ["Demo.Echo", "demo..echo", "1demo", "demo echo", "x" * 129, ""])
def test_invalid_type_names_are_refused_before_any_write(job_type):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        NewJob(type=job_type)


def test_max_attempts_must_be_sane():
    from pydantic import ValidationError

    for bad in (0, -1, 101):
        with pytest.raises(ValidationError):
            NewJob(type="demo.echo", max_attempts=bad)


# --- reads and tenant isolation -------------------------------------------------------------------------

@pytest.mark.parametrize("job_id", ["0" * 32, "not-a-job", "", "JOB#x"])
def test_unknown_job_ids_are_not_found(store, job_id):
    with pytest.raises(JobNotFound):
        store.get(job_id)
    with pytest.raises(JobNotFound):
        store.cancel(job_id, "acme")


def test_another_tenants_job_is_not_found_on_every_operation(store):
    job = store.create("acme", ECHO).job
    for call in (store.get, store.runs, store.result, store.cancel):
        with pytest.raises(JobNotFound):
            call(job.job_id, "globex")
    assert store.get(job.job_id).state is JobState.QUEUED  # the refused cancel changed nothing


# --- claim, heartbeat, complete -------------------------------------------------------------------------

def test_claim_leases_the_job_and_writes_run_one(store, clock):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", lease_s=30)
    assert lease.job_id == job.job_id and lease.attempt == 1 and lease.fencing_token == f"{job.job_id}:1"
    assert lease.lease_expires_at == clock.now + 30_000
    (run,) = store.runs(job.job_id)
    assert (run.attempt, run.worker_id, run.outcome) == (1, "w1", None)
    assert store.claim("w2", lease_s=30) is None  # nothing else is due


def test_complete_stores_the_result_and_closes_the_run(store):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    report = store.complete(lease, {"rows": 3})
    assert report.status is ReportStatus.APPLIED and report.job.state is JobState.SUCCEEDED
    assert store.result(job.job_id) == {"rows": 3}
    assert store.runs(job.job_id)[0].outcome is RunOutcome.SUCCEEDED
    assert statuses(store, job.job_id) == [(1, "queued"), (2, "running"), (3, "succeeded")]
    assert store.events(job.job_id)[-1].result_inline == {"rows": 3}


def test_an_oversized_result_is_refused_before_writing(store):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    with pytest.raises(PayloadTooLarge):
        store.complete(lease, "x" * 400_000)
    assert store.get(job.job_id).state is JobState.RUNNING
    assert len(store.events(job.job_id)) == 2


def test_heartbeat_extends_only_the_holders_lease(store, clock):
    store.create("acme", ECHO)
    lease = store.claim("w1", 30)
    clock.advance(20)
    beat = store.renew_lease(lease, 30)
    assert beat.held and not beat.cancel_requested and beat.lease_expires_at == clock.now + 30_000
    stranger = lease.model_copy(update={"worker_id": "w9"})
    assert not store.renew_lease(stranger, 30).held
    assert store.get(lease.job_id).lease_expires_at == beat.lease_expires_at


def test_a_renewed_lease_is_not_reaped(store, clock):
    store.create("acme", ECHO)
    lease = store.claim("w1", 30)
    clock.advance(25)
    store.renew_lease(lease, 30)
    clock.advance(25)
    assert store.reap() == []
    assert store.get(lease.job_id).state is JobState.RUNNING


# --- fencing --------------------------------------------------------------------------------------------

def test_a_late_report_from_a_reclaimed_attempt_is_fenced_and_recorded_on_its_run(store, clock):
    """Invariant 3: without the attempt in the condition, the zombie's success would overwrite attempt 2."""
    job = store.create("acme", ECHO).job
    zombie = store.claim("w1", 30)
    clock.advance(31)
    (reaped,) = store.reap()
    assert reaped.state is JobState.QUEUED
    current = store.claim("w2", 30)
    assert current.attempt == 2
    report = store.complete(zombie, {"from": "zombie"})
    assert report.status is ReportStatus.FENCED
    assert store.get(job.job_id).state is JobState.RUNNING and store.get(job.job_id).attempt == 2
    first, second = store.runs(job.job_id)
    assert (first.outcome, first.reclaimed_as, first.late_report) == (
        RunOutcome.FENCED, RunOutcome.LEASE_EXPIRED, RunOutcome.SUCCEEDED)
    assert second.outcome is None
    assert store.complete(current, {"from": "w2"}).applied
    assert store.result(job.job_id) == {"from": "w2"}


def test_a_fenced_failure_report_changes_nothing(store, clock):
    store.create("acme", ECHO)
    zombie = store.claim("w1", 30)
    clock.advance(31)
    store.reap()
    before = store.get(zombie.job_id)
    assert store.fail(zombie, ErrorSummary.of("E", "late")).status is ReportStatus.FENCED
    assert store.get(zombie.job_id) == before


# --- failure, retry, exhaustion -------------------------------------------------------------------------

def test_failure_waits_for_backoff_then_retries_under_a_new_attempt(store, clock):
    job = store.create("acme", NewJob(type="demo.flaky", max_attempts=3)).job
    report = store.fail(store.claim("w1", 30), ErrorSummary.of("ConnectionError", "upstream timeout"))
    assert report.job.state is JobState.RETRY_WAIT
    assert report.job.not_before > clock.now
    assert store.claim("w1", 30) is None  # not due yet
    clock.now = report.job.not_before
    second = store.claim("w1", 30)
    assert second.attempt == 2
    runs = store.runs(job.job_id)
    assert runs[0].error.message == "upstream timeout" and runs[0].outcome is RunOutcome.FAILED


def test_exhausted_failures_end_dead(store, clock):
    job = store.create("acme", NewJob(type="demo.fail", max_attempts=2)).job
    for _ in range(2):
        clock.advance(600)
        report = store.fail(store.claim("w1", 30), ErrorSummary.of("E", "x"))
    assert report.job.state is JobState.DEAD
    assert [run.attempt for run in store.runs(job.job_id)] == [1, 2]


def test_permanent_failure_is_dead_at_once(store):
    store.create("acme", ECHO)
    report = store.fail(store.claim("w1", 30), ErrorSummary.of("ValueError", "bad"), permanent=True)
    assert report.job.state is JobState.DEAD and report.job.attempt == 1


def test_a_job_that_kills_every_worker_is_quarantined(store, clock):
    """Invariant 4: without the limit at claim/reap, a poison job would be handed out forever."""
    job = store.create("acme", NewJob(type="demo.crash", max_attempts=2)).job
    for _ in range(2):
        assert store.claim("w1", 5) is not None
        clock.advance(6)
        store.reap()
    final = store.get(job.job_id)
    assert final.state is JobState.QUARANTINED
    assert [run.outcome for run in store.runs(job.job_id)] == [RunOutcome.LEASE_EXPIRED] * 2
    assert store.claim("w1", 5) is None


# --- release, cancel, replay ----------------------------------------------------------------------------

def test_release_hands_the_job_back_without_another_attempt(store):
    job = store.create("acme", ECHO).job
    report = store.release(store.claim("w1", 30))
    assert report.job.state is JobState.QUEUED and report.job.attempt == 1
    assert store.runs(job.job_id)[0].outcome is RunOutcome.RELEASED
    assert store.claim("w2", 30).attempt == 2


def test_cancel_of_a_queued_job_is_immediate(store):
    job = store.create("acme", ECHO).job
    outcome = store.cancel(job.job_id, "acme")
    assert outcome.status is CancelStatus.CANCELLED and outcome.job.state is JobState.CANCELLED
    assert store.claim("w1", 30) is None


def test_cancel_of_a_running_job_is_a_request_seen_on_heartbeat(store):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    outcome = store.cancel(job.job_id, "acme")
    assert outcome.status is CancelStatus.REQUESTED and outcome.job.state is JobState.RUNNING
    assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_REQUESTED
    assert store.renew_lease(lease, 30).cancel_requested
    report = store.acknowledge_cancel(lease)
    assert report.applied and report.job.state is JobState.CANCELLED
    assert store.runs(job.job_id)[0].outcome is RunOutcome.CANCELLED
    assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_ENDED


@pytest.mark.parametrize("completion_first", [True, False])
def test_cancel_racing_completion_has_exactly_one_winner(store, completion_first):
    """Invariant 9, both schedules: each write is conditional, so one wins and the loser is told."""
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    if completion_first:
        assert store.complete(lease, "done").applied
        assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_ENDED
        assert store.get(job.job_id).state is JobState.SUCCEEDED
    else:
        assert store.cancel(job.job_id, "acme").status is CancelStatus.REQUESTED
        assert store.acknowledge_cancel(lease).applied
        assert store.complete(lease, "late").status is ReportStatus.FENCED
        assert store.get(job.job_id).state is JobState.CANCELLED
        assert store.result(job.job_id) is None


def test_completion_still_wins_after_a_cancel_request(store):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    store.cancel(job.job_id, "acme")
    assert store.complete(lease, "finished first").job.state is JobState.SUCCEEDED
    assert store.acknowledge_cancel(lease).status is ReportStatus.FENCED


def test_replay_queues_a_dead_job_as_a_new_version_and_keeps_history(store):
    job = store.create("acme", NewJob(type="demo.fail", max_attempts=1)).job
    store.fail(store.claim("w1", 30), ErrorSummary.of("E", "x"))
    replayed = store.replay(job.job_id)
    assert replayed.state is JobState.QUEUED and replayed.version == 4
    lease = store.claim("w1", 30)
    assert lease.attempt == 2
    assert [run.attempt for run in store.runs(job.job_id)] == [1, 2]
    assert statuses(store, job.job_id) == [(1, "queued"), (2, "running"), (3, "dead"), (4, "queued"),
                                           (5, "running")]


@pytest.mark.parametrize("finish", ["queued", "succeeded", "cancelled"])
def test_only_dead_or_quarantined_jobs_replay(store, finish):
    job = store.create("acme", ECHO).job
    if finish == "succeeded":
        store.complete(store.claim("w1", 30))
    elif finish == "cancelled":
        store.cancel(job.job_id)
    before = store.get(job.job_id)
    with pytest.raises(NotReplayable):
        store.replay(job.job_id)
    assert store.get(job.job_id) == before


def test_terminal_jobs_absorb_every_late_operation(store, clock):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    store.complete(lease, 1)
    final = store.get(job.job_id)
    assert store.fail(lease, ErrorSummary.of("E", "x")).status is ReportStatus.FENCED
    assert store.release(lease).status is ReportStatus.FENCED
    assert not store.renew_lease(lease, 30).held
    clock.advance(3600)
    assert store.reap() == []
    assert store.claim("w2", 30) is None
    assert store.get(job.job_id) == final


# --- priorities inside a tenant -------------------------------------------------------------------------

def test_a_due_job_of_higher_priority_is_claimed_first_and_keeps_its_priority_on_retry(store, clock):
    """Without the per-priority ready queues the claim would take the tenant's jobs in due-time order only."""
    low = store.create("acme", NewJob(type="demo.echo", priority=0)).job
    clock.advance(1)
    high = store.create("acme", NewJob(type="demo.echo", priority=7)).job
    clock.advance(1)
    first = store.claim("w1", 30)
    assert first.job_id == high.job_id
    report = store.fail(first, ErrorSummary.of("E", "transient"))
    assert report.job.priority == 7
    clock.now = report.job.not_before
    assert store.claim("w1", 30).job_id == high.job_id  # due again: still ahead of the low one
    assert store.claim("w1", 30).job_id == low.job_id


def test_a_delayed_high_priority_job_does_not_block_a_due_lower_one(store, clock):
    high = store.create("acme", NewJob(type="demo.echo", priority=9)).job
    low = store.create("acme", NewJob(type="demo.echo", priority=1)).job
    store.fail(store.claim("w1", 30), ErrorSummary.of("E", "x"))  # high now waits for its backoff
    assert store.get(high.job_id).state is JobState.RETRY_WAIT
    assert store.claim("w1", 30).job_id == low.job_id


def test_priority_must_be_between_zero_and_nine():
    from pydantic import ValidationError

    for bad in (-1, 10):
        with pytest.raises(ValidationError):
            NewJob(type="demo.echo", priority=bad)


# --- a cancel request outlives the attempt --------------------------------------------------------------

def counters(store: JobStore, tenant_id: str = "acme") -> tuple[int, int]:
    """(running, waiting) as the dispatch counters hold them."""
    state = store.tenant_states()[tenant_id]
    return state.usage.running, sum(state.waiting_by_queue.values())


@pytest.mark.parametrize("max_attempts", [3, 1])
def test_a_cancel_request_ends_the_job_when_its_worker_vanishes(store, clock, max_attempts):
    """Without it the reaper requeues the job and clears the request: the job runs again after the tenant
    cancelled it. The counters stay exact: nothing running, nothing waiting."""
    job = store.create("acme", NewJob(type="demo.echo", max_attempts=max_attempts)).job
    store.claim("w1", 30)
    assert store.cancel(job.job_id, "acme").status is CancelStatus.REQUESTED
    clock.advance(31)
    (reaped,) = store.reap()
    assert reaped.state is JobState.CANCELLED and store.get(job.job_id) == reaped
    (run,) = store.runs(job.job_id)
    assert run.outcome is RunOutcome.LEASE_EXPIRED
    assert store.claim("w2", 30) is None
    assert counters(store) == (0, 0)
    assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_ENDED


@pytest.mark.parametrize("permanent", [False, True])
def test_a_cancel_request_ends_the_job_when_the_attempt_fails(store, clock, permanent):
    """Without it the failed attempt goes to retry_wait, the next claim clears the request and the job runs
    again after the tenant cancelled it. The error stays on the job and the run record."""
    job = store.create("acme", NewJob(type="demo.echo", max_attempts=3)).job
    lease = store.claim("w1", 30)
    store.cancel(job.job_id, "acme")
    error = ErrorSummary.of("Boom", "upstream down")
    report = store.fail(lease, error, permanent=permanent)
    assert report.applied and report.job.state is JobState.CANCELLED and report.job.last_error == error
    (run,) = store.runs(job.job_id)
    assert (run.outcome, run.error) == (RunOutcome.FAILED, error)
    clock.advance(600)
    assert store.claim("w1", 30) is None
    assert counters(store) == (0, 0)


# --- a report repeated by the attempt that made it --------------------------------------------------------

def test_a_complete_retried_after_its_answer_was_lost_is_the_same_report(store):
    """Without it the retry is answered fenced (the worker believes its success was refused) and the
    succeeded run record is rewritten as fenced."""
    from botocore.exceptions import EndpointConnectionError

    from onward.faults import injected

    def answer_lost(_point: str) -> None:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")

    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    with injected("store.after_commit", answer_lost), pytest.raises(EndpointConnectionError):
        store.complete(lease, {"rows": 3})
    versions = len(store.events(job.job_id))
    again = store.complete(lease, {"rows": 3})
    assert again.status is ReportStatus.APPLIED and again.job == store.get(job.job_id)
    assert again.job.state is JobState.SUCCEEDED and len(store.events(job.job_id)) == versions
    (run,) = store.runs(job.job_id)
    assert (run.outcome, run.late_report, run.reclaimed_as) == (RunOutcome.SUCCEEDED, None, None)
    for repeat in (store.fail(lease, ErrorSummary.of("E", "x")), store.acknowledge_cancel(lease),
                   store.release(lease)):
        assert repeat.status is ReportStatus.FENCED  # another outcome than the attempt's own
    assert store.runs(job.job_id) == [run], "the attempt's own outcome is never overwritten with fenced"


def test_a_repeated_release_that_acknowledged_a_cancel_is_the_same_report(store):
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    store.cancel(job.job_id, "acme")
    assert store.release(lease).job.state is JobState.CANCELLED
    assert store.release(lease).status is ReportStatus.APPLIED
    assert store.runs(job.job_id)[0].outcome is RunOutcome.CANCELLED


# --- release, replay and the attempt budget ---------------------------------------------------------------

def test_a_release_at_the_last_attempt_is_not_charged(store):
    """Without it the next claim ends the job dead with no error: a graceful shutdown used up the budget of
    a job that never failed."""
    job = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job
    released = store.release(store.claim("w1", 30)).job
    assert (released.state, released.attempt, released.attempt_floor) == (JobState.QUEUED, 1, 1)
    again = store.claim("w1", 30)
    assert again is not None and again.job_id == job.job_id and again.attempt == 2


def test_a_job_ended_at_claim_says_why(store, store_backend):
    """Invariant 4 for a row left at its limit (as a release charged it before releases were free): the
    claim ends it dead with the reason instead of running it. Without the reason the job is dead with no
    last_error."""
    job = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job
    store.release(store.claim("w1", 30))
    store_backend.edit_job_row(job.job_id, attempt_floor=0)
    assert store.claim("w1", 30) is None
    dead = store.get(job.job_id)
    assert dead.state is JobState.DEAD and dead.last_error.error_type == "AttemptsExhausted"
    assert store.events(job.job_id)[-1].error == dead.last_error
    assert counters(store) == (0, 0)


def test_the_first_retry_after_a_replay_backs_off_from_a_fresh_budget(store, clock):
    """Without it the backoff counts the absolute attempt number: after a replay of a job at attempt 6 the
    first retry waits 32 to 64 s instead of at most 1 s."""
    job = store.create("acme", NewJob(type="demo.fail", max_attempts=6)).job
    for _ in range(6):
        clock.advance(600)
        store.fail(store.claim("w1", 30), ErrorSummary.of("E", "x"))
    assert store.get(job.job_id).state is JobState.DEAD
    store.replay(job.job_id)
    lease = store.claim("w1", 30)
    assert lease.attempt == 7
    report = store.fail(lease, ErrorSummary.of("E", "x"))
    assert report.job.state is JobState.RETRY_WAIT and report.job.not_before - clock.now <= 1000


# --- results DynamoDB cannot store --------------------------------------------------------------------------

class Opaque:
    pass


def nested(levels: int) -> list[object]:
    """A list `levels` deep (the result attribute itself is level 1)."""
    value: list[object] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("result", [
    {1, 2}, b"bytes", Opaque(), float("nan"), {"x": float("inf")}, 10 ** 39 + 1, 1e127, 1e-131,
    "lone \ud800 surrogate", {"": 1}, {"lone \udc00": 1}, nested(33),
], ids=["set", "bytes", "object", "nan", "infinity", "40 digits", "1e127", "1e-131", "surrogate",
        "empty key", "surrogate key", "33 levels"])
def test_a_result_dynamodb_cannot_store_is_refused_before_writing(store, result):
    """Without the check in JobStore.complete the result fails inside the write (a TypeError or a refused
    transaction) or is stored where an emulator accepts it: the worker gets no clear refusal to report."""
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    with pytest.raises(UnstorableValue) as refused:
        store.complete(lease, result)
    assert isinstance(refused.value, InvalidRequest) and str(refused.value).startswith("result")
    assert store.get(job.job_id).state is JobState.RUNNING and len(store.events(job.job_id)) == 2

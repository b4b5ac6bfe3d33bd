"""What each operation does to a job, decided from the job row alone (pure, no I/O).

Each function returns a `Change` (the store commits it as one conditional transaction) or a `Refusal`
saying why the operation does not apply to the job as it is now. The store re-reads and asks again when its
conditional write loses a race, so these decisions always see the current row.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.models import ErrorSummary, Job, NewJob, Run
from onward.domain.states import (
    CLAIMABLE_STATES,
    ENDS_WITH_ERROR,
    REPLAYABLE_STATES,
    IllegalTransition,
    JobState,
    RunOutcome,
    Transition,
    check_transition,
    is_terminal,
)


class RefusalReason(StrEnum):
    FENCED = "fenced"  # the caller's attempt no longer holds the job
    NOT_CLAIMABLE = "not_claimable"
    NOT_DUE = "not_due"
    NOT_EXPIRED = "not_expired"
    ALREADY_ENDED = "already_ended"
    ALREADY_REQUESTED = "already_requested"
    NOT_REPLAYABLE = "not_replayable"


@dataclass(frozen=True)
class Refusal:
    reason: RefusalReason
    job: Job


@dataclass(frozen=True)
class RunClosure:
    attempt: int
    outcome: RunOutcome
    finished_at: EpochMs
    error: ErrorSummary | None = None


@dataclass(frozen=True)
class Change:
    """One transition: the job row before and after, and what else commits with it."""

    transition: Transition
    before: Job | None
    after: Job
    open_run: Run | None = None
    close_run: RunClosure | None = None
    result: Any = None
    has_result: bool = False


Decision = Change | Refusal


def _advance(before: Job, transition: Transition, now: EpochMs, **updates: Any) -> Job:
    target = updates.get("state", before.state)
    check_transition(transition, before.state, target)
    after = before.model_copy(update={"version": before.version + 1, "updated_at": now, **updates})
    if target in ENDS_WITH_ERROR and after.last_error is None:
        raise IllegalTransition(f"{transition.value}: {target.value} without the reason (last_error)")
    return after


def _holds(job: Job, attempt: int, worker_id: str) -> bool:
    return job.state is JobState.RUNNING and job.attempt == attempt and job.lease_owner == worker_id


_NO_LEASE: dict[str, Any] = {"lease_owner": None, "lease_expires_at": None}


def create(job_id: str, tenant_id: str, request: NewJob, now: EpochMs) -> Change:
    """A new queued job, due at once, or at its run_at / after its delay_s (never before `now`)."""
    run_at = request.start_at(now)
    job = Job(
        job_id=job_id,
        tenant_id=tenant_id,
        type=request.type,
        params=request.params,
        max_attempts=request.max_attempts,
        priority=request.priority,
        timeout_s=request.timeout_s,
        state=JobState.QUEUED,
        version=1,
        attempt=0,
        not_before=now if run_at is None else max(now, run_at),
        run_at=run_at,
        created_at=now,
        updated_at=now,
        tags=request.tags or None,
        trace_parent=request.trace_parent,  # trace context (issue 38)
        trace_state=request.trace_state,
        rate_limit_key=request.rate_limit_key,  # rate limits (issue 37)
        # concurrency keys (issue 37)
        concurrency_key=request.concurrency.key if request.concurrency is not None else None,
        concurrency_limit=request.concurrency.limit if request.concurrency is not None else None,
    )
    return Change(Transition.CREATE, None, job)


def exhausted_state(job: Job) -> JobState:
    """Where a job goes when its attempts are used up: a job whose last attempt vanished (killed its
    worker) needs a human (quarantined); one that failed by itself is dead."""
    return JobState.QUARANTINED if job.last_outcome is RunOutcome.LEASE_EXPIRED else JobState.DEAD


def claim(job: Job, worker_id: str, lease_ms: int, now: EpochMs) -> Decision:
    if job.state not in CLAIMABLE_STATES:
        return Refusal(RefusalReason.NOT_CLAIMABLE, job)
    if job.not_before > now:
        return Refusal(RefusalReason.NOT_DUE, job)
    if job.attempts_exhausted:
        last = job.last_outcome.value if job.last_outcome else "unrecorded"
        used = f"{job.attempts_used} of {job.max_attempts} attempts used, the last one {last}"
        error = job.last_error or ErrorSummary.of("AttemptsExhausted", used)
        after = _advance(job, Transition.EXHAUST, now, state=exhausted_state(job), last_error=error)
        return Change(Transition.EXHAUST, job, after)
    attempt = job.attempt + 1
    expires = now + lease_ms
    after = _advance(
        job,
        Transition.CLAIM,
        now,
        state=JobState.RUNNING,
        attempt=attempt,
        lease_owner=worker_id,
        lease_expires_at=expires,
        cancel_requested=False,
        rate_reserved_at=None,  # rate limits (issue 37): the claim spends the token it reserved, if any
    )
    run = Run(job_id=job.job_id, attempt=attempt, worker_id=worker_id, claimed_at=now, lease_expires_at=expires)
    return Change(Transition.CLAIM, job, after, open_run=run)


def complete(job: Job, attempt: int, worker_id: str, result: Any, now: EpochMs) -> Decision:
    if not _holds(job, attempt, worker_id):
        return Refusal(RefusalReason.FENCED, job)
    after = _advance(
        job, Transition.COMPLETE, now, state=JobState.SUCCEEDED, last_outcome=RunOutcome.SUCCEEDED,
        last_error=None, **_NO_LEASE,
    )
    closure = RunClosure(attempt, RunOutcome.SUCCEEDED, now)
    return Change(Transition.COMPLETE, job, after, close_run=closure, result=result, has_result=True)


def fail(
    job: Job,
    attempt: int,
    worker_id: str,
    error: ErrorSummary,
    *,
    permanent: bool,
    retry_delay_ms: int,
    now: EpochMs,
) -> Decision:
    """The attempt failed: retry after `retry_delay_ms`, or dead when `permanent` or out of attempts;
    cancelled when the tenant asked to cancel (the error is kept on the job and the run record)."""
    if not _holds(job, attempt, worker_id):
        return Refusal(RefusalReason.FENCED, job)
    if job.cancel_requested:
        state = JobState.CANCELLED
    elif permanent or job.attempts_exhausted:
        state = JobState.DEAD
    else:
        state = JobState.RETRY_WAIT
    not_before = now + retry_delay_ms if state is JobState.RETRY_WAIT else job.not_before
    after = _advance(
        job, Transition.FAIL, now, state=state, not_before=not_before, last_outcome=RunOutcome.FAILED,
        last_error=error, **_NO_LEASE,
    )
    return Change(Transition.FAIL, job, after, close_run=RunClosure(attempt, RunOutcome.FAILED, now, error))


def reap(job: Job, now: EpochMs) -> Decision:
    """A running job whose lease lapsed goes back to the queue, or to quarantine at its limit; cancelled
    when the tenant asked to cancel it (a vanished worker never acknowledges)."""
    if job.state is not JobState.RUNNING:
        return Refusal(RefusalReason.NOT_CLAIMABLE, job)
    if job.lease_expires_at is not None and job.lease_expires_at > now:
        return Refusal(RefusalReason.NOT_EXPIRED, job)
    error = ErrorSummary.of("LeaseExpired", f"worker {job.lease_owner} stopped renewing its lease")
    if job.cancel_requested:
        state = JobState.CANCELLED
    elif job.attempts_exhausted:
        state = JobState.QUARANTINED
    else:
        state = JobState.QUEUED
    after = _advance(
        job, Transition.REAP, now, state=state, not_before=now, last_outcome=RunOutcome.LEASE_EXPIRED,
        last_error=error, **_NO_LEASE,
    )
    closure = RunClosure(job.attempt, RunOutcome.LEASE_EXPIRED, now, error)
    return Change(Transition.REAP, job, after, close_run=closure)


def release(job: Job, attempt: int, worker_id: str, now: EpochMs) -> Decision:
    """Graceful shutdown: the job goes back to the queue, not charged an attempt (the attempt number still
    rises at the next claim: it is the fencing token). With a cancel request pending, it acknowledges it."""
    if not _holds(job, attempt, worker_id):
        return Refusal(RefusalReason.FENCED, job)
    if job.cancel_requested:
        return acknowledge_cancel(job, attempt, worker_id, now)
    after = _advance(
        job, Transition.RELEASE, now, state=JobState.QUEUED, not_before=now,
        attempt_floor=job.attempt_floor + 1, last_outcome=RunOutcome.RELEASED, **_NO_LEASE,
    )
    return Change(Transition.RELEASE, job, after, close_run=RunClosure(attempt, RunOutcome.RELEASED, now))


def cancel(job: Job, now: EpochMs) -> Decision:
    """A tenant's cancel: immediate when nobody runs the job, a request to the worker when one does."""
    if is_terminal(job.state):
        return Refusal(RefusalReason.ALREADY_ENDED, job)
    if job.state is JobState.RUNNING:
        if job.cancel_requested:
            return Refusal(RefusalReason.ALREADY_REQUESTED, job)
        return Change(Transition.REQUEST_CANCEL, job,
                      _advance(job, Transition.REQUEST_CANCEL, now, cancel_requested=True))
    return Change(Transition.CANCEL, job, _advance(job, Transition.CANCEL, now, state=JobState.CANCELLED))


def acknowledge_cancel(job: Job, attempt: int, worker_id: str, now: EpochMs) -> Decision:
    """The worker stopped because cancel was requested: the job ends cancelled."""
    if not _holds(job, attempt, worker_id):
        return Refusal(RefusalReason.FENCED, job)
    after = _advance(
        job, Transition.CANCEL, now, state=JobState.CANCELLED, last_outcome=RunOutcome.CANCELLED, **_NO_LEASE
    )
    return Change(Transition.CANCEL, job, after, close_run=RunClosure(attempt, RunOutcome.CANCELLED, now))


def replay(job: Job, now: EpochMs) -> Decision:
    """Operator replay: a dead or quarantined job is queued again with a fresh attempt budget. The attempt
    number keeps rising (it is the fencing token), the run history is kept."""
    if job.state not in REPLAYABLE_STATES:
        return Refusal(RefusalReason.NOT_REPLAYABLE, job)
    after = _advance(
        job, Transition.REPLAY, now, state=JobState.QUEUED, not_before=now, attempt_floor=job.attempt,
        cancel_requested=False,
    )
    return Change(Transition.REPLAY, job, after)


def snooze(job: Job, attempt: int, worker_id: str, snooze_ms: int, *, max_snoozes: int, retry_delay_ms: int,
           now: EpochMs) -> Decision:
    """snooze (issue 37): the handler asked to run again `snooze_ms` from now. The job goes back to the queue, due
    then, not charged an attempt (as a release: the attempt number still rises at the next claim, the fencing
    token, and `attempt_floor` with it); its run record's outcome is `snoozed`. Past `max_snoozes` the snooze is
    a failed attempt (error type SnoozeLimit, charged, retried as any failure). With a cancel request pending,
    it acknowledges it."""
    if not _holds(job, attempt, worker_id):
        return Refusal(RefusalReason.FENCED, job)
    if job.cancel_requested:
        return acknowledge_cancel(job, attempt, worker_id, now)
    if job.snoozes >= max_snoozes:
        error = ErrorSummary.of(SNOOZE_LIMIT_ERROR, f"the handler snoozed {job.snoozes} times, the most its type "
                                                    f"allows ({max_snoozes}): this snooze counts as a failed attempt")
        return fail(job, attempt, worker_id, error, permanent=False, retry_delay_ms=retry_delay_ms, now=now)
    after = _advance(
        job, Transition.SNOOZE, now, state=JobState.QUEUED, not_before=now + snooze_ms, snoozes=job.snoozes + 1,
        attempt_floor=job.attempt_floor + 1, last_outcome=RunOutcome.SNOOZED, **_NO_LEASE,
    )
    return Change(Transition.SNOOZE, job, after, close_run=RunClosure(attempt, RunOutcome.SNOOZED, now))


SNOOZE_LIMIT_ERROR = "SnoozeLimit"  # error type of a snooze past the job's bound (issue 37)


class StaleReport(StrEnum):
    """What a worker's report is when its attempt no longer holds the job (decided by `stale_report`)."""

    REPEATED = "repeated"  # the attempt already ended itself this way (a retry after a lost answer)
    ZOMBIE = "zombie"  # someone else closed the attempt (the reaper): fenced, and marked on its run record
    CONTRADICTED = "contradicted"  # its run has its own outcome or the fence mark: fenced, nothing written


# The run outcomes a report may write: a release while cancel was requested acknowledges it.
_WRITES: dict[RunOutcome, frozenset[RunOutcome]] = {
    RunOutcome.RELEASED: frozenset({RunOutcome.RELEASED, RunOutcome.CANCELLED}),
    # snooze (issue 37): a snooze past its bound fails the attempt; with cancel requested it acknowledges it
    RunOutcome.SNOOZED: frozenset({RunOutcome.SNOOZED, RunOutcome.FAILED, RunOutcome.CANCELLED}),
}
_CLOSED_BY_OTHERS: frozenset[RunOutcome | None] = frozenset({None, RunOutcome.LEASE_EXPIRED})


def stale_report(run: Run | None, worker_id: str, reported: RunOutcome) -> StaleReport:
    """Judge a report (`reported`: the run outcome it would write) that a job row refused, from the run record
    of its attempt: a repeat is answered as applied, a zombie's report is fenced and marked, and a run's own
    outcome is never overwritten."""
    if run is None or run.worker_id != worker_id:
        return StaleReport.CONTRADICTED
    if run.outcome in _WRITES.get(reported, frozenset({reported})):
        return StaleReport.REPEATED
    if run.outcome in _CLOSED_BY_OTHERS:
        return StaleReport.ZOMBIE
    return StaleReport.CONTRADICTED

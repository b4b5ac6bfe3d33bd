"""What each operation decides from a job row (onward/domain/lifecycle.py), without any I/O."""

import pytest

from onward.domain import lifecycle
from onward.domain.lifecycle import Change, Refusal, RefusalReason, StaleReport
from onward.domain.models import ErrorSummary, NewJob, Run
from onward.domain.states import IllegalTransition, JobState, RunOutcome, Transition

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"


def queued(max_attempts=3):
    return lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo", max_attempts=max_attempts), NOW).after


def claimed(job, worker="w1", now=NOW):
    change = lifecycle.claim(job, worker, 30_000, now)
    assert isinstance(change, Change)
    return change


def test_create_is_version_one_queued_due_now():
    job = queued()
    assert (job.state, job.version, job.attempt, job.not_before) == (JobState.QUEUED, 1, 0, NOW)


def test_claim_increments_the_attempt_inside_the_claim_and_opens_a_run():
    change = claimed(queued())
    assert change.after.attempt == 1 and change.after.version == 2
    assert change.after.state is JobState.RUNNING
    assert change.after.lease_owner == "w1" and change.after.lease_expires_at == NOW + 30_000
    assert change.open_run is not None and change.open_run.attempt == 1


def test_claim_refuses_a_job_not_yet_due():
    job = queued().model_copy(update={"not_before": NOW + 1})
    assert lifecycle.claim(job, "w1", 1000, NOW) == Refusal(RefusalReason.NOT_DUE, job)


def test_claim_ends_an_exhausted_job_instead_of_handing_it_out():
    """Invariant 4: the limit is checked at claim."""
    job = queued(max_attempts=1).model_copy(update={"attempt": 1, "last_outcome": RunOutcome.FAILED})
    change = lifecycle.claim(job, "w1", 1000, NOW)
    assert change.transition is Transition.EXHAUST and change.after.state is JobState.DEAD
    killer = job.model_copy(update={"last_outcome": RunOutcome.LEASE_EXPIRED})
    assert lifecycle.claim(killer, "w1", 1000, NOW).after.state is JobState.QUARANTINED


def test_a_report_from_another_attempt_or_owner_is_fenced():
    running = claimed(queued()).after
    assert lifecycle.complete(running, 2, "w1", None, NOW).reason is RefusalReason.FENCED
    assert lifecycle.complete(running, 1, "w2", None, NOW).reason is RefusalReason.FENCED
    assert isinstance(lifecycle.complete(running, 1, "w1", None, NOW), Change)


def test_fail_retries_with_backoff_then_dies_when_exhausted():
    error = ErrorSummary.of("Boom", "x")
    first = claimed(queued(max_attempts=2)).after
    retry = lifecycle.fail(first, 1, "w1", error, permanent=False, retry_delay_ms=5000, now=NOW)
    assert retry.after.state is JobState.RETRY_WAIT and retry.after.not_before == NOW + 5000
    second = claimed(retry.after, now=NOW + 5000).after
    dead = lifecycle.fail(second, 2, "w1", error, permanent=False, retry_delay_ms=5000, now=NOW)
    assert dead.after.state is JobState.DEAD


def test_permanent_failure_is_dead_at_once():
    running = claimed(queued()).after
    change = lifecycle.fail(running, 1, "w1", ErrorSummary.of("Bad", "x"), permanent=True, retry_delay_ms=1, now=NOW)
    assert change.after.state is JobState.DEAD


def test_reap_needs_a_lapsed_lease_and_quarantines_at_the_limit():
    running = claimed(queued(max_attempts=1)).after
    assert lifecycle.reap(running, NOW).reason is RefusalReason.NOT_EXPIRED
    change = lifecycle.reap(running, NOW + 30_000)
    assert change.after.state is JobState.QUARANTINED
    assert change.close_run.outcome is RunOutcome.LEASE_EXPIRED


def test_cancel_is_immediate_when_queued_and_a_request_when_running():
    assert lifecycle.cancel(queued(), NOW).after.state is JobState.CANCELLED
    running = claimed(queued()).after
    request = lifecycle.cancel(running, NOW)
    assert request.after.state is JobState.RUNNING and request.after.cancel_requested
    assert lifecycle.cancel(request.after, NOW).reason is RefusalReason.ALREADY_REQUESTED


def test_cancel_of_a_finished_job_is_already_ended():
    running = claimed(queued()).after
    done = lifecycle.complete(running, 1, "w1", {"ok": True}, NOW).after
    assert lifecycle.cancel(done, NOW).reason is RefusalReason.ALREADY_ENDED


def test_replay_keeps_the_attempt_number_rising_and_resets_the_budget():
    running = claimed(queued(max_attempts=1)).after
    dead = lifecycle.fail(running, 1, "w1", ErrorSummary.of("E", "x"), permanent=False, retry_delay_ms=1, now=NOW).after
    replayed = lifecycle.replay(dead, NOW).after
    assert replayed.state is JobState.QUEUED and replayed.attempt == 1 and not replayed.attempts_exhausted
    assert claimed(replayed).after.attempt == 2  # a fresh fencing token, never reused
    assert lifecycle.replay(replayed, NOW).reason is RefusalReason.NOT_REPLAYABLE


def test_release_returns_the_job_to_the_queue_without_burning_another_attempt():
    running = claimed(queued()).after
    released = lifecycle.release(running, 1, "w1", NOW)
    assert released.after.state is JobState.QUEUED and released.after.attempt == 1
    assert released.close_run.outcome is RunOutcome.RELEASED


def test_error_messages_are_bounded_and_flagged():
    summary = ErrorSummary.of("E", "x" * 5000)
    assert len(summary.message) == 1000 and summary.message_truncated


# --- a cancel request is kept until the attempt stops ----------------------------------------------------

def requested(max_attempts=3):
    """A running job whose tenant asked to cancel it."""
    running = claimed(queued(max_attempts=max_attempts)).after
    return lifecycle.cancel(running, NOW).after


def test_a_reap_of_a_job_with_a_cancel_request_ends_it_cancelled():
    """Without it the reaper requeues the job (and forgets the request): it runs again after the tenant
    cancelled it. At the limit too: a withdrawn job needs no review, so cancelled beats quarantined."""
    for max_attempts in (3, 1):
        change = lifecycle.reap(requested(max_attempts), NOW + 30_000)
        assert change.after.state is JobState.CANCELLED and change.after.cancel_requested
        assert change.close_run.outcome is RunOutcome.LEASE_EXPIRED
        assert change.after.lease_owner is None and change.after.lease_expires_at is None


def test_a_failure_after_a_cancel_request_ends_the_job_cancelled_and_keeps_the_error():
    """Without it a failed attempt goes to retry_wait, the next claim clears the request and the job runs
    again after the tenant cancelled it."""
    error = ErrorSummary.of("Boom", "x")
    for permanent in (False, True):
        change = lifecycle.fail(requested(), 1, "w1", error, permanent=permanent, retry_delay_ms=5000,
                                now=NOW)
        assert change.after.state is JobState.CANCELLED and change.after.last_error == error
        assert change.close_run == lifecycle.RunClosure(1, RunOutcome.FAILED, NOW, error)


def test_completion_still_wins_over_a_cancel_request():
    change = lifecycle.complete(requested(), 1, "w1", {"done": True}, NOW)
    assert change.after.state is JobState.SUCCEEDED and change.close_run.outcome is RunOutcome.SUCCEEDED


def test_release_after_a_cancel_request_acknowledges_it():
    change = lifecycle.release(requested(), 1, "w1", NOW)
    assert change.after.state is JobState.CANCELLED and change.close_run.outcome is RunOutcome.CANCELLED


# --- a graceful release is not charged; every end says why ----------------------------------------------

def test_a_released_attempt_is_not_charged_against_the_budget():
    """Without it a worker shut down during the last attempt makes the next claim end the job dead, with
    no error, though it never failed. The attempt number still rises (it is the fencing token)."""
    released = lifecycle.release(claimed(queued(max_attempts=1)).after, 1, "w1", NOW).after
    assert (released.attempt, released.attempt_floor, released.attempts_used) == (1, 1, 0)
    again = lifecycle.claim(released, "w2", 30_000, NOW)
    assert again.transition is Transition.CLAIM and again.after.attempt == 2


def test_an_exhausted_job_ends_with_the_reason():
    """Without it a job ended at claim (e.g. a row a release charged before this rule) is dead with no
    last_error, and the status page cannot say why."""
    job = queued(max_attempts=1).model_copy(update={"attempt": 1, "last_outcome": RunOutcome.RELEASED})
    change = lifecycle.claim(job, "w1", 1000, NOW)
    assert change.after.state is JobState.DEAD
    assert change.after.last_error.error_type == "AttemptsExhausted"
    boom = ErrorSummary.of("Boom", "x")
    failed = job.model_copy(update={"last_outcome": RunOutcome.FAILED, "last_error": boom})
    assert lifecycle.claim(failed, "w1", 1000, NOW).after.last_error == boom


def test_every_move_into_dead_or_quarantined_carries_an_error():
    job = queued().model_copy(update={"state": JobState.RUNNING})
    with pytest.raises(IllegalTransition):
        lifecycle._advance(job, Transition.FAIL, NOW, state=JobState.DEAD, last_error=None)


# --- a report from an attempt that no longer holds the job ------------------------------------------------

def run(outcome, worker="w1"):
    return Run(job_id=JOB_ID, attempt=1, worker_id=worker, claimed_at=NOW, lease_expires_at=NOW + 1,
               outcome=outcome)


@pytest.mark.parametrize(("recorded", "claimed_outcome"), [
    (RunOutcome.SUCCEEDED, RunOutcome.SUCCEEDED),
    (RunOutcome.FAILED, RunOutcome.FAILED),
    (RunOutcome.CANCELLED, RunOutcome.CANCELLED),
    (RunOutcome.RELEASED, RunOutcome.RELEASED),
    (RunOutcome.CANCELLED, RunOutcome.RELEASED),  # a release while cancel was requested acknowledged it
])
def test_a_report_the_attempt_already_made_is_a_repeat(recorded, claimed_outcome):
    """Without it a retry after a lost answer (the first try committed) is answered fenced, and the run
    record of a successful attempt is rewritten as fenced."""
    assert lifecycle.stale_report(run(recorded), "w1", claimed_outcome) is StaleReport.REPEATED


@pytest.mark.parametrize("recorded", [RunOutcome.LEASE_EXPIRED, None])
def test_a_report_from_an_attempt_someone_else_closed_is_a_zombies(recorded):
    assert lifecycle.stale_report(run(recorded), "w1", RunOutcome.SUCCEEDED) is StaleReport.ZOMBIE


@pytest.mark.parametrize("recorded", [RunOutcome.SUCCEEDED, RunOutcome.FAILED, RunOutcome.RELEASED,
                                      RunOutcome.CANCELLED, RunOutcome.FENCED])
def test_a_report_contradicting_the_attempts_own_outcome_never_overwrites_it(recorded):
    """Without it an acknowledge_cancel after a completion rewrites the succeeded run as fenced."""
    claimed_outcome = RunOutcome.FAILED if recorded is not RunOutcome.FAILED else RunOutcome.SUCCEEDED
    assert lifecycle.stale_report(run(recorded), "w1", claimed_outcome) is StaleReport.CONTRADICTED


def test_a_report_on_another_workers_run_or_no_run_is_only_fenced():
    assert lifecycle.stale_report(run(RunOutcome.SUCCEEDED, worker="w2"), "w1",
                                  RunOutcome.SUCCEEDED) is StaleReport.CONTRADICTED
    assert lifecycle.stale_report(None, "w1", RunOutcome.SUCCEEDED) is StaleReport.CONTRADICTED

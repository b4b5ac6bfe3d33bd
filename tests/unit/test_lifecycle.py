"""What each operation decides from a job row (onward/lifecycle.py), without any I/O."""

from onward import lifecycle
from onward.lifecycle import Change, Refusal, RefusalReason
from onward.models import ErrorSummary, NewJob
from onward.states import JobState, RunOutcome, Transition

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

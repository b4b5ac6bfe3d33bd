"""A job type's retry policy and the snooze bounds (onward/domain/retry_policy.py, backoff.py's jitter), and the
snooze decision (onward.domain.lifecycle.snooze), without any I/O."""

from __future__ import annotations

import random

import pytest

from onward.domain import lifecycle
from onward.domain.backoff import BackoffPolicy
from onward.domain.lifecycle import Change, Refusal, RefusalReason, StaleReport
from onward.domain.models import NewJob, Run
from onward.domain.retry_policy import (
    MAX_SNOOZE_S,
    PLATFORM_POLICY,
    InvalidRegistration,
    JobTypeDeclaration,
    RetryPolicy,
    check_snooze_s,
)
from onward.domain.states import JobState, RunOutcome

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(("fields", "named"), [
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": 101}, "max_attempts"),
    ({"max_attempts": 2.0}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"),
    ({"base_s": 0}, "base_s"),
    ({"base_s": float("nan")}, "base_s"),
    ({"cap_s": 8 * 86_400}, "cap_s"),
    ({"base_s": 10, "cap_s": 5}, "cap_s"),
    ({"jitter": "half"}, "jitter"),
    ({"permanent": "ValueError"}, "permanent"),
    ({"permanent": ("",)}, "permanent"),
    ({"permanent": (ValueError,)}, "permanent"),
    ({"max_snoozes": 0}, "max_snoozes"),
])
def test_a_policy_out_of_bounds_is_refused_naming_its_field(fields, named) -> None:
    """Without the checks a policy of 0 attempts, a cap below its base or a permanent list given as one string
    (every letter an error type) would be taken and only misbehave later, in a worker."""
    with pytest.raises(InvalidRegistration, match=named):
        RetryPolicy(**fields)


def test_the_platform_policy_is_what_a_job_got_before_policies() -> None:
    """A type without a policy must keep the platform's old behaviour: 3 attempts, 1 s doubling to 300 s, equal
    jitter (the store's default BackoffPolicy)."""
    assert (PLATFORM_POLICY.max_attempts, PLATFORM_POLICY.backoff) == (3, BackoffPolicy())
    assert PLATFORM_POLICY.permanent == () and PLATFORM_POLICY.max_snoozes == 100


@pytest.mark.parametrize(("jitter", "low", "high"), [("equal", 0.5, 1.0), ("full", 0.0, 1.0), ("none", 1.0, 1.0)])
def test_each_jitter_draws_within_its_range_of_the_ceiling(jitter, low, high) -> None:
    """Without the jitter kinds every policy would draw equal jitter; "none" must wait exactly the ceiling and
    "full" must use the whole range below it (spread over many draws)."""
    policy = RetryPolicy(base_s=2, cap_s=600, jitter=jitter)
    rng = random.Random(7)
    draws = [policy.delay_s(attempt, rng) / policy.backoff.ceiling(attempt)
             for attempt in (1, 3, 5) for _ in range(200)]
    assert all(low <= draw <= high for draw in draws)
    assert max(draws) - min(draws) >= (high - low) * 0.9


def test_the_ceiling_doubles_from_base_and_stops_at_the_cap() -> None:
    policy = RetryPolicy(base_s=2, cap_s=10, jitter="none")
    assert [policy.delay_s(attempt) for attempt in range(1, 6)] == [2, 4, 8, 10, 10]


def test_permanent_error_types_are_matched_by_name_only() -> None:
    policy = RetryPolicy(permanent=("ValueError", "ValueError", "billing.Declined"))
    assert policy.permanent == ("ValueError", "billing.Declined")  # each once
    assert policy.is_permanent("ValueError") and not policy.is_permanent("TypeError")


def test_a_declaration_survives_its_stored_form() -> None:
    """What the store keeps is read back as the same policy (numbers come back as int where whole)."""
    declared = JobTypeDeclaration("t", RetryPolicy(max_attempts=5, base_s=2, cap_s=600, jitter="full",
                                                   permanent=("ValueError",), max_snoozes=7), "h:1", "1.0", NOW)
    document = declared.to_document()
    document["policy"]["base_s"] = 2  # as DynamoDB gives a whole number back
    assert JobTypeDeclaration.from_document(document) == declared


@pytest.mark.parametrize("seconds", [0, -1, MAX_SNOOZE_S + 1, float("inf"), "5", True])
def test_a_snooze_length_out_of_range_is_refused(seconds) -> None:
    with pytest.raises(ValueError, match="snooze"):
        check_snooze_s(seconds)


# --- lifecycle.snooze ---------------------------------------------------------------------------------------

def _running(snoozes: int = 0, max_attempts: int = 3):
    job = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo", max_attempts=max_attempts), NOW).after
    claim = lifecycle.claim(job.model_copy(update={"snoozes": snoozes}), "w1", 30_000, NOW)
    assert isinstance(claim, Change)
    return claim.after


def test_a_snooze_queues_the_job_due_later_and_charges_no_attempt() -> None:
    """Without attempt_floor rising, a job of max_attempts=1 that snoozed would end dead at its next claim."""
    change = lifecycle.snooze(_running(max_attempts=1), 1, "w1", 45_000, max_snoozes=3, retry_delay_ms=1, now=NOW)
    assert isinstance(change, Change)
    after = change.after
    assert (after.state, after.not_before, after.snoozes, after.attempts_used) == (JobState.QUEUED, NOW + 45_000, 1, 0)
    assert change.close_run is not None and change.close_run.outcome is RunOutcome.SNOOZED
    again = lifecycle.claim(after, "w1", 30_000, NOW + 45_000)
    assert isinstance(again, Change) and again.after.state is JobState.RUNNING


def test_a_snooze_at_its_bound_fails_the_attempt() -> None:
    """Without the bound a handler snoozing forever would hold its job queued forever."""
    change = lifecycle.snooze(_running(snoozes=3), 1, "w1", 45_000, max_snoozes=3, retry_delay_ms=9_000, now=NOW)
    assert isinstance(change, Change)
    assert (change.after.state, change.after.not_before, change.after.attempts_used) == (
        JobState.RETRY_WAIT, NOW + 9_000, 1)
    assert change.after.last_error is not None and change.after.last_error.error_type == "SnoozeLimit"


def test_a_snooze_is_fenced_and_acknowledges_a_pending_cancel() -> None:
    job = _running()
    assert lifecycle.snooze(job, 2, "w1", 1_000, max_snoozes=3, retry_delay_ms=1, now=NOW) == Refusal(
        RefusalReason.FENCED, job)
    cancelling = job.model_copy(update={"cancel_requested": True})
    change = lifecycle.snooze(cancelling, 1, "w1", 1_000, max_snoozes=3, retry_delay_ms=1, now=NOW)
    assert isinstance(change, Change) and change.after.state is JobState.CANCELLED


@pytest.mark.parametrize("recorded", [RunOutcome.SNOOZED, RunOutcome.FAILED, RunOutcome.CANCELLED])
def test_a_repeated_snooze_report_is_answered_as_applied(recorded) -> None:
    """A snooze whose answer was lost is retried: its run record may say snoozed, failed (past the bound) or
    cancelled (a pending cancel): each is the snooze's own, not a zombie's."""
    run = Run(job_id=JOB_ID, attempt=1, worker_id="w1", claimed_at=NOW, lease_expires_at=NOW + 1, outcome=recorded)
    assert lifecycle.stale_report(run, "w1", RunOutcome.SNOOZED) is StaleReport.REPEATED

"""The worker under its job types' retry policies and a handler's Snooze (issue 37), through onward.testing's
JobHarness: the real Worker, store (in memory) and handler call, on a manual clock."""

from __future__ import annotations

from itertools import pairwise

import pytest

from onward.runtime.worker import InvalidRegistration, Registry, RetryPolicy, Snooze
from onward.testing import JobHarness

FLAKY = RetryPolicy(max_attempts=4, base_s=2, cap_s=5, jitter="none")


def test_a_type_with_a_policy_retries_with_its_delays_and_stops_at_its_max() -> None:
    """Without the worker passing its type's policy to the store, the job would get the platform's 3 attempts
    and its 1 s equal-jitter backoff instead of 4 attempts 2, 4 then 5 s apart."""
    harness = JobHarness()

    @harness.register("flaky", retry=FLAKY)
    def flaky(context):
        raise ConnectionError("upstream down")

    record = harness.run("flaky")
    record.assert_outcomes(["failed"] * 4)
    assert record.job.state.value == "dead" and record.job.max_attempts == 4
    starts = [run.claimed_at for run in record.runs]
    assert [later - earlier for earlier, later in pairwise(starts)] == [2_000, 4_000, 5_000]


def test_an_error_type_listed_permanent_ends_the_job_without_retry() -> None:
    """Without the permanent list a ValueError would be retried like any failure."""
    harness = JobHarness()

    @harness.register("strict", retry=RetryPolicy(permanent=("ValueError",)))
    def strict(context):
        raise ValueError("bad input")

    record = harness.run("strict")
    record.assert_outcomes(["failed"])
    assert record.job.state.value == "dead" and record.errors[0].error_type == "ValueError"


def test_a_snoozing_handler_comes_back_after_its_snooze_with_no_attempt_charged() -> None:
    """Without Snooze crossing the handler's boundary it would be a failed attempt (error type Snooze) and,
    with max_attempts=1, the job would end dead."""
    harness = JobHarness()
    seen: list[int] = []

    @harness.register("poll")
    def poll(context):
        seen.append(harness.clock())
        if len(seen) < 3:
            raise Snooze(20)
        return "ready"

    record = harness.run("poll", max_attempts=1)
    record.assert_succeeded("ready")
    record.assert_outcomes(["snoozed", "snoozed", "succeeded"])
    assert [later - earlier for earlier, later in pairwise(seen)] == [20_000, 20_000]
    assert (record.job.snoozes, record.job.attempts_used) == (2, 1)


def test_snoozes_past_the_types_bound_are_failed_attempts() -> None:
    """Without the bound a handler that always snoozes would never end; past it each snooze is charged."""
    harness = JobHarness()

    @harness.register("forever", retry=RetryPolicy(max_attempts=2, max_snoozes=2, jitter="none"))
    def forever(context):
        raise Snooze(1)

    record = harness.run("forever")
    record.assert_outcomes(["snoozed", "snoozed", "failed", "failed"])
    assert record.job.state.value == "dead" and record.errors[-1].error_type == "SnoozeLimit"


def test_a_snooze_of_a_bad_length_fails_the_attempt_as_a_value_error() -> None:
    harness = JobHarness()

    @harness.register("bad")
    def bad(context):
        raise Snooze(0)

    record = harness.run("bad", max_attempts=1)
    assert record.job.state.value == "dead" and record.errors[0].error_type == "ValueError"


def test_a_registry_refuses_a_retry_that_is_no_policy() -> None:
    with pytest.raises(InvalidRegistration, match="RetryPolicy"):
        Registry().register("t", retry={"max_attempts": 3})  # type: ignore[arg-type]

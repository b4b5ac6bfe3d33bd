"""The region epoch's pure rules (onward.domain.regions): versions per epoch, and what an adoption decides."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.models import Job, NewJob
from onward.domain.regions import (
    ATTEMPTS_PER_EPOCH,
    EPOCH_VERSION_BASE,
    RegionEpoch,
    adoption,
    attempts_apart,
    epoch_of_version,
    first_attempt_of,
    first_version_of,
    version_under,
    writes_refused,
)
from onward.domain.states import IllegalTransition, JobState, RunOutcome, Transition

NOW = 1_800_000_000_000


def running_job(**request: Any) -> Job:
    created = lifecycle.create("0" * 32, "acme", NewJob(type="demo.echo", params={}, **request), NOW).after
    claimed = lifecycle.claim(created, "w", 30_000, NOW + 1)
    assert isinstance(claimed, lifecycle.Change)
    return claimed.after


def test_each_epochs_versions_start_above_every_version_of_the_epochs_before() -> None:
    """Breaks if an epoch's first version were reachable by an earlier epoch's counting (2^32 transitions of
    one job: never), or if epoch 0 changed today's versions (1, 2, ...)."""
    assert first_version_of(0) == 1
    assert first_version_of(1) == EPOCH_VERSION_BASE + 1
    assert [epoch_of_version(version) for version in (1, EPOCH_VERSION_BASE, EPOCH_VERSION_BASE + 1)] == [0, 0, 1]
    assert version_under(7, 0) == 8
    assert version_under(7, 2) == first_version_of(2)
    assert version_under(first_version_of(2) + 4, 2) == first_version_of(2) + 5
    with pytest.raises(ValueError, match="never negative"):
        first_version_of(-1)
    assert RegionEpoch.never_failed_over().epoch == 0


def test_a_running_job_is_adopted_queued_not_charged_its_run_closed() -> None:
    """Without attempt_floor + 1 a job with max_attempts 1 would be exhausted by a platform failure; without
    the closure its run would stay open; with a lease left on the row the reaper would close it again."""
    job = running_job(max_attempts=1)
    change = adoption(job, 1, NOW + 5)
    assert change.transition is Transition.ADOPT
    after = change.after
    assert (after.state, after.version, after.not_before, after.lease_owner) == (
        JobState.QUEUED, first_version_of(1), NOW + 5, None)
    assert after.attempts_used == 0 and not after.attempts_exhausted
    assert change.close_run == lifecycle.RunClosure(job.attempt, RunOutcome.REGION_FAILOVER, NOW + 5)


def test_a_running_job_whose_cancel_was_requested_is_adopted_cancelled() -> None:
    """Its worker is in the lost Region and will never acknowledge: queued again, it would run once more."""
    job = running_job().model_copy(update={"cancel_requested": True})
    assert adoption(job, 1, NOW).after.state is JobState.CANCELLED


def test_a_waiting_job_keeps_its_state_and_due_time() -> None:
    """A restamp that touched the due time would run a retry early."""
    job = running_job()
    waiting = job.model_copy(update={"state": JobState.RETRY_WAIT, "not_before": NOW + 60_000, "lease_owner": None,
                                     "lease_expires_at": None})
    change = adoption(waiting, 3, NOW)
    assert change.close_run is None
    assert change.after == waiting.model_copy(update={"version": first_version_of(3), **attempts_apart(waiting, 3)})
    assert change.after.not_before == waiting.not_before and change.after.state is JobState.RETRY_WAIT


def test_a_row_already_of_the_epochs_versions_is_not_adopted_again() -> None:
    """The store only adopts rows of earlier epochs; a second adoption would skip versions for nothing."""
    job = running_job().model_copy(update={"version": first_version_of(1) + 3})
    with pytest.raises(ValueError, match="already at epoch 1"):
        adoption(job, 1, NOW)
    with pytest.raises(IllegalTransition):
        lifecycle.check_transition(Transition.ADOPT, JobState.QUEUED, JobState.RUNNING)


# --- attempts numbered apart per epoch (fix of issue 39's drill) ------------------------------------------------


def test_an_adopted_job_s_next_attempt_is_numbered_in_its_epoch_s_range_with_its_budget_unchanged() -> None:
    """Without it the new home's first claim of a job the old home had claimed during a partition (its claim
    never replicated) takes the same attempt number: both run records are `RUN#000001`, last writer wins keeps
    one, and that the job ran in both Regions is recorded nowhere (the drill's first finding). Without the
    floor rising by as much, the jump would be charged against max_attempts."""
    queued = lifecycle.create("1" * 32, "acme", NewJob(type="demo.echo", params={}, max_attempts=2), NOW).after
    after = adoption(queued, 1, NOW + 5).after
    assert after.attempt == first_attempt_of(1) - 1 == ATTEMPTS_PER_EPOCH
    assert after.attempts_used == queued.attempts_used == 0
    claimed = lifecycle.claim(after, "w", 30_000, NOW + 6)
    assert isinstance(claimed, lifecycle.Change) and claimed.after.attempt == first_attempt_of(1)
    assert claimed.after.attempts_used == 1

    job = running_job(max_attempts=3)  # attempt 1, running in the old home
    readopted = adoption(job, 2, NOW + 5).after
    assert readopted.attempt == 2 * ATTEMPTS_PER_EPOCH and readopted.attempts_used == 0  # the closed one not charged
    assert first_attempt_of(0) == 1 and first_attempt_of(2) == 2 * ATTEMPTS_PER_EPOCH + 1


def test_an_ended_row_keeps_its_attempts_and_a_row_beyond_the_range_keeps_its_number() -> None:
    """An ended row's adoption is a restamp (its run records are history: renumbering would point its result
    at an attempt that never ran); an attempt already above the epoch's first never goes down (a fencing token
    only rises)."""
    job = running_job()
    ended = job.model_copy(update={"state": JobState.SUCCEEDED, "lease_owner": None, "lease_expires_at": None})
    assert adoption(ended, 1, NOW).after.attempt == job.attempt
    high = job.model_copy(update={"state": JobState.QUEUED, "attempt": ATTEMPTS_PER_EPOCH + 7, "attempt_floor": 3,
                                  "lease_owner": None, "lease_expires_at": None})
    assert attempts_apart(high, 1) == {"attempt": ATTEMPTS_PER_EPOCH + 7, "attempt_floor": 3}


def test_the_new_home_refuses_writes_from_its_epochs_raise_until_its_adoption_is_recorded() -> None:
    """The API's write gate (onward.api.failover_gate) decides by this. Without `adopted_at` the new home would
    take writes over rows its adoption has not restamped; without the Region check the old home, which holds the
    replicated epoch item, would refuse writes too; without the epoch check a deployment that never failed over
    (no item: epoch 0, home None) would."""
    raised = RegionEpoch(epoch=2, home="us-west-2", previous_home="us-east-1", fenced_at=NOW, decided_by="ops",
                         reason="drill")
    refused = writes_refused(raised, "us-west-2")
    assert refused is not None and (refused.epoch, refused.home, refused.previous_home) == (2, "us-west-2",
                                                                                          "us-east-1")
    assert "failover to us-west-2" in refused.detail() and "region epoch 2" in refused.detail()
    assert writes_refused(raised, "us-east-1") is None
    assert writes_refused(raised, None) is None
    assert writes_refused(replace(raised, adopted_at=NOW + 60_000), "us-west-2") is None
    assert writes_refused(RegionEpoch.never_failed_over(), "us-west-2") is None

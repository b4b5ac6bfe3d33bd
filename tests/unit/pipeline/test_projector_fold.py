"""fold_plan (onward/pipeline/projector/projector.py): when one job's events of one batch may be written as one PutItem
of the newest, and under which condition. Pure: no table, no client."""

from __future__ import annotations

from typing import Any

from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.pipeline.projector.projector import FoldedWrite, fold_plan

JOB = "0f" * 16


def event(version: int, status: str = "running", **extra: Any) -> OutboxEvent:
    return OutboxEvent(event_id=f"{JOB}:{version}", job_id=JOB, tenant_id="acme", type="demo.echo",
                       version=version, status=JobState(status), attempt=1,
                       occurred_at=f"2026-12-01T06:50:{version:02d}.000Z", **extra)


def test_rising_versions_fold_into_the_newest_written_under_the_oldest_version() -> None:
    """The condition names the LOWEST version of the batch (the first), not the newest's: a mutant that wrote
    the newest under its own version would overwrite a view holding v3 from a batch of v2, v3, v5, and count
    v2 and v3 as applied although one by one they are stale and a duplicate (or a conflict, never kept)."""
    v2, v3, v5 = event(2, "queued"), event(3), event(5, "succeeded")
    assert fold_plan([v2, v3, v5]) == FoldedWrite(newest=v5, below=2)
    assert fold_plan([v2, v5]) == FoldedWrite(newest=v5, below=2)


def test_a_same_version_pair_is_not_folded() -> None:
    """Two events of one version in one batch: the second is a duplicate or a conflict, which only writing them
    one by one classifies (a conflict is kept apart). A mutant folding them would write v3 over the view and
    count both v2s applied: the conflict between them would be lost."""
    v2, v2_other, v3 = event(2), event(2, "cancelled"), event(3)
    assert fold_plan([v2, v2_other, v3]) is None
    assert fold_plan([v2, v2]) is None  # a redelivered copy in the same batch: a duplicate


def test_an_older_version_after_a_newer_one_is_not_folded() -> None:
    """Batch order v3 then v2 (v2 redelivered behind it): one by one v3 is applied and v2 is stale. A mutant
    folding by the versions alone would count v2 applied too, and the soak's "applied each event exactly
    once" would be off by one."""
    assert fold_plan([event(3), event(2)]) is None
    assert fold_plan([event(1), event(3), event(2)]) is None


def test_a_single_event_is_written_as_it_always_was() -> None:
    """One event: no fold (its own conditional write, classified on refusal); a mutant folding it would lose
    the refusal's classification (duplicate, stale, conflict) of every lone event."""
    assert fold_plan([event(4)]) is None
    assert fold_plan([]) is None

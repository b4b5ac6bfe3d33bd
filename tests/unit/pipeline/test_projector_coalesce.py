"""coalesce (onward/pipeline/projector/coalesce.py): one job's events of one batch judged as writing them one by
one in batch order would judge them, from what the view holds, and the one write that ends the view where
those writes would. Pure: no table, no client; each case is checked against the one-by-one reference."""

from __future__ import annotations

import itertools
from typing import Any

from onward.domain.models import ErrorSummary, OutboxEvent
from onward.domain.projection import ProjectionOutcome, classify, digest, view_fields
from onward.domain.states import JobState
from onward.pipeline.projector.coalesce import Held, coalesce

JOB = "0f" * 16
APPLIED, DUPLICATE, STALE, CONFLICT = (ProjectionOutcome.APPLIED, ProjectionOutcome.DUPLICATE,
                                       ProjectionOutcome.STALE, ProjectionOutcome.CONFLICT)


def event(version: int, status: str = "running", **extra: Any) -> OutboxEvent:
    return OutboxEvent(event_id=f"{JOB}:{version}", job_id=JOB, tenant_id="acme", type="demo.echo",
                       version=version, status=JobState(status), attempt=1,
                       occurred_at=f"2026-12-01T06:50:{version:02d}.000Z", **extra)


def held(e: OutboxEvent) -> Held:
    return Held.of({**view_fields(e), "projected_at": "2026-12-01T06:51:00.000Z"})


def one_by_one(events: list[OutboxEvent], view: Held | None) -> tuple[list[ProjectionOutcome], int | None, str | None]:
    """The reference: each event written in turn under the version guard; the outcomes and where the view ends."""
    version, held_digest = (view.version, view.digest) if view else (None, None)
    outcomes = []
    for e in events:
        outcome = classify(version, held_digest, e)
        outcomes.append(outcome)
        if outcome is APPLIED:
            version, held_digest = e.version, digest(e)
    return outcomes, version, held_digest


def test_a_jobs_lifecycle_in_one_batch_is_one_write_of_the_newest_under_the_first_version() -> None:
    """Three applied events, one write: the newest, made only while the view is below v1. A write conditioned
    on the newest's own version would overwrite a view holding v2 and count v1, v2 applied."""
    events = [event(1, "queued"), event(2), event(3, "succeeded")]
    plan = coalesce(events, None)
    assert plan.outcomes == (APPLIED, APPLIED, APPLIED) and plan.applied == 3
    assert (plan.write, plan.below, plan.conflicts) == (events[2], 1, ())


def test_from_what_the_view_holds_redeliveries_are_duplicates_and_stale_and_only_the_new_is_written() -> None:
    events = [event(1, "queued"), event(2), event(3, "succeeded")]
    plan = coalesce(events, held(events[1]))
    assert plan.outcomes == (STALE, DUPLICATE, APPLIED)
    assert (plan.write, plan.below) == (events[2], 3)
    nothing = coalesce(events, held(events[2]))
    assert nothing.outcomes == (STALE, STALE, DUPLICATE) and nothing.write is None


def test_a_same_version_disagreement_between_two_records_of_the_batch_is_a_conflict_kept_with_both() -> None:
    """One by one the first v2 is applied and the second, other content, is refused as a conflict against it:
    coalesced, the second is a conflict too, kept with the row the first wrote, and never written."""
    first, other = event(2, "succeeded"), event(2, "dead", error=ErrorSummary.of("RuntimeError", "boom"))
    plan = coalesce([event(1, "queued"), first, other, first], None)
    assert plan.outcomes == (APPLIED, APPLIED, CONFLICT, DUPLICATE)
    assert plan.write == first
    (kept,) = plan.conflicts
    assert kept.event == other and kept.held == view_fields(first)


def test_a_disagreement_with_the_view_is_kept_with_the_views_row() -> None:
    in_view = held(event(2, "succeeded"))
    other = event(2, "dead", error=ErrorSummary.of("RuntimeError", "boom"))
    plan = coalesce([other, event(3, "queued")], in_view)
    assert plan.outcomes == (CONFLICT, APPLIED) and plan.write == event(3, "queued") and plan.below == 3
    (kept,) = plan.conflicts
    assert kept.event == other and kept.held is in_view.row


def test_a_newer_event_before_an_older_one_leaves_the_older_stale_and_never_goes_back() -> None:
    plan = coalesce([event(3, "succeeded"), event(2)], None)
    assert plan.outcomes == (APPLIED, STALE) and plan.write == event(3, "succeeded") and plan.below == 3


def test_every_order_of_every_small_batch_matches_one_by_one_from_every_view() -> None:
    """Exhaustive over small cases: outcomes, the view's end and the conflicts equal the one-by-one reference;
    the write happens exactly when one by one would change the view, and its condition holds for the view
    the plan was decided from; the plan made before knowing the view is right whenever its write's condition
    holds (a condition on the newest's version instead would let it stand for a view it misjudges)."""
    variants = [event(1, "queued"), event(2), event(2, "dead", error=ErrorSummary.of("E", "x")),
                event(3, "succeeded")]
    views: list[Held | None] = [None, *(held(v) for v in variants)]
    for size in (1, 2, 3):
        for events in itertools.product(variants, repeat=size):
            for view in views:
                plan = coalesce(list(events), view)
                outcomes, end_version, end_digest = one_by_one(list(events), view)
                # The first write's plan, assuming a view below the first event: exact whenever its condition holds.
                assumed = coalesce(list(events), None)
                if view is None or (view.version or 0) < assumed.below:
                    assert list(assumed.outcomes) == outcomes, (events, view)
                assert list(plan.outcomes) == outcomes, (events, view)
                assert len(plan.conflicts) == outcomes.count(CONFLICT)
                if APPLIED in outcomes:
                    assert plan.write is not None
                    assert (plan.write.version, digest(plan.write)) == (end_version, end_digest)
                    assert view is None or view.version is None or view.version < plan.below
                else:
                    assert plan.write is None

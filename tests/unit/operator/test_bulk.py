"""onward.operator.bulk without AWS: the filter's rules and matching (pure), and BulkAction over the in-memory store
with
a status view read straight from the store's job rows (so the view is never behind unless a test moves a job)."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain.clock import iso
from onward.domain.errors import StoreContention
from onward.domain.models import StatusView
from onward.domain.states import JobState
from onward.operator.bulk import (
    MAX_FAILURES_IN_A_ROW,
    BulkAction,
    BulkFilter,
    BulkKind,
    InvalidBulkFilter,
    Progress,
)
from onward.pipeline.view import JobFilter
from onward.store.service import JobStore
from tests.support import dead

REPLAY, CANCEL = BulkKind.REPLAY, BulkKind.CANCEL


class StoreView:
    """The status view as the store's rows are now, a tenant's newest change first, in pages (the interface
    BulkAction reads, onward.pipeline.view.StatusViewReader's)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.reads = 0

    def for_tenant(self, tenant_id: str, *, limit: int, where: JobFilter | None = None,
                   start: Any = None) -> tuple[list[StatusView], Any]:
        self.reads += 1
        jobs = sorted((job for job in self.store.all_jobs() if job.tenant_id == tenant_id),
                      key=lambda job: (job.updated_at, job.job_id), reverse=True)
        views = [StatusView(job_id=job.job_id, tenant_id=job.tenant_id, type=job.type, status=job.state,
                            version=job.version, attempt=job.attempt, cancel_requested=job.cancel_requested,
                            occurred_at=iso(job.updated_at), projected_at=iso(job.updated_at), digest="-")
                 for job in jobs if where is None or not where.statuses or job.state.value in where.statuses]
        offset = start or 0
        page = views[offset:offset + limit]
        return page, (offset + limit if offset + limit < len(views) else None)



@pytest.mark.parametrize(("kind", "fields", "field"), [
    (CANCEL, {}, "tenant"),
    (REPLAY, {"states": frozenset({JobState.RUNNING})}, "states"),
    (CANCEL, {"tenant_id": "acme", "states": frozenset({JobState.DEAD})}, "states"),
    (REPLAY, {"since": 2, "until": 1}, "until"),
])
def test_a_filter_the_action_cannot_honour_is_refused_naming_the_field(kind, fields, field) -> None:
    """Catches a bulk cancel over every tenant, a replay of jobs that cannot replay (or a cancel of ended ones),
    and an empty window being accepted (it would quietly select nothing, or the wrong thing)."""
    with pytest.raises(InvalidBulkFilter) as refused:
        BulkFilter(kind, **fields)
    assert refused.value.field == field


def test_the_window_is_inclusive_on_when_the_status_began(memory_store, clock) -> None:
    """Catches a window on the wrong time or with an exclusive end, and the read not stopping at the window's
    older end (every later job in the view's order changed earlier)."""
    first = dead(memory_store, "acme", 1)
    clock.advance(10)
    middle = dead(memory_store, "acme", 1)
    at = clock.now
    clock.advance(10)
    dead(memory_store, "acme", 1)
    view = StoreView(memory_store)
    selected = BulkAction(memory_store, view).select(BulkFilter(REPLAY, "acme", since=at, until=at))
    assert [job.job_id for job in selected.jobs] == middle and not selected.more
    assert first[0] in [job.job_id for job in BulkAction(memory_store, view).select(
        BulkFilter(REPLAY, "acme", since=at - 10_000)).jobs]
    after_first = BulkAction(memory_store, view).select(BulkFilter(REPLAY, "acme", since=at - 9_999))
    assert len(after_first.jobs) == 2 and first[0] not in [job.job_id for job in after_first.jobs]


def test_progress_is_reported_every_n_jobs_and_the_counts_add_up(memory_store) -> None:
    """Catches progress not called every N (or not after the last job), and a report whose applied, skipped,
    failed and unprocessed do not add up to what matched."""
    dead(memory_store, "acme", 5)
    seen: list[Progress] = []
    report = BulkAction(memory_store, StoreView(memory_store)).run(
        BulkFilter(REPLAY), dry_run=False, progress=seen.append, progress_every=2)
    assert [(p.done, p.matched) for p in seen] == [(2, 5), (4, 5), (5, 5)]
    assert (report.matched, report.applied, report.unprocessed, report.failed) == (5, 5, 0, 0)
    assert report.applied_by_outcome == {"queued": 5} and len(report.applied_ids) == 5


def test_failures_are_reported_and_a_failing_store_stops_the_run(memory_store, monkeypatch) -> None:
    """Catches one job's error ending the whole run (or being swallowed), and a store that fails every job being
    hammered for all of them instead of stopping with the rest unprocessed."""
    dead(memory_store, "acme", MAX_FAILURES_IN_A_ROW + 5)

    def contended(job_id: str) -> Any:
        raise StoreContention(job_id)

    monkeypatch.setattr(memory_store, "replay", contended)
    report = BulkAction(memory_store, StoreView(memory_store)).run(BulkFilter(REPLAY, "acme"), dry_run=False)
    assert (report.failed, report.unprocessed, report.stopped) == (MAX_FAILURES_IN_A_ROW, 5, "failures")
    assert report.failures[0].error.startswith("StoreContention")
    assert report.matched == report.applied + sum(report.skipped.values()) + report.failed + report.unprocessed


def test_a_time_budget_stops_acting_and_leaves_the_rest_unprocessed(memory_store) -> None:
    """Catches a bulk action over HTTP that keeps going past its request's time limit."""
    dead(memory_store, "acme", 4)
    ticks = iter(range(100))
    report = BulkAction(memory_store, StoreView(memory_store), clock=lambda: float(next(ticks))).run(
        BulkFilter(REPLAY), dry_run=False, budget_s=2.5)
    assert report.stopped == "time_budget" and report.applied + report.unprocessed == 4 and report.unprocessed > 0

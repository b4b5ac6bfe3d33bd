"""Bulk operator actions: replay the dead and quarantined jobs, or cancel the waiting and running jobs, that a
filter selects; a dry run only counts them, a run reports what became of each.

The selection reads the status view (a tenant's jobs, most recently changed first, each row re-read
consistently), so it can be behind the job table by the view's lag. Each selected job is then moved by the
store's own transition, which decides from the job row and refuses what no longer applies (a job replayed or
finished meanwhile): such a job is counted as skipped, with the reason, never forced. One call selects at most
`max_jobs` (MAX_JOBS) jobs, and `more` says when the filter matched more: run it again for the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

from onward.domain.clock import EpochMs, epoch_ms
from onward.domain.errors import JobNotFound, NotReplayable
from onward.domain.models import StatusView
from onward.domain.states import CANCELLABLE_STATES, REPLAYABLE_STATES, JobState
from onward.pipeline.view import JobFilter, Key
from onward.store.service import CancelStatus, JobStore

MAX_JOBS = 10_000  # jobs one call selects at most
PAGE = 100  # view rows asked for per read
SAMPLE = 20  # ids of the selection a report shows
APPLIED_IDS_SHOWN = 1_000
FAILURES_SHOWN = 100
PROGRESS_EVERY = 100
MAX_FAILURES_IN_A_ROW = 20  # the store is failing, not one job: stop rather than fail every job in turn


StopReason = Literal["time_budget", "failures"]


class BulkKind(StrEnum):
    REPLAY = "replay"
    CANCEL = "cancel"


ALLOWED_STATES: dict[BulkKind, frozenset[JobState]] = {BulkKind.REPLAY: REPLAYABLE_STATES,
                                                       BulkKind.CANCEL: CANCELLABLE_STATES}


class InvalidBulkFilter(ValueError):
    """A filter refused before anything is read: `field` names what is wrong, the message why."""

    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field_name


@dataclass(frozen=True)
class BulkFilter:
    """Which jobs a bulk action acts on: those of `tenant_id` (a cancel names one; a replay without one acts
    on every registered tenant's jobs), of any of `job_types` (empty: every type), in any of `states` (empty:
    every state the action acts on: dead and quarantined for a replay; queued, retry_wait and running for a
    cancel), whose current status began within [since, until] (epoch ms, both inclusive, either open).

    The window is on the job's `updated_at` (when it entered its current status: for a dead job, when it
    died), the time the view orders a tenant's jobs by, so a window's older end ends the read. A running job
    already asked to stop is not selected for a cancel."""

    kind: BulkKind
    tenant_id: str | None = None
    job_types: frozenset[str] = field(default_factory=frozenset)
    states: frozenset[JobState] = field(default_factory=frozenset)
    since: EpochMs | None = None
    until: EpochMs | None = None

    def __post_init__(self) -> None:
        allowed = ALLOWED_STATES[self.kind]
        if self.kind is BulkKind.CANCEL and self.tenant_id is None:
            raise InvalidBulkFilter("tenant", "a bulk cancel names its tenant")
        refused = sorted(self.states - allowed)
        if refused:
            raise InvalidBulkFilter("states", f"a bulk {self.kind} acts on {', '.join(sorted(allowed))} jobs, not "
                                    f"{', '.join(refused)}")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidBulkFilter("until", "until is before since: the window is empty")

    @property
    def selected_states(self) -> frozenset[JobState]:
        return self.states or ALLOWED_STATES[self.kind]

    def view_filter(self) -> JobFilter:
        """What the view's query can filter itself (statuses; the type when there is one)."""
        job_type = next(iter(self.job_types)) if len(self.job_types) == 1 else None
        return JobFilter(frozenset(state.value for state in self.selected_states), job_type)

    def matches(self, view: StatusView) -> bool:
        if view.status not in self.selected_states or (self.job_types and view.type not in self.job_types):
            return False
        if self.kind is BulkKind.CANCEL and view.cancel_requested:
            return False
        at = epoch_ms(view.occurred_at)
        return (self.since is None or at >= self.since) and (self.until is None or at <= self.until)

    def before_window(self, view: StatusView) -> bool:
        """The job changed before the window: so did every job after it in the view's order."""
        return self.since is not None and epoch_ms(view.occurred_at) < self.since


class JobPages(Protocol):
    """A tenant's jobs from the status view, newest change first (onward.pipeline.view.StatusViewReader)."""

    def for_tenant(self, tenant_id: str, *, limit: int, where: JobFilter | None = None,
                   start: Key | None = None) -> tuple[list[StatusView], Key | None]: ...


@dataclass(frozen=True)
class Selection:
    jobs: tuple[StatusView, ...]
    more: bool  # the filter matched more than the selection holds


@dataclass(frozen=True)
class JobFailure:
    job_id: str
    error: str


@dataclass(frozen=True)
class Progress:
    done: int
    matched: int
    applied: int
    skipped: int
    failed: int


@dataclass(frozen=True)
class BulkReport:
    """What a bulk action did. Always matched = applied + sum(skipped) + failed + unprocessed (a dry run
    processes nothing)."""

    action: BulkKind
    dry_run: bool
    tenant_id: str | None
    matched: int
    more: bool
    sample: tuple[str, ...]
    applied: int
    applied_by_outcome: dict[str, int]  # replay: queued; cancel: cancelled, cancel_requested
    skipped: dict[str, int]  # by reason: not_found, not_replayable, already_ended, already_cancel_requested
    failed: int
    failures: tuple[JobFailure, ...]  # the first FAILURES_SHOWN
    unprocessed: int
    stopped: StopReason | None  # why it stopped before the last job: time_budget, failures (None: it did not)
    applied_ids: tuple[str, ...]  # the first APPLIED_IDS_SHOWN
    duration_s: float


@dataclass
class _Tally:
    applied_by_outcome: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    failures: list[JobFailure] = field(default_factory=list)
    applied_ids: list[str] = field(default_factory=list)
    failed_in_a_row: int = 0

    @property
    def applied(self) -> int:
        return sum(self.applied_by_outcome.values())

    @property
    def done(self) -> int:
        return self.applied + sum(self.skipped.values()) + len(self.failures)

    def add(self, job_id: str, outcome: _Outcome) -> None:
        kind, detail = outcome
        self.failed_in_a_row = self.failed_in_a_row + 1 if kind == "failed" else 0
        if kind == "applied":
            self.applied_by_outcome[detail] = self.applied_by_outcome.get(detail, 0) + 1
            if len(self.applied_ids) < APPLIED_IDS_SHOWN:
                self.applied_ids.append(job_id)
        elif kind == "skipped":
            self.skipped[detail] = self.skipped.get(detail, 0) + 1
        else:
            self.failures.append(JobFailure(job_id, detail))

    def progress(self, matched: int) -> Progress:
        return Progress(self.done, matched, self.applied, sum(self.skipped.values()), len(self.failures))


_Outcome = tuple[str, str]  # ("applied", outcome) | ("skipped", reason) | ("failed", error)


class BulkAction:
    """Selects jobs by a BulkFilter from the status view and, unless it is a dry run, moves each through the
    store's own transition (JobStore.replay / JobStore.cancel)."""

    def __init__(self, store: JobStore, view: JobPages, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._view = view
        self._clock = clock

    def select(self, where: BulkFilter, max_jobs: int = MAX_JOBS) -> Selection:
        """The first `max_jobs` jobs that match, tenant by tenant (each newest change first)."""
        chosen: dict[str, StatusView] = {}
        for view in self._candidates(where):
            if view.job_id in chosen or not where.matches(view):
                continue  # (a job that moved while the view was read can be met twice)
            if len(chosen) == max_jobs:
                return Selection(tuple(chosen.values()), more=True)
            chosen[view.job_id] = view
        return Selection(tuple(chosen.values()), more=False)

    def _candidates(self, where: BulkFilter) -> Iterator[StatusView]:
        tenants = ([where.tenant_id] if where.tenant_id is not None
                   else sorted(tenant.tenant_id for tenant in self._store.tenants()))
        query = where.view_filter()
        for tenant in tenants:
            start: Key | None = None
            while True:
                views, start = self._view.for_tenant(tenant, limit=PAGE, where=query, start=start)
                for view in views:
                    if where.before_window(view):
                        start = None  # every later one changed before the window too
                        break
                    yield view
                if start is None:
                    break

    def run(self, where: BulkFilter, *, dry_run: bool = True, max_jobs: int = MAX_JOBS,
            progress: Callable[[Progress], None] | None = None, progress_every: int = PROGRESS_EVERY,
            budget_s: float | None = None) -> BulkReport:
        """Select, then (unless `dry_run`) act on each job in turn; `progress` is called every `progress_every`
        jobs and after the last. `budget_s`: stop acting once this long has passed since the call began (the
        rest are `unprocessed`, `stopped` = time_budget), as an HTTP request must."""
        started = self._clock()
        selection = self.select(where, max_jobs)
        job_ids = [view.job_id for view in selection.jobs]
        tally = _Tally()
        stopped: StopReason | None = None
        if not dry_run:
            for job_id in job_ids:
                if budget_s is not None and self._clock() - started > budget_s:
                    stopped = "time_budget"
                    break
                if tally.failed_in_a_row >= MAX_FAILURES_IN_A_ROW:
                    stopped = "failures"
                    break
                tally.add(job_id, self._act(where, job_id))
                if progress is not None and tally.done % progress_every == 0:
                    progress(tally.progress(len(job_ids)))
            if progress is not None and tally.done % progress_every != 0:
                progress(tally.progress(len(job_ids)))
        return BulkReport(
            action=where.kind, dry_run=dry_run, tenant_id=where.tenant_id, matched=len(job_ids),
            more=selection.more, sample=tuple(job_ids[:SAMPLE]), applied=tally.applied,
            applied_by_outcome=dict(tally.applied_by_outcome), skipped=dict(tally.skipped),
            failed=len(tally.failures), failures=tuple(tally.failures[:FAILURES_SHOWN]),
            unprocessed=len(job_ids) - tally.done, stopped=stopped, applied_ids=tuple(tally.applied_ids),
            duration_s=round(self._clock() - started, 3))

    def _act(self, where: BulkFilter, job_id: str) -> _Outcome:
        """One job's transition; what the store refuses is skipped with the reason, what fails is reported and
        the others go on."""
        try:
            if where.kind is BulkKind.REPLAY:
                self._store.replay(job_id)
                return ("applied", JobState.QUEUED.value)
            outcome = self._store.cancel(job_id, where.tenant_id)
        except JobNotFound:
            return ("skipped", "not_found")
        except NotReplayable:
            return ("skipped", "not_replayable")
        except Exception as error:  # noqa: BLE001 - reported in the job's failure; the other jobs go on
            return ("failed", f"{type(error).__name__}: {error}")
        if outcome.status is CancelStatus.CANCELLED:
            return ("applied", "cancelled")
        if outcome.status is CancelStatus.REQUESTED:
            return ("applied", "cancel_requested")
        if outcome.status is CancelStatus.ALREADY_REQUESTED:
            return ("skipped", "already_cancel_requested")
        return ("skipped", "already_ended")

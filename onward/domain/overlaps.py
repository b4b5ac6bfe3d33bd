"""Which attempts of one job ran at the same time, from its run records (pure): a zombie still working while
its successor ran, so the job's side effects may have happened twice.

An attempt's running interval, as its run record shows it, goes from its claim (`claimed_at`) to the last
moment its worker is known to have been working on it:
- an attempt with no outcome yet is still running: its interval is open (it runs on, past any time given);
- else its end (`finished_at`: its own report, or the reaper closing it when its lease lapsed), or later
  evidence that a zombie kept working after the reaper closed it, whichever is latest: its late report
  (`late_report_at`, the report the store fenced) or a renewal of its lease refused (`lease_lost_at`: its
  worker was still renewing, so still working).
Two attempts overlapped when their intervals share more than an instant: each began before the other ended.
Touching intervals (one ends the very millisecond the other begins) did not overlap; an open interval
overlaps every attempt that ended after it began.

What cannot be seen: a zombie that neither reports nor renews after the reaper closed it (it died, it is
still working silently, or its report was lost) shows nothing past the reaper's close, which always comes
before the next claim, so it never shows an overlap; nor does the time between a zombie's last evidence and
the moment it really stopped. An overlap found is certain (the worker was working then); one not found may
still have happened.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from onward.domain.clock import EpochMs, iso
from onward.domain.models import Run


class Interval(NamedTuple):
    """An attempt's running interval: `end` None while it is still running."""

    attempt: int
    start: EpochMs
    end: EpochMs | None

    def overlaps(self, other: Interval) -> bool:
        return ((other.end is None or self.start < other.end)
                and (self.end is None or other.start < self.end))


def running_interval(run: Run) -> Interval:
    """The interval its run record shows (see the module's docstring)."""
    if run.outcome is None:
        return Interval(run.attempt, run.claimed_at, None)
    seen = [at for at in (run.finished_at, run.late_report_at, run.lease_lost_at) if at is not None]
    return Interval(run.attempt, run.claimed_at, max(seen, default=run.claimed_at))


def overlaps(runs: Iterable[Run]) -> dict[int, list[int]]:
    """Attempt -> the other attempts of the same job whose running intervals overlapped its own (in attempt
    order); attempts that overlapped none are left out. `runs`: one job's run records."""
    intervals = sorted((running_interval(run) for run in runs), key=lambda interval: interval.attempt)
    found: dict[int, list[int]] = {}
    for index, earlier in enumerate(intervals):
        for later in intervals[index + 1:]:
            if earlier.overlaps(later):
                found.setdefault(earlier.attempt, []).append(later.attempt)
                found.setdefault(later.attempt, []).append(earlier.attempt)
    return {attempt: sorted(others) for attempt, others in sorted(found.items())}


def overlap_began(first: Run, second: Run) -> EpochMs:
    """When two overlapping attempts began to run at once: the later claim."""
    return max(first.claimed_at, second.claimed_at)


@dataclass(frozen=True)
class JobOverlap:
    """One job whose runs record overlaps (`onward overlaps`): its tenant and type (None when its row is
    gone: it ended longer ago than the job retention) and the runs that overlapped others."""

    job_id: str
    tenant_id: str | None
    type: str | None
    runs: tuple[Run, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain values, times ISO-8601 UTC; `active_until` is the end of its running interval (null: still
        running)."""
        def at(value: EpochMs | None) -> str | None:
            return None if value is None else iso(value)

        return {"job_id": self.job_id, "tenant_id": self.tenant_id, "type": self.type, "attempts": [
            {"attempt": run.attempt, "worker_id": run.worker_id, "claimed_at": iso(run.claimed_at),
             "active_until": at(running_interval(run).end), "outcome": run.outcome and run.outcome.value,
             "finished_at": at(run.finished_at), "late_report_at": at(run.late_report_at),
             "lease_lost_at": at(run.lease_lost_at), "overlapped_with": run.overlapped_with}
            for run in self.runs]}

"""What a zombie's evidence leaves on run records: a late report fenced, a refused lease renewal, and the
attempts it overlapped (onward.domain.overlaps), marked on both runs and counted in StoreStats."""

from __future__ import annotations

from onward.domain.clock import EpochMs
from onward.domain.models import Lease, Run
from onward.domain.overlaps import overlap_began, overlaps
from onward.domain.states import RunOutcome
from onward.store.dynamo.keys import ttl_after
from onward.store.ports.job_log import JobLog
from onward.store.ports.write_plans import OverlapMark
from onward.store.stats import StoreStats


class ZombieMarks:
    """Marks a JobStore makes on the run records of attempts that kept working after the reaper closed
    them. Thread-safe."""

    def __init__(self, log: JobLog, stats: StoreStats, job_retention_s: int) -> None:
        self._log = log
        self._stats = stats
        self._job_retention_s = job_retention_s

    def lease_lost(self, lease: Lease, now: EpochMs) -> None:
        """A renewal of `lease` was refused at `now`: marked on its run (`lease_lost_at`) with the overlaps it
        reveals, if the run is a zombie's (closed by the reaper) and not marked already."""
        runs = self._log.runs(lease.job_id)
        run = next((run for run in runs if run.attempt == lease.attempt), None)
        if (run is None or run.worker_id != lease.worker_id or run.lease_lost_at is not None
                or run.outcome not in (RunOutcome.LEASE_EXPIRED, RunOutcome.FENCED)):
            return  # not a zombie's (its own report raced the renewal), or marked already
        seen = run.model_copy(update={"lease_lost_at": now})
        mark, partners = self._overlaps_with(runs, seen)
        if self._log.mark_lease_lost(lease.job_id, lease.attempt, lease.worker_id, now, overlap=mark):
            self._mark_partners(seen, partners)

    def late_report(self, lease: Lease, runs: list[Run], run: Run, reported: RunOutcome, now: EpochMs) -> None:
        """A zombie reported `reported` at `now`: marked on its own run record (`runs`: the job's, `run`: its
        own) with the attempts it overlapped (it worked until now); the job row is not touched. Only a run
        that is open or was closed by the reaper is marked: a run's own outcome is never overwritten."""
        seen = run.model_copy(update={"outcome": RunOutcome.FENCED, "late_report": reported,
                                      "late_report_at": now})
        mark, partners = self._overlaps_with(runs, seen)
        if self._log.mark_fenced(lease.job_id, lease.attempt, lease.worker_id, reported, now,
                                 expires_at=ttl_after(now, self._job_retention_s), overlap=mark):
            self._mark_partners(seen, partners)

    def _overlaps_with(self, runs: list[Run], seen: Run) -> tuple[OverlapMark | None, list[Run]]:
        """The overlaps the zombie run `seen` (with its new evidence) shows with the job's other `runs`: its
        mark, and the runs it overlapped."""
        others = [run for run in runs if run.attempt != seen.attempt]
        found = overlaps([*others, seen]).get(seen.attempt, [])
        partners = [run for run in others if run.attempt in found]
        if not partners:
            return None, []
        began = min(overlap_began(seen, partner) for partner in partners)
        return OverlapMark(tuple(found), began), partners

    def _mark_partners(self, zombie: Run, partners: list[Run]) -> None:
        """Mark each run the zombie overlapped with the zombie's attempt, and count the pairs not recorded
        before (on the zombie's run as it was read)."""
        for partner in partners:
            self._log.mark_overlap(zombie.job_id, partner.attempt,
                                   OverlapMark((zombie.attempt,), overlap_began(zombie, partner)))
        self._stats.overlap_found(sum(partner.attempt not in zombie.overlapped_with for partner in partners))

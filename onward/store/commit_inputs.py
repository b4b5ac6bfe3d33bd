"""What a transition's write needs besides its decision, read at commit time: when the attempt it ends was
claimed (from the run record, for a transition without the worker's lease) and a claim's take from its rate
limits' buckets. Moved out of onward.store.service (its size); the region fence's adoption uses them too."""

from __future__ import annotations

from onward.domain.clock import EpochMs
from onward.domain.errors import StoreInvariantViolation
from onward.domain.lifecycle import Change
from onward.store.ports.job_log import JobLog
from onward.store.ports.rate_buckets import RateTake
from onward.store.ports.rows import JobRow
from onward.store.rate_limits import RateLimits


def claimed_at_of(log: JobLog, row: JobRow, attempt: int) -> EpochMs:
    """When the row's running attempt was claimed (for a transition without the worker's lease: the reaper's,
    an adoption's): from the row, or from its run record when a release before issue 34's change claimed it."""
    if row.opened is not None:
        return row.opened.claimed_at
    job_id = row.job.job_id
    run = log.run(job_id, attempt)
    if run is None:
        raise StoreInvariantViolation(f"job {job_id} attempt {attempt} is running without a run record")
    return run.claimed_at


def rate_take_of(rate_limits: RateLimits, change: Change) -> RateTake | None:
    """A claim's take from its rate limits' buckets (JobDeferred: no token now, it reserved one)."""
    if change.before is None or change.open_run is None:
        return None
    return rate_limits.limiter.for_claim(change.before, change.open_run.claimed_at)

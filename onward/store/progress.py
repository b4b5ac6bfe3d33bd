"""A running attempt's progress updates through the store (issue 38): each one written by the progress role
of the recorder (onward.store.ports.progress_log), fenced by the attempt.

The worker writes at the version its claim returned. A cancel request raises the job's version while the
attempt runs; the update is then refused by the job row's condition, and the row, read again, says so: while
it still runs under the attempt and its worker, the update is written again at the row's version (and the
worker keeps that version for its next updates). A row that moved on otherwise (ended, reaped, claimed by
another attempt) refuses it for good: `held` is False.
"""

from __future__ import annotations

from dataclasses import dataclass

from onward.domain.clock import Clock
from onward.domain.models import Lease
from onward.domain.states import JobState
from onward.store.dynamo.keys import ttl_after
from onward.store.ports.progress_log import ProgressWrite, ProgressWritten
from onward.store.ports.recorder import JobRecorder

PROGRESS_TTL_S = 86_400  # a progress event's outbox item: it is never replayed, only relayed once
_VERSION_TRIES = 3


@dataclass(frozen=True)
class ProgressAnswer:
    """How a progress update ended: `held` False when the attempt no longer runs the job (stop reporting);
    `written` False also when it conflicted with a concurrent transaction (try again later); `version`: the
    job's version the attempt runs at, as far as the store saw."""

    held: bool
    written: bool
    version: int


def record_progress(recorder: JobRecorder, clock: Clock, lease: Lease, *, version: int, seq: int,
                    fraction: float, message: str | None) -> ProgressAnswer:
    """Write update `seq` (fraction, message: onward.domain.progress.checked_progress) of `lease`'s attempt,
    first at `version` (the job's, as the worker last knew it)."""
    now = clock()
    for _ in range(_VERSION_TRIES):
        outcome = recorder.record_progress(ProgressWrite(
            lease.job_id, lease.job.tenant_id, lease.attempt, lease.worker_id, version, seq, fraction, message,
            now, ttl_after(now, PROGRESS_TTL_S)))
        if outcome is not ProgressWritten.JOB_MOVED:
            return ProgressAnswer(held=True, written=outcome is not ProgressWritten.CONFLICT, version=version)
        row = recorder.job(lease.job_id)
        if row is None or (row.job.state, row.job.attempt, row.job.lease_owner) != (
                JobState.RUNNING, lease.attempt, lease.worker_id) or row.job.version == version:
            return ProgressAnswer(held=False, written=False, version=version)
        version = row.job.version
    return ProgressAnswer(held=True, written=False, version=version)

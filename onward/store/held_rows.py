"""The job rows a JobStore's claims wrote, kept until their attempts report: what a worker's report is
decided from without reading the row."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from onward.domain.models import Job
from onward.store.ports.rows import JobRow, OpenAttempt

HELD_ROWS_MAX = 10_000  # claims remembered for their reports: more than a process runs at once


class HeldRows:
    """The job rows this store's claims wrote (the very Job objects their Leases hold, by weak reference),
    with their ready and running shards, until their attempts report: what a report decides from without
    reading the row (JobStore._report). A job's ready shards never change after its create, nor its running
    shard while it runs, and the claim's row is only a starting point (its commit is conditional on its
    version), so an entry is never wrong, only missing: a Lease this store did not make (another process's,
    or one rebuilt from its JSON), or one evicted (the oldest go first past `limit`: those of workers that
    died holding them) is reported by reading the row, as before. Entries hold no job (a dead worker's
    params are not kept). Thread-safe."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._rows: OrderedDict[tuple[str, int], tuple[weakref.ref[Job], int, int]] = OrderedDict()

    def remember(self, job: Job, ready_shards: int, running_shard: int) -> None:
        with self._lock:
            self._rows[(job.job_id, job.attempt)] = (weakref.ref(job), ready_shards, running_shard)
            while len(self._rows) > self._limit:
                self._rows.popitem(last=False)

    def take(self, job: Job) -> JobRow | None:
        """The claim's row, if `job` (a Lease's) is the very row one of this store's claims wrote; forgotten
        now (a repeated report reads the row)."""
        with self._lock:
            entry = self._rows.pop((job.job_id, job.attempt), None)
        if entry is None or entry[0]() is not job or job.lease_expires_at is None:
            return None
        # the row as the claim wrote it: its updated_at is the claim's time, its lease the claim's
        return JobRow(job, entry[1], entry[2], opened=OpenAttempt(job.updated_at, job.lease_expires_at))

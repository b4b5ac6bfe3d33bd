"""The jobs whose attempts overlapped (onward.domain.overlaps) since a moment: what `onward overlaps` lists.

Found through the sparse `overlaps` index of the jobs table (onward.store.dynamo.overlap_index: one Query per
UTC day of the window, never a scan). Each job found is then read as the API reads it (its row, its runs). Run
records go with their TTL (a job retention after their attempt ended), so their index entries do too.
"""

from __future__ import annotations

from typing import Any, Protocol

from onward.domain.clock import EpochMs, system_clock
from onward.domain.errors import JobNotFound
from onward.domain.overlaps import JobOverlap
from onward.store.reads import StoreReads
from onward.store.service import JobStore


class OverlapIndex(Protocol):
    def overlapping_jobs(self, since: EpochMs, until: EpochMs) -> list[str]:
        """Ids of the jobs with a run keyed in the index from `since` to `until` (inclusive), each once, in
        key order (the in-memory recorder has its twin)."""


class OverlapReader:
    """The jobs whose runs record overlaps in a window, with their tenant, type and overlapping runs."""

    def __init__(self, index: OverlapIndex, store: JobStore, reads: StoreReads, clock: Any = system_clock) -> None:
        self._index = index
        self._store = store
        self._reads = reads
        self._clock = clock

    def since(self, since: EpochMs, until: EpochMs | None = None) -> list[JobOverlap]:
        """Jobs with an overlap that began from `since` to `until` (default: now), in the order they began
        (their earliest run's key). A job's runs are read consistently, so a run marked since the index
        answered shows too."""
        until = self._clock() if until is None else until
        found = []
        for job_id in self._index.overlapping_jobs(since, until):
            runs = tuple(run for run in self._reads.runs(job_id) if run.overlapped_with)
            if not runs:
                continue  # the runs expired since the index answered
            try:
                job = self._store.get(job_id)
            except JobNotFound:  # its row expired before its runs
                found.append(JobOverlap(job_id, None, None, runs))
                continue
            found.append(JobOverlap(job_id, job.tenant_id, job.type, runs))
        return found

"""The jobs whose attempts overlapped (onward.domain.overlaps) since a moment: what `onward overlaps` lists.

Found through the sparse `overlaps` index of the jobs table (KEYS_ONLY): only a run record that overlapped
another attempt carries its keys, `overlap_pk` = `OVERLAP#<UTC day>` + `overlap_at` (when the overlap began;
onward.store.dynamo.keys), so a window is read with one Query per day it spans (more only past 1 MB of keys a day),
never
a scan, and the index holds nothing but overlaps (they are rare: one partition a day takes them). Each job
found is then read as the API reads it (its row, its runs). Run records go with their TTL (a job retention
after their attempt ended), so their index entries do too.

Operators only: no Lambda function imports this module, so no function's role is granted the index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from onward.domain.clock import EpochMs, system_clock
from onward.domain.errors import JobNotFound
from onward.domain.overlaps import JobOverlap
from onward.settings import DAY_S
from onward.store.dynamo.keys import job_id_of, overlap_partition
from onward.store.service import JobStore

OVERLAPS_INDEX = "overlaps"
DAY_MS = DAY_S * 1000


class OverlapIndex(Protocol):
    def overlapping_jobs(self, since: EpochMs, until: EpochMs) -> list[str]:
        """Ids of the jobs with a run keyed in the index from `since` to `until` (inclusive), each once, in
        key order (the in-memory recorder has its twin)."""


def days(since: EpochMs, until: EpochMs) -> Iterator[str]:
    """The `overlaps` partitions of a window: one per UTC day it touches, oldest first."""
    day = since - since % DAY_MS
    while day <= until:
        yield overlap_partition(day)
        day += DAY_MS


class DynamoOverlapIndex:
    """The `overlaps` index of a deployment's jobs table."""

    def __init__(self, client: Any, jobs_table: str) -> None:
        self._db = client
        self._jobs = jobs_table

    def overlapping_jobs(self, since: EpochMs, until: EpochMs) -> list[str]:
        found: dict[str, None] = {}
        for partition in days(since, until):
            pages = self._db.get_paginator("query").paginate(
                TableName=self._jobs,
                IndexName=OVERLAPS_INDEX,
                KeyConditionExpression="overlap_pk = :p AND overlap_at BETWEEN :since AND :until",
                ExpressionAttributeValues={":p": {"S": partition}, ":since": {"N": str(since)},
                                           ":until": {"N": str(until)}},
            )
            for page in pages:
                for item in page["Items"]:
                    found.setdefault(job_id_of(item["pk"]["S"]), None)
        return list(found)


class OverlapReader:
    """The jobs whose runs record overlaps in a window, with their tenant, type and overlapping runs."""

    def __init__(self, index: OverlapIndex, store: JobStore, clock: Any = system_clock) -> None:
        self._index = index
        self._store = store
        self._clock = clock

    def since(self, since: EpochMs, until: EpochMs | None = None) -> list[JobOverlap]:
        """Jobs with an overlap that began from `since` to `until` (default: now), in the order they began
        (their earliest run's key). A job's runs are read consistently, so a run marked since the index
        answered shows too."""
        until = self._clock() if until is None else until
        found = []
        for job_id in self._index.overlapping_jobs(since, until):
            runs = tuple(run for run in self._store.recorder.runs(job_id) if run.overlapped_with)
            if not runs:
                continue  # the runs expired since the index answered
            try:
                job = self._store.get(job_id)
            except JobNotFound:  # its row expired before its runs
                found.append(JobOverlap(job_id, None, None, runs))
                continue
            found.append(JobOverlap(job_id, job.tenant_id, job.type, runs))
        return found

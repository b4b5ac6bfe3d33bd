"""The `overlaps` index of the jobs table (KEYS_ONLY): only a run record that overlapped another attempt
carries its keys, `overlap_pk` = `OVERLAP#<UTC day>` + `overlap_at` (when the overlap began; keys.py), so a
window is read with one Query per day it spans (more only past 1 MB of keys a day), never a scan, and the
index holds nothing but overlaps (they are rare: one partition a day takes them).

Operators only (`onward overlaps`, onward.operator.overlaps): no Lambda function imports this module, so no
function's role is granted the index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from onward.domain.clock import EpochMs
from onward.settings import DAY_S
from onward.store.dynamo.keys import job_id_of, overlap_partition

OVERLAPS_INDEX = "overlaps"
DAY_MS = DAY_S * 1000


def days(since: EpochMs, until: EpochMs) -> Iterator[str]:
    """The `overlaps` partitions of a window: one per UTC day it touches, oldest first."""
    day = since - since % DAY_MS
    while day <= until:
        yield overlap_partition(day)
        day += DAY_MS


class DynamoOverlapIndex:
    """The `overlaps` index of a deployment's jobs table (onward.operator.overlaps.OverlapIndex; the in-memory
    recorder has its twin, MemoryRecorder.overlapping_jobs)."""

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

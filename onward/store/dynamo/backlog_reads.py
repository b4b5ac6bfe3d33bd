"""The backlog count's reads on DynamoDB (onward.store.backlog_reads.BacklogReads), with the recorder's own
index Queries (index_queries.py), every page of each:
1. the `active` index (every partition, KEYS_ONLY) and the `parked` index (entries whose park has ended);
2. one BatchGetItem per 100 such entries for their waiting counts per priority band (`w<p>`);
3. a ready queue counted with one Query (Select=COUNT, at most COUNT_CAP items) on one side of now, and, for
   the per-type gauges, the types of its first due jobs (one Query);
4. one Query (Select=COUNT) per `leases` partition (LEASE_SHARDS).
Reads are eventually consistent: the count is a gauge."""

from __future__ import annotations

from typing import Any

from onward.domain.clock import EpochMs
from onward.store.backlog_reads import COUNT_CAP, Count
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.counter_items import queue_entry_from_values
from onward.store.dynamo.index_queries import (
    DUE_BY,
    NOT_DUE_BY,
    active_query,
    entry_of,
    leases_query,
    parked_due_query,
    ready_query,
)
from onward.store.dynamo.keys import queue_key
from onward.store.ports import QueueEntry
from onward.store.ports.index_shards import LEASE_SHARDS, PARKED_SHARDS
from onward.store.ports.ready_queues import ReadyQueue


class DynamoBacklogReads:
    """The backlog's reads of a deployment's jobs table (JOBS_TABLE, its `active` index over `active_shards`
    partitions)."""

    def __init__(self, client: Any, jobs_table: str, active_shards: int) -> None:
        self._db = client
        self._jobs = jobs_table
        self._active_shards = active_shards

    def entries_with_work(self, now: EpochMs) -> tuple[set[tuple[str, int]], int]:
        entries: set[tuple[str, int]] = set()
        requests = 0
        for query in [*(active_query(self._jobs, index) for index in range(self._active_shards)),
                      *(parked_due_query(self._jobs, index, now) for index in range(PARKED_SHARDS))]:
            for page in self._db.get_paginator("query").paginate(**query):
                requests += 1
                entries |= {entry_of(item) for item in page["Items"]}
        return entries, requests

    def queue_entries(self, entries: list[tuple[str, int]]) -> tuple[list[QueueEntry], int]:
        """KeysHeldBack (throttled past its retries) ends the count: no count is better than a low one, which
        would let the workers scale in."""
        keys = [queue_key(tenant_id, shard) for tenant_id, shard in entries]
        read = batch_get(self._db, self._jobs, [{"pk": {"S": key.pk}, "sk": {"S": key.sk}} for key in keys],
                         consistent=False)
        return [queue_entry_from_values(from_item(item)) for item in read.items], read.requests

    def count_queue(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, *, due: bool) -> Count:
        answer = self._db.query(**ready_query(self._jobs, tenant_id, queue, DUE_BY if due else NOT_DUE_BY, now),
                                Select="COUNT", Limit=COUNT_CAP)
        return Count(answer["Count"], "LastEvaluatedKey" not in answer)

    def due_head(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[tuple[str, EpochMs]]:
        """The `ready` index projects whole job rows: a Query costs the size of the `limit` rows it reads, whatever
        it answers (the projection only shortens the answer)."""
        answer = self._db.query(**ready_query(self._jobs, tenant_id, queue, DUE_BY, now), Limit=limit,
                                ProjectionExpression="#ty, ready_due", ExpressionAttributeNames={"#ty": "type"})
        return [(item["type"]["S"], int(item["ready_due"]["N"])) for item in answer["Items"]]

    def count_running(self) -> tuple[int, int]:
        counted = requests = 0
        for shard in range(LEASE_SHARDS):
            for page in self._db.get_paginator("query").paginate(**leases_query(self._jobs, shard), Select="COUNT"):
                counted += page["Count"]
                requests += 1
        return counted, requests

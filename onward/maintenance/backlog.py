"""How much work waits for workers right now, as the ECS workers' scaling reads it: the waiting jobs due now
(`due`: queued or retry_wait, due by now, held by no worker) and the jobs running under a lease (`running`).
The reaper counts them once a minute (onward.entrypoints.reaper) and publishes them as the metrics BacklogDue
and JobsRunning (namespace Onward); template.yaml's WorkerScaling policy sets the worker tasks to
ceil((due + running) / jobs per task), from WorkerMinTasks (0 allowed) to WorkerMaxTasks.

The count never reads a tenant that has nothing due, so its cost follows the queues with work, not the
registered tenants (onward.store.dynamo.keys describes the items):
1. the `active` index (every partition, KEYS_ONLY) lists the queue entries that may hold due jobs, and the
   `parked` index those whose jobs were all in backoff but whose park has ended (due again, though no claim
   has woken them: with no worker running, none will);
2. one BatchGetItem per 100 such entries reads their waiting counts per priority band (`w<p>`);
3. per band with waiting jobs, one Query (Select=COUNT) on its `ready` partition counts the jobs NOT due
   yet (delayed, or in backoff), usually none: due = waiting - not due. Only when COUNT_CAP or more are not
   due does a second Query count the due ones directly; past COUNT_CAP on both sides the queue counts as
   `waiting - COUNT_CAP`, an upper bound, and only while at least COUNT_CAP of its jobs really are due;
4. running jobs: one Query (Select=COUNT) per `leases` partition (LEASE_SHARDS), at most the jobs running.

Requests per count: ACTIVE_SHARDS + PARKED_SHARDS + LEASE_SHARDS Queries (more only past 1 MB of keys
in a partition), plus ceil(E / 100) BatchGetItems and about one Query per band with work of the E entries
read; each Query reads a few items, so most cost 0.5 read units. Reads are eventually consistent: the count
is a gauge, a job created a moment ago may count from the next minute on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onward.domain.clock import Clock, EpochMs, system_clock
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.counter_items import queue_entry_from_values
from onward.store.dynamo.keys import (
    active_shard_partition,
    lease_shard_partition,
    parked_shard_partition,
    queue_key,
    ready_partition,
    shard_of,
    tenant_id_of,
)
from onward.store.ports import QueueEntry
from onward.store.ports.index_shards import LEASE_SHARDS, PARKED_SHARDS
from onward.store.ports.ready_queues import ReadyQueue

COUNT_CAP = 1_000  # items one counting Query may read in a ready queue (about 45 read units at most)


@dataclass(frozen=True)
class Backlog:
    """One count: waiting jobs due now, jobs running under a lease, and the DynamoDB requests it took."""

    due: int
    running: int
    requests: int


@dataclass(frozen=True)
class Count:
    items: int
    complete: bool  # every item of the range was counted (no page left)


def due_in_queue(waiting: int, not_due: Count, due: Count | None) -> int:
    """The due jobs of one ready queue holding `waiting` jobs, from the count of those not due yet and,
    when that one stopped at its cap, the count of the due ones (see the module's docstring)."""
    if not_due.complete:
        return max(0, waiting - not_due.items)
    if due is not None and due.complete:
        return due.items
    return max(COUNT_CAP, waiting - COUNT_CAP)


class BacklogCounter:
    """Counts the backlog of a deployment's jobs table (JOBS_TABLE, its `active` index over `active_shards`
    partitions)."""

    def __init__(self, client: Any, jobs_table: str, active_shards: int, clock: Clock = system_clock) -> None:
        self._db = client
        self._jobs = jobs_table
        self._active_shards = active_shards
        self._clock = clock

    def count(self) -> Backlog:
        now = self._clock()
        requests = 0
        entries: set[tuple[str, int]] = set()
        for partition in (active_shard_partition(index) for index in range(self._active_shards)):
            keys, used = self._keys(IndexName="active", KeyConditionExpression="active_pk = :p",
                                    ExpressionAttributeValues={":p": {"S": partition}})
            entries |= keys
            requests += used
        for partition in (parked_shard_partition(index) for index in range(PARKED_SHARDS)):
            keys, used = self._keys(
                IndexName="parked", KeyConditionExpression="parked_pk = :p AND parked_until <= :now",
                ExpressionAttributeValues={":p": {"S": partition}, ":now": {"N": str(now)}})
            entries |= keys
            requests += used
        queues, used = self._queue_entries(sorted(entries))
        requests += used
        due = 0
        for entry in queues:
            for band in entry.bands_with_work():
                partition = ready_partition(entry.tenant_id, ReadyQueue(entry.shard, band))
                later = self._count_ready(partition, "ready_due > :now", now)
                requests += 1
                sooner = None
                if not later.complete:
                    sooner = self._count_ready(partition, "ready_due <= :now", now)
                    requests += 1
                due += due_in_queue(entry.bands[band], later, sooner)
        running = 0
        for shard in range(LEASE_SHARDS):
            counted, used = self._count_all(
                IndexName="leases", KeyConditionExpression="lease_pk = :p",
                ExpressionAttributeValues={":p": {"S": lease_shard_partition(shard)}})
            running += counted
            requests += used
        return Backlog(due, running, requests)

    def _keys(self, **query: Any) -> tuple[set[tuple[str, int]], int]:
        """(tenant, ready shard) of the queue entries one Query of a KEYS_ONLY index finds (every page), and
        the requests it took. The index is named at the call: tests/codescan.py reads it there."""
        found: set[tuple[str, int]] = set()
        pages = self._db.get_paginator("query").paginate(TableName=self._jobs, **query)
        used = 0
        for page in pages:
            used += 1
            found |= {(tenant_id_of(item["pk"]["S"]), shard_of(item["pk"]["S"])) for item in page["Items"]}
        return found, used

    def _queue_entries(self, entries: list[tuple[str, int]]) -> tuple[list[QueueEntry], int]:
        """The queue entry items (eventually consistent: a gauge), and the requests it took. KeysHeldBack
        (throttled past its retries) ends the count: no count is better than a low one, which would let the
        workers scale in."""
        keys = [queue_key(tenant_id, shard) for tenant_id, shard in entries]
        read = batch_get(self._db, self._jobs, [{"pk": {"S": key.pk}, "sk": {"S": key.sk}} for key in keys],
                         consistent=False)
        return [queue_entry_from_values(from_item(item)) for item in read.items], read.requests

    def _count_ready(self, partition: str, condition: str, now: EpochMs) -> Count:
        """How many jobs of one ready queue meet `condition` on their due time, up to COUNT_CAP."""
        answer = self._db.query(
            TableName=self._jobs, IndexName="ready", Select="COUNT", Limit=COUNT_CAP,
            KeyConditionExpression=f"ready_pk = :p AND {condition}",
            ExpressionAttributeValues={":p": {"S": partition}, ":now": {"N": str(now)}})
        return Count(answer["Count"], "LastEvaluatedKey" not in answer)

    def _count_all(self, **query: Any) -> tuple[int, int]:
        """The items one Query finds (every page), counted, not read back, and the requests it took."""
        pages = self._db.get_paginator("query").paginate(TableName=self._jobs, Select="COUNT", **query)
        counted = used = 0
        for page in pages:
            counted += page["Count"]
            used += 1
        return counted, used

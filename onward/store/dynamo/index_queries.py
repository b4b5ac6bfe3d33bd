"""The Queries of the jobs table's sparse indexes (`active`, `parked`, `ready`, `leases`; keys.py) that more
than one reader sends: the recorder's claim reads and the backlog count ask the same partitions the same
way. Each is a request's arguments (IndexName named here, where tests/codescan.py reads it)."""

from __future__ import annotations

from typing import Any

from onward.domain.clock import EpochMs
from onward.store.dynamo.keys import (
    active_shard_partition,
    lease_shard_partition,
    parked_shard_partition,
    ready_partition,
    shard_of,
    tenant_id_of,
)
from onward.store.ports.ready_queues import ReadyQueue

# The due side of a ready queue's jobs, and the side not due yet.
DUE_BY = "ready_due <= :now"
NOT_DUE_BY = "ready_due > :now"


def active_query(jobs_table: str, index: int) -> dict[str, Any]:
    """The queue entries of one partition of the `active` index (KEYS_ONLY), in claim order."""
    return {"TableName": jobs_table, "IndexName": "active", "KeyConditionExpression": "active_pk = :p",
            "ExpressionAttributeValues": {":p": {"S": active_shard_partition(index)}}}


def parked_due_query(jobs_table: str, index: int, now: EpochMs) -> dict[str, Any]:
    """The queue entries of one partition of the `parked` index (KEYS_ONLY) whose park has ended by `now`."""
    return {"TableName": jobs_table, "IndexName": "parked",
            "KeyConditionExpression": "parked_pk = :p AND parked_until <= :now",
            "ExpressionAttributeValues": {":p": {"S": parked_shard_partition(index)}, ":now": {"N": str(now)}}}


def ready_query(jobs_table: str, tenant_id: str, queue: ReadyQueue, side: str, now: EpochMs) -> dict[str, Any]:
    """One of a tenant's ready queues in the `ready` index, its jobs on one `side` of `now` (DUE_BY,
    NOT_DUE_BY), earliest due first."""
    return {"TableName": jobs_table, "IndexName": "ready", "KeyConditionExpression": f"ready_pk = :p AND {side}",
            "ExpressionAttributeValues": {":p": {"S": ready_partition(tenant_id, queue)}, ":now": {"N": str(now)}}}


def leases_query(jobs_table: str, shard: int) -> dict[str, Any]:
    """Every job of one partition of the `leases` index (the jobs running under a lease)."""
    return {"TableName": jobs_table, "IndexName": "leases", "KeyConditionExpression": "lease_pk = :p",
            "ExpressionAttributeValues": {":p": {"S": lease_shard_partition(shard)}}}


def entry_of(item: dict[str, Any]) -> tuple[str, int]:
    """(tenant, ready shard) of a queue entry as the `active` and `parked` indexes hold it."""
    pk = item["pk"]["S"]
    return tenant_id_of(pk), shard_of(pk)

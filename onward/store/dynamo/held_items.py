"""The items of held jobs in the jobs table (onward.store.dynamo.held_jobs), and a release's actions on them, shared
with the end of an attempt that puts a held job back (concurrency keys: onward.store.dynamo.concurrency_keys). A
held entry's partition key is `HELD#<partition>` (onward.store.held_partitions: `HELD#paused#<type>#<shard>` for a
paused type's, `HELD#concurrency#<key>` for a concurrency key's)."""

from __future__ import annotations

from typing import Any

from onward.domain.models import Job
from onward.store.dynamo.attributes import Item
from onward.store.dynamo.keys import job_key, ready_partition
from onward.store.held_partitions import entry_partitions
from onward.store.ports.ready_queues import ready_queue

HELD_PK_PREFIX = "HELD#"
HELD_BY = "held_by"


def held_by_of(item: dict[str, Any]) -> str | None:
    """The hold key a job row (wire format) is held under, None when it is not held."""
    held = item.get(HELD_BY)
    return str(held["S"]) if held else None


def held_partition_key(partition: str) -> str:
    """The partition key of a partition of held entries (onward.store.held_partitions)."""
    return f"{HELD_PK_PREFIX}{partition}"


def held_key(partition: str, tenant_id: str, due_at: int, job_id: str) -> Item:
    """A held entry's key in `partition` (a hold's: onward.store.held_partitions.entry_partition)."""
    return {"pk": {"S": held_partition_key(partition)}, "sk": {"S": f"{tenant_id}#{due_at:015d}#{job_id}"}}


def release_actions(table: str, job: Job, ready_shards: int, hold_key: str,
                    partition: str | None = None) -> list[dict[str, Any]]:
    """The row back in its ready index at its due time (on the condition that it is held under `hold_key`)
    and its held entry deleted, in `partition` (where it was read), or wherever it may be (a row held before
    the shards has its entry in the unsharded partition: a Delete of each); the queue entry's update is the
    caller's (it may sum it with another)."""
    queue = ready_queue(job, ready_shards)
    places = [partition] if partition else entry_partitions(hold_key, job.job_id)
    return [
        {"Update": {
            "TableName": table, "Key": {"pk": {"S": job_key(job.job_id).pk}, "sk": {"S": job_key(job.job_id).sk}},
            "UpdateExpression": "SET ready_pk = :ready, ready_due = :due REMOVE #held",
            "ConditionExpression": "#held = :key",
            "ExpressionAttributeNames": {"#held": HELD_BY},
            "ExpressionAttributeValues": {":key": {"S": hold_key}, ":ready": {"S": ready_partition(
                job.tenant_id, queue)}, ":due": {"N": str(job.not_before)}}}},
        *({"Delete": {"TableName": table, "Key": held_key(place, job.tenant_id, job.not_before, job.job_id)}}
          for place in places),
    ]

"""Held jobs in the jobs table (onward.store.held_jobs.HeldJobs on DynamoDB).

- the job row, while held: `held_by` (the hold key), and no `ready_pk` / `ready_due` (out of the `ready` index);
  every transition's condition is `attribute_not_exists(held_by)` (onward.store.dynamo.writes);
- a held entry: `HELD#<partition>` / `<tenant>#<due, 15 digits>#<job id>` (entity `held_job`), in the hold key's
  partition for the job (onward.store.held_partitions: a paused type's spread over shards by job id): a release
  sweep reads each partition of the key (one tenant's with `begins_with`) in tenant then due order, and merges them.
A hold is one TransactWriteItems: the row's update (conditional on its state and version, in the ready index,
not held), the held entry's put, the queue entry's update (one fewer waiting in its band) and, for a pause, a
ConditionCheck that the pause's item is still there. A release is one too: the row back in the index (conditional
on `held_by` = the key), the entry deleted, the queue entry's update as a job entering it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.pauses import Pause
from onward.store.dynamo.concurrency_keys import DynamoConcurrencyCounts, hold_action, release_held_action
from onward.store.dynamo.held_items import HELD_BY, held_by_of, held_key, held_partition_key, release_actions
from onward.store.dynamo.keys import job_key
from onward.store.dynamo.pauses import pause_key
from onward.store.dynamo.writes import TransitionWrites, job_from_item, wire_key
from onward.store.held_jobs import HeldJob, first_held
from onward.store.held_partitions import entry_partition, entry_partitions
from onward.store.ports.concurrency_keys import KeyLimit
from onward.store.ports.ready_queues import ready_queue
from onward.store.ports.rows import JobRow
from onward.store.ports.write_plans import WaitingUpdate, queue_entry_updates

# (the recorder takes its concurrency keys' reads from here, beside the holds they go with)
__all__ = ["DynamoConcurrencyCounts", "DynamoHeldJobs", "held_by_of"]


class DynamoHeldJobs:
    def __init__(self, client: Any, jobs_table: str, writes: TransitionWrites) -> None:
        self._db = client
        self._table = jobs_table
        self._writes = writes

    def _send(self, actions: list[dict[str, Any]]) -> bool:
        try:
            self._db.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code", "")) != "TransactionCanceledException":
                raise
            return False
        return True

    def _entry_update(self, update: WaitingUpdate) -> dict[str, Any]:
        (entry,) = queue_entry_updates([update])
        return self._writes.queue_entry_update(entry)

    def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None,
             while_at_limit: KeyLimit | None = None) -> bool:
        job = row.job
        actions: list[dict[str, Any]] = [
            {"Update": {
                "TableName": self._table, "Key": wire_key(job_key(job.job_id)),
                "UpdateExpression": "SET #held = :key REMOVE ready_pk, ready_due",
                "ConditionExpression": "#state = :state AND #version = :version AND attribute_exists(ready_pk) "
                                       "AND attribute_not_exists(#held)",
                "ExpressionAttributeNames": {"#held": HELD_BY, "#state": "state", "#version": "version"},
                "ExpressionAttributeValues": {":key": {"S": hold_key}, ":state": {"S": job.state.value},
                                              ":version": {"N": str(job.version)}}}},
            {"Put": {
                "TableName": self._table, "ConditionExpression": "attribute_not_exists(pk)",
                "Item": {**held_key(entry_partition(hold_key, job.job_id), job.tenant_id, job.not_before, job.job_id),
                         "entity": {"S": "held_job"}, "job_id": {"S": job.job_id},
                         "tenant_id": {"S": job.tenant_id}, "due_at": {"N": str(job.not_before)}}}},
            self._entry_update(WaitingUpdate(job.tenant_id, ready_queue(job, row.ready_shards), -1)),
        ]
        if while_paused is not None:
            actions.append({"ConditionCheck": {"TableName": self._table, "Key": pause_key(while_paused),
                                               "ConditionExpression": "attribute_exists(pk)"}})
        if while_at_limit is not None:  # concurrency keys (issue 37): `held + 1` while the key is at its limit
            actions.append(hold_action(self._table, while_at_limit))
        return self._send(actions)

    def held(self, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        return first_held(self.held_in, hold_key, tenant_id, limit)

    def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        condition = "pk = :pk" + (" AND begins_with(sk, :tenant)" if tenant_id is not None else "")
        values = {":pk": {"S": held_partition_key(partition)}} | (
            {":tenant": {"S": f"{tenant_id}#"}} if tenant_id is not None else {})
        items = self._db.query(TableName=self._table, ConsistentRead=True, KeyConditionExpression=condition,
                               ExpressionAttributeValues=values, Limit=limit)["Items"]
        return [HeldJob(item["job_id"]["S"], item["tenant_id"]["S"], int(item["due_at"]["N"]), partition)
                for item in items]

    def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:
        item = self._db.get_item(TableName=self._table, Key=wire_key(job_key(job_id)), ConsistentRead=True).get("Item")
        job, shards, _ = job_from_item(item) if item is not None else (None, 1, 0)
        if job is None or held_by_of(item or {}) != hold_key:
            self._drop_stray(hold_key, job_id, entry)
            return False
        queue = ready_queue(job, shards)
        key_update = release_held_action(self._table, job.tenant_id, hold_key)  # (a concurrency key's `held - 1`)
        return self._send([*release_actions(self._table, job, shards, hold_key, entry.partition if entry else None),
                           self._entry_update(WaitingUpdate(job.tenant_id, queue, 1, clock, job_id=job_id)),
                           *([key_update] if key_update is not None else [])])

    def _drop_stray(self, hold_key: str, job_id: str, entry: HeldJob | None) -> None:
        """Delete the held entry of `job_id` under `hold_key` whose row is not held under it: the one read
        (`entry`), else those found in the partitions it may be in (the row may be gone, so its due time is not
        known)."""
        found = [entry] if entry is not None and entry.partition else [
            held for partition in entry_partitions(hold_key, job_id)
            for held in self.held_in(partition, None, 1000) if held.job_id == job_id]
        for held in found:
            self._db.delete_item(TableName=self._table,
                                 Key=held_key(held.partition, held.tenant_id, held.due_at, job_id))

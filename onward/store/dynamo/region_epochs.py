"""The epoch item on DynamoDB (onward.store.ports.region_epochs): `REGION` / `EPOCH` in the jobs table
(onward.store.dynamo.keys), read strongly consistent and raised by one conditional PutItem."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from onward.domain.regions import RegionEpoch
from onward.store.dynamo.attributes import from_item, to_attribute
from onward.store.dynamo.keys import (
    REGION_EPOCH_ATTRIBUTE,
    active_partition,
    band_attribute,
    job_id_of,
    queue_key,
    ready_partition,
    region_epoch_key,
    running_key,
)
from onward.store.dynamo.writes import wire_item, wire_key
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.region_epochs import RegionEpochBook
from onward.store.ports.tenant_values import Tenant

_FIELDS = ("home", "previous_home", "fenced_at", "decided_by", "reason", "adopted_at")
PRIORITIES = range(10)  # the priority bands (NewJob.priority 0-9)
# Where the rows of an earlier epoch are looked for, in order: rows held aside (out of both indexes: a scan of
# the table for `held_by`, the one costly phase; first, so that no adopted end of an attempt puts a held row
# of the old epoch back unadopted), the `ready` index (queued, retry_wait), the `leases` index (running; it
# projects no epoch, so every running row is read and the store passes those adopted)
_PHASES = ("held", "ready", "leases")
_OLDER = "(attribute_not_exists(#re) OR #re < :e)"


class DynamoRegionEpochs(RegionEpochBook):
    def __init__(self, client: Any, jobs_table: str, active_shards: int) -> None:
        self._db = client
        self._jobs = jobs_table
        self._active_shards = active_shards

    def read(self) -> RegionEpoch:
        item = self._db.get_item(TableName=self._jobs, Key=wire_key(region_epoch_key()),
                                 ConsistentRead=True).get("Item")
        if item is None:
            return RegionEpoch.never_failed_over()
        values = from_item(item)
        return RegionEpoch(epoch=int(values["epoch"]), **{name: values.get(name) for name in _FIELDS})

    def raise_to(self, epoch: RegionEpoch) -> bool:
        key = region_epoch_key()
        values = {"pk": key.pk, "sk": key.sk, "entity": "region_epoch", "epoch": epoch.epoch,
                  REGION_EPOCH_ATTRIBUTE: epoch.epoch,
                  **{name: getattr(epoch, name) for name in _FIELDS if getattr(epoch, name) is not None}}
        # absent counts as epoch 0
        condition = "#epoch = :previous" + (" OR attribute_not_exists(pk)" if epoch.epoch == 1 else "")
        try:
            self._db.put_item(TableName=self._jobs, Item=wire_item(values), ConditionExpression=condition,
                              ExpressionAttributeNames={"#epoch": "epoch"},
                              ExpressionAttributeValues={":previous": {"N": str(epoch.epoch - 1)}})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def mark_adopted(self, epoch: int, at: int) -> bool:
        try:
            self._db.update_item(TableName=self._jobs, Key=wire_key(region_epoch_key()),
                                 UpdateExpression="SET adopted_at = if_not_exists(adopted_at, :at)",
                                 ConditionExpression="#epoch = :epoch",
                                 ExpressionAttributeNames={"#epoch": "epoch"},
                                 ExpressionAttributeValues={":epoch": {"N": str(epoch)}, ":at": {"N": str(at)}})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True

    # --- adoption's reads and the counters' rebuild -----------------------------------------------------------

    def unadopted(self, epoch: int, cursor: str | None, limit: int) -> tuple[list[str], str | None]:
        phase, start = (_PHASES[0], None) if cursor is None else json.loads(cursor)
        older = {"ExpressionAttributeNames": {"#re": REGION_EPOCH_ATTRIBUTE},
                 "ExpressionAttributeValues": {":e": {"N": str(epoch)}}}
        resume_at = {} if start is None else {"ExclusiveStartKey": start}
        # (each phase's request written out whole: the template's code scan reads the index each one names)
        if phase == "ready":
            page = self._db.scan(TableName=self._jobs, IndexName="ready", Limit=limit, ProjectionExpression="pk",
                                 FilterExpression=_OLDER, **older, **resume_at)
        elif phase == "leases":
            page = self._db.scan(TableName=self._jobs, IndexName="leases", Limit=limit, ProjectionExpression="pk",
                                 **resume_at)
        else:  # (few rows of the table are held: its pages read more, as the filter keeps few)
            page = self._db.scan(TableName=self._jobs, Limit=limit * 10, ProjectionExpression="pk",
                                 FilterExpression=f"attribute_exists(held_by) AND {_OLDER}", **older, **resume_at)
        job_ids = [job_id_of(item["pk"]["S"]) for item in page.get("Items", [])]
        following = page.get("LastEvaluatedKey")
        if following is not None:
            return job_ids, json.dumps([phase, following])
        after = _PHASES.index(phase) + 1
        return job_ids, (json.dumps([_PHASES[after], None]) if after < len(_PHASES) else None)

    def _count(self, tenant_id: str, queue: ReadyQueue) -> int:
        """The rows of one ready queue (the `ready` index: queued and retry_wait, held rows are out of it)."""
        total = 0
        request: dict[str, Any] = {"TableName": self._jobs, "IndexName": "ready", "Select": "COUNT",
                                   "KeyConditionExpression": "ready_pk = :p",
                                   "ExpressionAttributeValues": {":p": {"S": ready_partition(tenant_id, queue)}}}
        while True:
            page = self._db.query(**request)
            total += int(page.get("Count", 0))
            if "LastEvaluatedKey" not in page:
                return total
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def rebuild_counters(self, epoch: int, tenants: Sequence[Tenant], clock: float) -> int:
        written = 0
        stamp = {":re": {"N": str(epoch)}}
        for tenant in tenants:
            for shard in range(tenant.running_shards):  # nothing runs after adoption (only counters that exist)
                try:
                    self._db.update_item(
                        TableName=self._jobs, Key=wire_key(running_key(tenant.tenant_id, shard)),
                        UpdateExpression="SET #running = :zero, started_ms_sum = :zero, #re = :re",
                        ConditionExpression="attribute_exists(pk)",
                        ExpressionAttributeNames={"#running": "running", "#re": REGION_EPOCH_ATTRIBUTE},
                        ExpressionAttributeValues={":zero": {"N": "0"}, **stamp})
                    written += 1
                except ClientError as error:
                    if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                        raise
            for shard in range(tenant.ready_shards):
                bands = {priority: self._count(tenant.tenant_id, ReadyQueue(shard, priority))
                         for priority in PRIORITIES}
                self._db.update_item(**self._queue_entry(tenant.tenant_id, shard, bands, clock, stamp))
                written += 1
        return written

    def _queue_entry(self, tenant_id: str, shard: int, bands: dict[int, int], clock: float,
                     stamp: dict[str, Any]) -> dict[str, Any]:
        """The queue entry's update: every band and the total set; with jobs, in the `active` index (its key
        kept if it has one) and no longer parked."""
        names = {"#re": REGION_EPOCH_ATTRIBUTE, "#waiting": "waiting", "#entity": "entity", "#tenant": "tenant_id",
                 "#shard": "shard"}
        values: dict[str, Any] = {**stamp, ":waiting": {"N": str(sum(bands.values()))},
                                  ":entity": {"S": "tenant_queue"}, ":tenant": {"S": tenant_id},
                                  ":shard": {"N": str(shard)}}
        # nothing runs after adoption: the RUNNING counter kept on the entry too (issue 34)
        names |= {"#running": "running", "#started": "started_ms_sum"}
        values[":zero"] = {"N": "0"}
        sets = ["#re = :re", "#waiting = :waiting", "#entity = :entity", "#tenant = :tenant", "#shard = :shard",
                "#running = :zero", "#started = :zero"]
        for priority, count in bands.items():
            names[f"#b{priority}"] = band_attribute(priority)
            values[f":b{priority}"] = {"N": str(count)}
            sets.append(f"#b{priority} = :b{priority}")
        removes = ""
        if sum(bands.values()):
            names |= {"#apk": "active_pk", "#avt": "active_vt", "#ppk": "parked_pk", "#until": "parked_until"}
            values |= {":apk": {"S": active_partition(tenant_id, shard, self._active_shards, "")},
                       ":vt": to_attribute(clock)}
            sets += ["#apk = if_not_exists(#apk, :apk)", "#avt = if_not_exists(#avt, :vt)"]
            removes = " REMOVE #ppk, #until"
        return {"TableName": self._jobs, "Key": wire_key(queue_key(tenant_id, shard)),
                "UpdateExpression": f"SET {', '.join(sets)}{removes}", "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values}

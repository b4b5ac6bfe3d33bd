"""Where schedules (onward.schedules) are kept: on DynamoDB in the jobs table (`DynamoSchedules`), or in memory
for tests (`MemorySchedules`); both answer the same `ScheduleRecorder` protocol with the same conditions.

Two items per schedule, written together in one transaction:
- the schedule `TENANT#<tenant>` / `SCHEDULE#<name>` (entity `schedule`), beside the tenant's `SETTINGS`: what
  `GET /schedules` lists (one Query of the tenant's partition, `begins_with(sk, "SCHEDULE#")`);
- its due entry `SCHEDULES#<h>` / `<next_fire_at, 13 digits>#<tenant>#<name>` (entity `schedule_due`, h a hash
  of tenant and name over SCHEDULE_SHARDS), a copy of the schedule keyed by when it next fires, so the scheduler
  reads only the due ones (one Query per shard, `sk < <now + 1>`), oldest first, and never scans. A registry
  partition instead of an index: no change to the table's definition, and the entry moves in the same
  transaction as the schedule's next_fire_at, so the two never disagree. A shard takes about 1,000 advances a
  second (DynamoDB's write limit per partition); four are plenty for a scheduler ticking every minute.

Advancing a schedule (after its fire's job is created) is conditional on the next_fire_at it was read with, so
of two schedulers that read it at once only one moves it; the other's job create answered the same job
(its Idempotency-Key, onward.scheduler), so nothing fires twice.
"""

from __future__ import annotations

import threading
import time
import zlib
from typing import Any, Protocol

from botocore.exceptions import ClientError

from onward.clock import EpochMs
from onward.dynamo import from_item, to_attribute, to_item
from onward.schedules import Schedule

SCHEDULE_SK_PREFIX = "SCHEDULE#"
DUE_PREFIX = "SCHEDULES#"
SCHEDULE_SHARDS = 4
SCHEDULE_ENTITY = "schedule"
DUE_ENTITY = "schedule_due"
MAX_SCHEDULES_PER_TENANT = 1000
_ATTEMPTS = 5  # a transaction that meets a concurrent one is tried again


def schedule_key(tenant_id: str, name: str) -> tuple[str, str]:
    return f"TENANT#{tenant_id}", f"{SCHEDULE_SK_PREFIX}{name}"


def due_key(tenant_id: str, name: str, next_fire_at: EpochMs) -> tuple[str, str]:
    shard = zlib.crc32(f"{tenant_id}#{name}".encode()) % SCHEDULE_SHARDS
    return f"{DUE_PREFIX}{shard}", f"{next_fire_at:013d}#{tenant_id}#{name}"


class ScheduleRecorder(Protocol):
    """Schedules as stored: each method one atomic read or write."""

    def add(self, schedule: Schedule) -> bool:
        """Store a new schedule; False (nothing written) when the tenant has one of that name."""

    def get(self, tenant_id: str, name: str) -> Schedule | None: ...

    def for_tenant(self, tenant_id: str) -> list[Schedule]:
        """The tenant's schedules by name (up to MAX_SCHEDULES_PER_TENANT)."""

    def remove(self, tenant_id: str, name: str) -> bool:
        """Delete the schedule; False when there is none."""

    def due(self, now: EpochMs, limit: int) -> list[Schedule]:
        """Up to `limit` schedules whose next_fire_at is at or before `now`, the most overdue first."""

    def advance(self, schedule: Schedule, next_fire_at: EpochMs) -> bool:
        """Move the schedule's next fire to `next_fire_at` if it still holds `schedule.next_fire_at` (False:
        another scheduler moved it, or it was deleted; nothing written)."""


class MemorySchedules:
    """ScheduleRecorder in memory (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schedules: dict[tuple[str, str], Schedule] = {}

    def add(self, schedule: Schedule) -> bool:
        key = (schedule.tenant_id, schedule.name)
        with self._lock:
            if key in self._schedules:
                return False
            self._schedules[key] = schedule
            return True

    def get(self, tenant_id: str, name: str) -> Schedule | None:
        with self._lock:
            return self._schedules.get((tenant_id, name))

    def for_tenant(self, tenant_id: str) -> list[Schedule]:
        with self._lock:
            return sorted((s for (tenant, _), s in self._schedules.items() if tenant == tenant_id),
                          key=lambda s: s.name)[:MAX_SCHEDULES_PER_TENANT]

    def remove(self, tenant_id: str, name: str) -> bool:
        with self._lock:
            return self._schedules.pop((tenant_id, name), None) is not None

    def due(self, now: EpochMs, limit: int) -> list[Schedule]:
        with self._lock:
            due = [s for s in self._schedules.values() if s.next_fire_at <= now]
        return sorted(due, key=lambda s: s.next_fire_at)[:limit]

    def advance(self, schedule: Schedule, next_fire_at: EpochMs) -> bool:
        key = (schedule.tenant_id, schedule.name)
        with self._lock:
            current = self._schedules.get(key)
            if current is None or current.next_fire_at != schedule.next_fire_at \
                    or current.created_at != schedule.created_at:
                return False
            self._schedules[key] = current.model_copy(update={"next_fire_at": next_fire_at})
            return True


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class DynamoSchedules:
    """ScheduleRecorder on the jobs table (the items in this module's docstring)."""

    def __init__(self, client: Any, jobs_table: str) -> None:
        self._db = client
        self._table = jobs_table

    def _items(self, schedule: Schedule) -> tuple[dict[str, Any], dict[str, Any]]:
        values = schedule.model_dump(mode="json")
        pk, sk = schedule_key(schedule.tenant_id, schedule.name)
        due_pk, due_sk = due_key(schedule.tenant_id, schedule.name, schedule.next_fire_at)
        return ({**to_item(values), **_key(pk, sk), "entity": {"S": SCHEDULE_ENTITY}},
                {**to_item(values), **_key(due_pk, due_sk), "entity": {"S": DUE_ENTITY}})

    def _transact(self, actions: list[dict[str, Any]]) -> bool:
        """True when the transaction committed; False when a condition refused it; tried again on a conflict
        with a concurrent transaction."""
        for attempt in range(_ATTEMPTS):
            try:
                self._db.transact_write_items(TransactItems=actions)
                return True
            except ClientError as error:
                if _error_code(error) != "TransactionCanceledException":
                    raise
                codes = [reason.get("Code") for reason in error.response.get("CancellationReasons", [])]
                if "ConditionalCheckFailed" in codes:
                    return False
                time.sleep(0.01 * 2 ** attempt)
        return False

    def add(self, schedule: Schedule) -> bool:
        item, due = self._items(schedule)
        return self._transact([
            {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": self._table, "Item": due}},
        ])

    def get(self, tenant_id: str, name: str) -> Schedule | None:
        answer = self._db.get_item(TableName=self._table, Key=_key(*schedule_key(tenant_id, name)),
                                   ConsistentRead=True)
        return _schedule(answer["Item"]) if "Item" in answer else None

    def for_tenant(self, tenant_id: str) -> list[Schedule]:
        pk, _ = schedule_key(tenant_id, "")
        found: list[Schedule] = []
        start: dict[str, Any] | None = None
        while len(found) < MAX_SCHEDULES_PER_TENANT:
            page = self._db.query(
                TableName=self._table, ConsistentRead=True,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": SCHEDULE_SK_PREFIX}},
                **({"ExclusiveStartKey": start} if start else {}))
            found.extend(_schedule(item) for item in page["Items"])
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
        return found[:MAX_SCHEDULES_PER_TENANT]

    def remove(self, tenant_id: str, name: str) -> bool:
        for _ in range(_ATTEMPTS):
            schedule = self.get(tenant_id, name)
            if schedule is None:
                return False
            if self._transact([
                {"Delete": {"TableName": self._table, "Key": _key(*schedule_key(tenant_id, name)),
                            "ConditionExpression": "next_fire_at = :at AND created_at = :created",
                            "ExpressionAttributeValues": {":at": to_attribute(schedule.next_fire_at),
                                                          ":created": to_attribute(schedule.created_at)}}},
                {"Delete": {"TableName": self._table,
                            "Key": _key(*due_key(tenant_id, name, schedule.next_fire_at))}},
            ]):
                return True
            # it advanced (or was replaced) since it was read: read it again
        return False

    def due(self, now: EpochMs, limit: int) -> list[Schedule]:
        found: list[Schedule] = []
        for shard in range(SCHEDULE_SHARDS):
            page = self._db.query(
                TableName=self._table, ConsistentRead=True, Limit=limit,
                KeyConditionExpression="pk = :pk AND sk < :bound",
                ExpressionAttributeValues={":pk": {"S": f"{DUE_PREFIX}{shard}"}, ":bound": {"S": f"{now + 1:013d}"}})
            found.extend(_schedule(item) for item in page["Items"])
        return sorted(found, key=lambda s: s.next_fire_at)[:limit]

    def advance(self, schedule: Schedule, next_fire_at: EpochMs) -> bool:
        moved = schedule.model_copy(update={"next_fire_at": next_fire_at})
        _, due = self._items(moved)
        return self._transact([
            {"Update": {"TableName": self._table, "Key": _key(*schedule_key(schedule.tenant_id, schedule.name)),
                        "UpdateExpression": "SET next_fire_at = :next",
                        "ConditionExpression": "next_fire_at = :at AND created_at = :created",
                        "ExpressionAttributeValues": {":next": to_attribute(next_fire_at),
                                                      ":at": to_attribute(schedule.next_fire_at),
                                                      ":created": to_attribute(schedule.created_at)}}},
            {"Delete": {"TableName": self._table,
                        "Key": _key(*due_key(schedule.tenant_id, schedule.name, schedule.next_fire_at))}},
            {"Put": {"TableName": self._table, "Item": due}},
        ])


def _schedule(item: dict[str, Any]) -> Schedule:
    values = from_item(item)
    return Schedule.model_validate({name: values[name] for name in Schedule.model_fields if name in values})

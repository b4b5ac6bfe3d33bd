"""Where schedules (onward.domain.schedules) are kept: on DynamoDB in the jobs table (`DynamoSchedules`), or in memory
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

Beside them, one counter per tenant, `TENANT#<tenant>` / `SCHEDULE_COUNT` (entity `schedule_count`, `schedules`):
the cap of MAX_SCHEDULES_PER_TENANT is a condition of the add's own transaction (`schedules < cap`, raised by one
as the schedule is put), and a delete lowers it in its transaction, so the cap holds however many creates run at
once (a count read before the write let 24 parallel creates at 996 store 1,001). A tenant's schedules from before
the counter have none: the first add or delete that finds it missing counts them once (a consistent Query) and
puts it only where none is; until then no add or delete of that tenant commits (both need the counter), so the
count cannot go stale in between.

What one schedule may hold is bounded (MAX_SCHEDULE_PARAMS_BYTES of params, `check_size`, refused on add with
PayloadTooLarge): an item stays far under DynamoDB's 400 KB, and a page of GET /schedules (at most 100) stays
far under Lambda's 6 MB answer.

Advancing a schedule (after its fire's job is created) is conditional on the next_fire_at it was read with, so
of two schedulers that read it at once only one moves it; the other's job create answered the same job
(its Idempotency-Key, onward.maintenance.scheduler), so nothing fires twice.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import zlib
from enum import Enum
from typing import Any, NamedTuple, Protocol

from botocore.exceptions import ClientError
from pydantic import ValidationError

from onward.domain.clock import EpochMs
from onward.domain.errors import PayloadTooLarge, StoreContention
from onward.domain.schedules import Schedule
from onward.store.dynamo.attributes import from_item, tenant_string_key, to_attribute, to_item

SCHEDULE_SK_PREFIX = "SCHEDULE#"
COUNT_SK = "SCHEDULE_COUNT"
DUE_PREFIX = "SCHEDULES#"
SCHEDULE_SHARDS = 4
SCHEDULE_ENTITY = "schedule"
DUE_ENTITY = "schedule_due"
COUNT_ENTITY = "schedule_count"
MAX_SCHEDULES_PER_TENANT = 1000
# A schedule's params as compact JSON with every non-ASCII character escaped (the longest form any JSON
# encoder of the answer gives them): an item of about 17 KB (twice in a transaction), and a page of 100 about
# 1.7 MB of JSON, at most twice that once Lambda's answer quotes it as a string: under 6 MB with room to spare.
MAX_SCHEDULE_PARAMS_BYTES = 16 * 1024
logger = logging.getLogger(__name__)
_ATTEMPTS = 8  # a transaction that meets a concurrent one is tried again, after a random wait growing each time


class AddOutcome(Enum):
    ADDED = "added"
    NAME_TAKEN = "name_taken"  # the tenant has a schedule of that name: nothing written
    TOO_MANY = "too_many"  # the tenant has MAX_SCHEDULES_PER_TENANT schedules: nothing written


class _StoredTimes(NamedTuple):
    next_fire_at: EpochMs
    created_at: EpochMs


class SchedulePage(NamedTuple):
    """Up to a page of a tenant's schedules by name, and the name to go on after (None: no more)."""

    schedules: list[Schedule]
    after: str | None


def check_size(schedule: Schedule) -> None:
    """PayloadTooLarge unless the schedule's params fit MAX_SCHEDULE_PARAMS_BYTES (as JSON, non-ASCII escaped)."""
    size = len(json.dumps(schedule.params, separators=(",", ":")))
    if size > MAX_SCHEDULE_PARAMS_BYTES:
        raise PayloadTooLarge(f"a schedule's params take {size} bytes as JSON (non-ASCII characters escaped); "
                              f"the limit is {MAX_SCHEDULE_PARAMS_BYTES}")


def schedule_key(tenant_id: str, name: str) -> tuple[str, str]:
    return f"TENANT#{tenant_id}", f"{SCHEDULE_SK_PREFIX}{name}"


def count_key(tenant_id: str) -> tuple[str, str]:
    return f"TENANT#{tenant_id}", COUNT_SK


def due_key(tenant_id: str, name: str, next_fire_at: EpochMs) -> tuple[str, str]:
    shard = zlib.crc32(f"{tenant_id}#{name}".encode()) % SCHEDULE_SHARDS
    return f"{DUE_PREFIX}{shard}", f"{next_fire_at:013d}#{tenant_id}#{name}"


def page_position(tenant_id: str, after: str) -> dict[str, Any]:
    """Where a listing of the tenant's schedules goes on, after the one named `after`, as a position a caller
    holds and hands back (`name_after`)."""
    return {"tenant_id": {"S": tenant_id}, "name": {"S": after}}


def name_after(position: object, tenant_id: str) -> str | None:
    """The name a `page_position` of this tenant's listing holds; None for anything else."""
    key = tenant_string_key(position, frozenset({"tenant_id", "name"}), tenant_id)
    return None if key is None else str(key["name"]["S"])


class ScheduleRecorder(Protocol):
    """Schedules as stored: each method one atomic read or write."""

    def add(self, schedule: Schedule) -> AddOutcome:
        """Store a new schedule, unless the tenant has one of that name or MAX_SCHEDULES_PER_TENANT of them
        (decided by the write itself, however many adds run at once). PayloadTooLarge (`check_size`)."""

    def get(self, tenant_id: str, name: str) -> Schedule | None: ...

    def page(self, tenant_id: str, limit: int, after: str | None = None) -> SchedulePage:
        """Up to `limit` of the tenant's schedules by name, those named after `after` (None: from the first)."""

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

    def add(self, schedule: Schedule) -> AddOutcome:
        check_size(schedule)
        key = (schedule.tenant_id, schedule.name)
        with self._lock:  # the count and the add as one step, as DynamoSchedules' transaction does
            if key in self._schedules:
                return AddOutcome.NAME_TAKEN
            if sum(tenant == schedule.tenant_id for tenant, _ in self._schedules) >= MAX_SCHEDULES_PER_TENANT:
                return AddOutcome.TOO_MANY
            self._schedules[key] = schedule
            return AddOutcome.ADDED

    def get(self, tenant_id: str, name: str) -> Schedule | None:
        with self._lock:
            return self._schedules.get((tenant_id, name))

    def page(self, tenant_id: str, limit: int, after: str | None = None) -> SchedulePage:
        with self._lock:
            named = sorted((s for (tenant, name), s in self._schedules.items()
                            if tenant == tenant_id and (after is None or name > after)), key=lambda s: s.name)
        shown = named[:limit]
        return SchedulePage(shown, shown[-1].name if len(named) > limit else None)

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

    def _transact(self, actions: list[dict[str, Any]]) -> list[str] | None:
        """None when the transaction committed; when a condition refused it, each action's cancellation code
        ("None" for one that did not fail). Tried again after a random wait while it only met concurrent
        transactions; StoreContention when that lasts."""
        for attempt in range(_ATTEMPTS):
            try:
                self._db.transact_write_items(TransactItems=actions)
                return None
            except ClientError as error:
                if _error_code(error) != "TransactionCanceledException":
                    raise
                codes = [str(reason.get("Code", "None")) for reason in error.response.get("CancellationReasons", [])]
                if "ConditionalCheckFailed" in codes:
                    return codes
                time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
        raise StoreContention("a schedule write kept meeting concurrent ones; retry shortly")

    def _count_change(self, tenant_id: str, change: int) -> dict[str, Any]:
        """The transaction's update of the tenant's schedule counter: +1 only below the cap, -1; both only
        where the counter is (a missing one is counted first: `_count_once`)."""
        condition = "#n < :cap" if change > 0 else "attribute_exists(#n)"
        return {"Update": {
            "TableName": self._table, "Key": _key(*count_key(tenant_id)),
            "UpdateExpression": "SET #n = #n + :change", "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#n": "schedules"},
            "ExpressionAttributeValues": {":change": {"N": str(change)},
                                          **({":cap": {"N": str(MAX_SCHEDULES_PER_TENANT)}} if change > 0 else {})}}}

    def _counted(self, tenant_id: str) -> int | None:
        """The tenant's schedule counter, read consistently (None: it has none yet)."""
        answer = self._db.get_item(TableName=self._table, Key=_key(*count_key(tenant_id)), ConsistentRead=True)
        return int(answer["Item"]["schedules"]["N"]) if "Item" in answer else None

    def _count_once(self, tenant_id: str) -> None:
        """Put the counter of a tenant whose schedules predate it: their number, read while no add or delete
        of this tenant can commit (each needs the counter), and put only where none is (another process may
        have counted first)."""
        pk, _ = schedule_key(tenant_id, "")
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table, ConsistentRead=True, Select="COUNT",
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": SCHEDULE_SK_PREFIX}})
        found = sum(page["Count"] for page in pages)
        try:
            self._db.put_item(TableName=self._table, ConditionExpression="attribute_not_exists(pk)", Item={
                **_key(*count_key(tenant_id)), "entity": {"S": COUNT_ENTITY}, "schedules": {"N": str(found)}})
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise

    def add(self, schedule: Schedule) -> AddOutcome:
        check_size(schedule)
        item, due = self._items(schedule)
        for _ in range(_ATTEMPTS):
            refused = self._transact([
                {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
                {"Put": {"TableName": self._table, "Item": due}},
                self._count_change(schedule.tenant_id, +1),
            ])
            if refused is None:
                return AddOutcome.ADDED
            if refused[0] == "ConditionalCheckFailed":
                return AddOutcome.NAME_TAKEN
            counted = self._counted(schedule.tenant_id)
            if counted is None:
                self._count_once(schedule.tenant_id)
            elif counted >= MAX_SCHEDULES_PER_TENANT:
                return AddOutcome.TOO_MANY
            # counted now, or a delete made room since the refusal: try again
        raise StoreContention("the tenant's schedules kept changing; retry shortly")

    def get(self, tenant_id: str, name: str) -> Schedule | None:
        answer = self._db.get_item(TableName=self._table, Key=_key(*schedule_key(tenant_id, name)),
                                   ConsistentRead=True)
        return _schedule(answer["Item"]) if "Item" in answer else None

    def _stored_times(self, tenant_id: str, name: str) -> _StoredTimes | None:
        """What a delete's condition names of a stored schedule, whatever the rest of it holds."""
        answer = self._db.get_item(TableName=self._table, Key=_key(*schedule_key(tenant_id, name)),
                                   ConsistentRead=True, ProjectionExpression="next_fire_at, created_at")
        if "Item" not in answer:
            return None
        values = from_item(answer["Item"])
        return _StoredTimes(next_fire_at=int(values["next_fire_at"]), created_at=int(values["created_at"]))

    def page(self, tenant_id: str, limit: int, after: str | None = None) -> SchedulePage:
        pk, _ = schedule_key(tenant_id, "")
        found: list[Schedule] = []
        start = None if after is None else _key(*schedule_key(tenant_id, after))
        while len(found) <= limit:  # one more than shown, to know whether there are more
            page = self._db.query(
                TableName=self._table, ConsistentRead=True, Limit=limit + 1 - len(found),
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": SCHEDULE_SK_PREFIX}},
                **({"ExclusiveStartKey": start} if start else {}))
            found.extend(_readable(page["Items"]))
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
        shown = found[:limit]
        return SchedulePage(shown, shown[-1].name if len(found) > limit else None)

    def remove(self, tenant_id: str, name: str) -> bool:
        for _ in range(_ATTEMPTS):
            schedule = self._stored_times(tenant_id, name)
            if schedule is None:
                return False
            refused = self._transact([
                {"Delete": {"TableName": self._table, "Key": _key(*schedule_key(tenant_id, name)),
                            "ConditionExpression": "next_fire_at = :at AND created_at = :created",
                            "ExpressionAttributeValues": {":at": to_attribute(schedule.next_fire_at),
                                                          ":created": to_attribute(schedule.created_at)}}},
                {"Delete": {"TableName": self._table,
                            "Key": _key(*due_key(tenant_id, name, schedule.next_fire_at))}},
                self._count_change(tenant_id, -1),
            ])
            if refused is None:
                return True
            if refused[2] == "ConditionalCheckFailed" and refused[0] != "ConditionalCheckFailed":
                self._count_once(tenant_id)  # schedules from before the counter
            # else it advanced (or was replaced) since it was read: read it again
        raise StoreContention("the schedule kept changing; retry shortly")

    def due(self, now: EpochMs, limit: int) -> list[Schedule]:
        found: list[Schedule] = []
        for shard in range(SCHEDULE_SHARDS):
            page = self._db.query(
                TableName=self._table, ConsistentRead=True, Limit=limit,
                KeyConditionExpression="pk = :pk AND sk < :bound",
                ExpressionAttributeValues={":pk": {"S": f"{DUE_PREFIX}{shard}"}, ":bound": {"S": f"{now + 1:013d}"}})
            found.extend(_readable(page["Items"]))
        return sorted(found, key=lambda s: s.next_fire_at)[:limit]

    def advance(self, schedule: Schedule, next_fire_at: EpochMs) -> bool:
        moved = schedule.model_copy(update={"next_fire_at": next_fire_at})
        _, due = self._items(moved)
        try:
            refused = self._transact([
                {"Update": {"TableName": self._table,
                            "Key": _key(*schedule_key(schedule.tenant_id, schedule.name)),
                            "UpdateExpression": "SET next_fire_at = :next",
                            "ConditionExpression": "next_fire_at = :at AND created_at = :created",
                            "ExpressionAttributeValues": {":next": to_attribute(next_fire_at),
                                                          ":at": to_attribute(schedule.next_fire_at),
                                                          ":created": to_attribute(schedule.created_at)}}},
                {"Delete": {"TableName": self._table,
                            "Key": _key(*due_key(schedule.tenant_id, schedule.name, schedule.next_fire_at))}},
                {"Put": {"TableName": self._table, "Item": due}},
            ])
        except StoreContention:
            return False  # other schedulers kept moving it: the next tick reads where it is
        return refused is None


def _schedule(item: dict[str, Any]) -> Schedule:
    values = from_item(item)
    return Schedule.model_validate({name: values[name] for name in Schedule.model_fields if name in values})


def _readable(items: list[dict[str, Any]]) -> list[Schedule]:
    """The schedules of `items` that today's rules accept. One stored under looser rules (a `localtime` zone, a
    cron with non-ASCII digits: accepted before those were refused) is left out with a warning naming it, so
    that it never stops a tick or a tenant's listing; it fires no more, and its tenant can still delete it."""
    readable: list[Schedule] = []
    for item in items:
        try:
            readable.append(_schedule(item))
        except ValidationError as error:
            logger.warning("schedule %s/%s is stored with values today's rules refuse, so it is not fired: %s",
                           item.get("tenant_id", {}).get("S"), item.get("name", {}).get("S"),
                           "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()))
    return readable

"""Pauses and the drain switch in the jobs table (onward.store.pauses.FlowBook on DynamoDB).

- a pause: `FLOW` / `PAUSE#<tenant or *>#<type or *>` (entity `pause`, `paused_at`), put by a pause (kept as
  it is when there: `attribute_not_exists`), deleted by its resume;
- the drain switch: `FLOW` / `DRAIN` (entity `drain`, `on`, `changed_at`);
- a resumed type pause whose held jobs are not all back yet: `FLOW` / `SWEEP#<tenant or *>#<type>` (entity
  `sweep`, `resumed_at`), put before the pause is deleted and deleted when its sweep ends.
The partition holds at most MAX_PAUSES + 1 small items: every process reads it whole, consistently, once per
FLOW_CACHE_MS (one Query; 0.5 read units per 4 KB), and no claim reads it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs
from onward.domain.pauses import FlowSwitches, Pause
from onward.store.pauses import MAX_PAUSES, TooManyPauses

FLOW_PK = "FLOW"
PAUSE_SK_PREFIX = "PAUSE#"
DRAIN_SK = "DRAIN"
SWEEP_SK_PREFIX = "SWEEP#"


def pause_key(pause: Pause) -> dict[str, Any]:
    tenant, job_type = pause.sides
    return {"pk": {"S": FLOW_PK}, "sk": {"S": f"{PAUSE_SK_PREFIX}{tenant}#{job_type}"}}


def _sweep_key(pause: Pause) -> dict[str, Any]:
    tenant, job_type = pause.sides
    return {"pk": {"S": FLOW_PK}, "sk": {"S": f"{SWEEP_SK_PREFIX}{tenant}#{job_type}"}}


def _drain_key() -> dict[str, Any]:
    return {"pk": {"S": FLOW_PK}, "sk": {"S": DRAIN_SK}}


def _failed_condition(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code", "")) == "ConditionalCheckFailedException"


class DynamoFlowBook:
    """FlowBook on the jobs table (the items in this module's docstring)."""

    def __init__(self, client: Any, jobs_table: str) -> None:
        self._db = client
        self._table = jobs_table

    def switches(self) -> FlowSwitches:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table, ConsistentRead=True, KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": FLOW_PK}})
        pauses: set[Pause] = set()
        unswept: set[Pause] = set()
        draining = False
        for page in pages:
            for item in page["Items"]:
                sort_key = item["sk"]["S"]
                if sort_key == DRAIN_SK:
                    draining = bool(item.get("on", {}).get("BOOL", False))
                elif sort_key.startswith(PAUSE_SK_PREFIX):
                    tenant, _, job_type = sort_key.removeprefix(PAUSE_SK_PREFIX).partition("#")
                    pauses.add(Pause.of_sides(tenant, job_type))
                elif sort_key.startswith(SWEEP_SK_PREFIX):
                    tenant, _, job_type = sort_key.removeprefix(SWEEP_SK_PREFIX).partition("#")
                    unswept.add(Pause.of_sides(tenant, job_type))
        return FlowSwitches(frozenset(pauses), draining, frozenset(unswept))

    def pause(self, pause: Pause, at: EpochMs) -> bool:
        if len(self.switches().pauses) >= MAX_PAUSES:  # (two pauses racing at the cap may both pass: harmless)
            raise TooManyPauses(f"{MAX_PAUSES} pauses are in force: resume some first")
        try:
            self._db.put_item(TableName=self._table, Item={**pause_key(pause), "entity": {"S": "pause"},
                                                           "paused_at": {"N": str(at)}},
                              ConditionExpression="attribute_not_exists(pk)")
        except ClientError as error:
            if _failed_condition(error):
                return False
            raise
        return True

    def resume(self, pause: Pause) -> bool:
        try:
            self._db.delete_item(TableName=self._table, Key=pause_key(pause),
                                 ConditionExpression="attribute_exists(pk)")
        except ClientError as error:
            if _failed_condition(error):
                return False
            raise
        return True

    def set_draining(self, on: bool, at: EpochMs) -> bool:
        try:
            self._db.put_item(TableName=self._table, Item={**_drain_key(), "entity": {"S": "drain"},
                                                           "on": {"BOOL": on}, "changed_at": {"N": str(at)}},
                              # (turned off only when on; on when off or never set)
                              ConditionExpression="attribute_not_exists(pk) OR #on = :was" if on else "#on = :was",
                              ExpressionAttributeNames={"#on": "on"},
                              ExpressionAttributeValues={":was": {"BOOL": not on}})
        except ClientError as error:
            if _failed_condition(error):
                return False
            raise
        return True

    def mark_unswept(self, pause: Pause, at: EpochMs) -> None:
        self._db.put_item(TableName=self._table, Item={**_sweep_key(pause), "entity": {"S": "sweep"},
                                                       "resumed_at": {"N": str(at)}})

    def mark_swept(self, pause: Pause) -> None:
        self._db.delete_item(TableName=self._table, Key=_sweep_key(pause))

"""Concurrency keys in the jobs table (onward.store.ports.concurrency_keys on DynamoDB): one item per (tenant,
key), `CONC#<tenant>#<key>` / `CONC` (entity `concurrency_key`), counting `running` and `held`, and the actions
a transition, a hold and a release take on it. A claim's and an end's are actions of their own transaction
(onward.store.dynamo.writes); the item is never deleted (about 100 bytes per key ever used)."""

from __future__ import annotations

from typing import Any

from onward.domain.concurrency import KeyCount, key_of_hold
from onward.store.dynamo.attributes import Item
from onward.store.dynamo.held_items import release_actions
from onward.store.dynamo.keys import Key
from onward.store.ports.concurrency_keys import ConcurrencyCounts, KeyLimit, SlotReturn, SlotTake
from onward.store.ports.outcomes import Role

CONCURRENCY_PREFIX = "CONC#"
CONCURRENCY_SK = "CONC"
ENTITY = "concurrency_key"


def concurrency_key(tenant_id: str, key: str) -> Key:
    return Key(f"{CONCURRENCY_PREFIX}{tenant_id}#{key}", CONCURRENCY_SK)


def _wire(key: Key) -> Item:
    return {"pk": {"S": key.pk}, "sk": {"S": key.sk}}


def _count_update(table: str, tenant_id: str, key: str, adds: dict[str, int], condition: str | None = None,
                  values: dict[str, Any] | None = None) -> dict[str, Any]:
    """An update of the key's item: ADD each of `adds`, on `condition` (names #running, #held)."""
    names = {"#entity": "entity", "#tenant": "tenant_id", "#ckey": "concurrency_key", "#running": "running",
             "#held": "held"}
    wire_values: dict[str, Any] = {":entity": {"S": ENTITY}, ":tenant": {"S": tenant_id}, ":ckey": {"S": key},
                                   **(values or {})}
    clauses = []
    for attribute, amount in adds.items():
        wire_values[f":add_{attribute}"] = {"N": str(amount)}
        clauses.append(f"#{attribute} :add_{attribute}")
    update = f"SET #entity = :entity, #tenant = :tenant, #ckey = :ckey ADD {', '.join(clauses)}"
    used = update + (condition or "")
    action: dict[str, Any] = {
        "TableName": table, "Key": _wire(concurrency_key(tenant_id, key)), "UpdateExpression": update,
        # (DynamoDB refuses a name or value an expression does not use)
        "ExpressionAttributeNames": {name: value for name, value in names.items() if name in used},
        "ExpressionAttributeValues": wire_values}
    if condition is not None:
        action["ConditionExpression"] = condition
    return {"Update": action}


def slot_actions(table: str, slot: SlotTake | SlotReturn) -> list[tuple[Role, dict[str, Any]]]:
    """A transition's actions on its key: a claim's `running + 1` below the limit; an end's `running - 1` while
    `held` is as read, with the oldest held job put back (its queue entry's update is the transaction's)."""
    if isinstance(slot, SlotTake):
        return [(Role.CONCURRENCY, _count_update(
            table, slot.tenant_id, slot.key, {"running": 1},
            "attribute_not_exists(#running) OR #running < :limit", {":limit": {"N": str(slot.limit)}}))]
    held_read = {":held_read": {"N": str(slot.held_read)}}
    condition = ("#held = :held_read" if slot.held_read else "attribute_not_exists(#held) OR #held = :held_read")
    if slot.release is None:
        return [(Role.CONCURRENCY, _count_update(table, slot.tenant_id, slot.key, {"running": -1}, condition,
                                                 held_read))]
    row = slot.release.row
    return [(Role.CONCURRENCY, _count_update(table, slot.tenant_id, slot.key, {"running": -1, "held": -1},
                                             condition, held_read)),
            *[(Role.HELD_RELEASE, action) for action in release_actions(table, row.job, row.ready_shards,
                                                                         slot.release.hold_key)]]


def hold_action(table: str, limit: KeyLimit) -> dict[str, Any]:
    """A hold's action on the key: `held + 1` while the key is at its limit."""
    return _count_update(table, limit.tenant_id, limit.key, {"held": 1}, "#running >= :limit",
                         {":limit": {"N": str(limit.limit)}})


def release_held_action(table: str, tenant_id: str, hold_key: str) -> dict[str, Any] | None:
    """A release's action on the key whose hold it ends (`held - 1`), None for another hold (a pause's)."""
    key = key_of_hold(hold_key)
    return None if key is None else _count_update(table, tenant_id, key, {"held": -1})


class DynamoConcurrencyCounts(ConcurrencyCounts):
    _db: Any
    _jobs: str

    def key_count(self, tenant_id: str, key: str) -> KeyCount:
        item = self._db.get_item(TableName=self._jobs, Key=_wire(concurrency_key(tenant_id, key)),
                                 ConsistentRead=True).get("Item") or {}
        return KeyCount(int(item.get("running", {}).get("N", 0)), int(item.get("held", {}).get("N", 0)))

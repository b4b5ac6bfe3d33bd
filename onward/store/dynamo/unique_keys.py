"""Unique jobs (issue 37) on DynamoDB: a tenant's unique key is one item, `UNIQUE#<tenant>#<key>` / `UNIQUE`
(onward.store.dynamo.keys), put by the create's own TransactWriteItems on the UniqueClaim's condition, and read
strongly consistent when a create finds it held (onward.store.unique_keys decides what then)."""

from __future__ import annotations

from typing import Any

from onward.domain.states import TERMINAL_STATES
from onward.domain.uniqueness import UniqueHold
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.keys import Entity, job_key, unique_key
from onward.store.ports.outcomes import Role
from onward.store.ports.unique_keys import UniqueClaim, UniqueKeyReads


def _wire_key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def unique_item(tenant_id: str, taking: UniqueClaim) -> dict[str, Any]:
    """The key's item in the wire format: the holder, until when (window mode) and a TTL a second after that;
    the "until finished" mode has neither (a finished holder frees it: the next create takes it over)."""
    pk, sk = unique_key(tenant_id, taking.key)
    item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": sk}, "entity": {"S": Entity.UNIQUE_KEY.value},
                            "tenant_id": {"S": tenant_id}, "job_id": {"S": taking.hold.job_id}}
    if taking.hold.held_until is not None:
        item["held_until"] = {"N": str(taking.hold.held_until)}
        # TTL only tidies up (it deletes up to days late): the condition compares held_until with now
        item["expires_at"] = {"N": str(taking.hold.held_until // 1000 + 1)}
    return item


def unique_actions(jobs_table: str, tenant_id: str, taking: UniqueClaim) -> list[tuple[Role, dict[str, Any]]]:
    """The actions a create adds to its transaction to take its unique key: the key's conditional put, and
    for a takeover the check that the previous holder's row is finished or gone."""
    put: dict[str, Any] = {"TableName": jobs_table, "Item": unique_item(tenant_id, taking)}
    if taking.previous_holder is None:
        put |= {"ConditionExpression": "attribute_not_exists(pk) OR held_until <= :now",
                "ExpressionAttributeValues": {":now": {"N": str(taking.now)}}}
        return [(Role.UNIQUE, {"Put": put})]
    put |= {"ConditionExpression": "attribute_not_exists(pk) OR job_id = :holder",
            "ExpressionAttributeValues": {":holder": {"S": taking.previous_holder}}}
    finished = {f":t{number}": {"S": state.value} for number, state in enumerate(sorted(TERMINAL_STATES))}
    holder = job_key(taking.previous_holder)
    check = {"ConditionCheck": {
        "TableName": jobs_table,
        "Key": _wire_key(holder.pk, holder.sk),
        "ConditionExpression": f"attribute_not_exists(pk) OR #state IN ({', '.join(finished)})",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": finished,
    }}
    return [(Role.UNIQUE, {"Put": put}), (Role.UNIQUE_HOLDER, check)]


class DynamoUniqueKeys(UniqueKeyReads):
    """The read of a unique key's item, for DynamoRecorder (its client `_db` and jobs table `_jobs`)."""

    _db: Any
    _jobs: str

    def unique_hold(self, tenant_id: str, key: str) -> UniqueHold | None:
        pk, sk = unique_key(tenant_id, key)
        item = self._db.get_item(TableName=self._jobs, Key=_wire_key(pk, sk), ConsistentRead=True).get("Item")
        if item is None:
            return None
        values = from_item(item)
        held_until = values.get("held_until")
        return UniqueHold(values["job_id"], None if held_until is None else int(held_until))

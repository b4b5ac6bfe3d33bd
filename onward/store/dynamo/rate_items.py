"""Rate limits' items and actions on DynamoDB (issue 37), pure: a limit definition's item, a bucket's
compare-and-set as a transaction's Update, and the job row's condition on the reservation it was read with.

A bucket's Update sets `tat` on the condition that it still holds the TAT read (`attribute_not_exists` when
there was no bucket): two claims that read one TAT cannot both take the token after it. Every claim of a
limited key writes its bucket: 2 write units in a transaction, so one bucket takes about 500 claims/s within
a partition's 1,000 write units/s (docs/flow-control.md).
"""

from __future__ import annotations

from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.rate_limits import BucketMove, Gcra
from onward.store.dynamo.attributes import to_attribute
from onward.store.dynamo.keys import Entity, Key, rate_bucket_key, rate_limit_key
from onward.store.ports.rate_buckets import RateLimitDefinition

RESERVED_AT = "rate_reserved_at"  # the job row's attribute (onward.domain.models.Job)


def wire(key: Key) -> dict[str, Any]:
    return {"pk": {"S": key.pk}, "sk": {"S": key.sk}}


def definition_item(tenant_id: str, definition: RateLimitDefinition) -> dict[str, Any]:
    pk, sk = rate_limit_key(tenant_id, definition.key)
    return {"pk": {"S": pk}, "sk": {"S": sk}, "entity": {"S": Entity.RATE_LIMIT.value},
            "tenant_id": {"S": tenant_id}, "limit": {"N": str(definition.gcra.limit)},
            "period_s": to_attribute(definition.gcra.period_s), "updated_at": {"N": str(definition.updated_at)}}


def definition_from(values: dict[str, Any]) -> RateLimitDefinition:
    return RateLimitDefinition(str(values["sk"]), Gcra(int(values["limit"]), values["period_s"]),
                               int(values.get("updated_at", 0)))


def bucket_move(jobs_table: str, tenant_id: str, move: BucketMove) -> dict[str, Any]:
    """The Update of one bucket, from the TAT read to the new one."""
    values: dict[str, Any] = {":tat": {"N": str(move.tat)}, ":entity": {"S": Entity.RATE_BUCKET.value}}
    if move.expected is None:
        condition = "attribute_not_exists(#tat)"
    else:
        condition = "#tat = :read"
        values[":read"] = {"N": str(move.expected)}
    return {"Update": {
        "TableName": jobs_table,
        "Key": wire(rate_bucket_key(tenant_id, move.key)),
        "UpdateExpression": "SET #tat = :tat, #entity = :entity",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#tat": "tat", "#entity": "entity"},
        "ExpressionAttributeValues": values,
    }}


def with_reservation_read(action: dict[str, Any], reserved_read: EpochMs | None) -> dict[str, Any]:
    """The job row's Update (or ConditionCheck) `action`, also conditional on its `rate_reserved_at` being
    `reserved_read` (absent for None)."""
    body = next(iter(action.values()))
    body.setdefault("ExpressionAttributeNames", {})["#rra"] = RESERVED_AT
    if reserved_read is None:
        extra = "attribute_not_exists(#rra)"
    else:
        extra = "#rra = :rra_read"
        body.setdefault("ExpressionAttributeValues", {})[":rra_read"] = {"N": str(reserved_read)}
    body["ConditionExpression"] = f"({body['ConditionExpression']}) AND {extra}"
    return action

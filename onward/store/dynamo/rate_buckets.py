"""The rate limits role on DynamoDB (onward.store.ports.rate_buckets): definitions by Query of the tenant's
partition, buckets by a consistent BatchGetItem, a reservation as one TransactWriteItems (the items:
onward.store.dynamo.rate_items)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from botocore.exceptions import ClientError

from onward.domain.errors import StoreInvariantViolation
from onward.store.dynamo.attributes import from_item, to_attribute
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.keys import job_key, rate_bucket_key, rate_limit_key, rate_limits_pk
from onward.store.dynamo.rate_items import (
    RESERVED_AT,
    bucket_move,
    definition_from,
    definition_item,
    wire,
    with_reservation_read,
)
from onward.store.ports.rate_buckets import RateBuckets, RateLimitDefinition, Reservation, ReserveOutcome

_CHECK_FAILED = "ConditionalCheckFailed"


class DynamoRateBuckets(RateBuckets):
    _db: Any
    _jobs: str

    def rate_limits(self, tenant_id: str) -> list[RateLimitDefinition]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._jobs, KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": rate_limits_pk(tenant_id)}}, ConsistentRead=True)
        return [definition_from(from_item(item)) for page in pages for item in page["Items"]]

    def rate_limits_of(self, tenant_id: str, keys: Collection[str]) -> dict[str, RateLimitDefinition]:
        items = batch_get(self._db, self._jobs, [wire(rate_limit_key(tenant_id, key)) for key in keys],
                          consistent=False).items if keys else []
        return {definition.key: definition for definition in map(definition_from, map(from_item, items))}

    def put_rate_limit(self, tenant_id: str, definition: RateLimitDefinition) -> None:
        self._db.put_item(TableName=self._jobs, Item=definition_item(tenant_id, definition))

    def delete_rate_limit(self, tenant_id: str, key: str) -> bool:
        old = self._db.delete_item(TableName=self._jobs, Key=wire(rate_limit_key(tenant_id, key)),
                                   ReturnValues="ALL_OLD")
        return bool(old.get("Attributes"))

    def bucket_tats(self, tenant_id: str, keys: Collection[str]) -> dict[str, int]:
        if not keys:
            return {}
        by_pk = {rate_bucket_key(tenant_id, key).pk: key for key in keys}
        items = batch_get(self._db, self._jobs, [wire(rate_bucket_key(tenant_id, key)) for key in keys],
                          consistent=True).items
        return {by_pk[values["pk"]]: int(values["tat"]) for values in map(from_item, items) if "tat" in values}

    def reserve(self, reservation: Reservation) -> ReserveOutcome:
        state, version, attempt = reservation.expected
        job_update = {"Update": {
            "TableName": self._jobs,
            "Key": wire(job_key(reservation.job_id)),
            "UpdateExpression": "SET #nb = :at, #due = :at, #rra = :at",
            "ConditionExpression": "#state = :state AND #version = :version AND #attempt = :attempt "
                                   "AND attribute_exists(#due)",
            "ExpressionAttributeNames": {"#nb": "not_before", "#due": "ready_due", "#state": "state",
                                         "#version": "version", "#attempt": "attempt", "#rra": RESERVED_AT},
            "ExpressionAttributeValues": {":at": {"N": str(reservation.at)}, ":state": {"S": state.value},
                                          ":version": to_attribute(version), ":attempt": to_attribute(attempt)},
        }}
        actions = [with_reservation_read(job_update, reservation.reserved_read),
                   *(bucket_move(self._jobs, reservation.tenant_id, move) for move in reservation.moves)]
        try:
            self._db.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            codes = [reason.get("Code", "None") for reason in error.response.get("CancellationReasons", [])]
            if codes and codes[0] == _CHECK_FAILED:
                return ReserveOutcome.JOB_MOVED
            if _CHECK_FAILED in codes[1:] or "TransactionConflict" in codes:
                return ReserveOutcome.BUCKET_MOVED
            raise StoreInvariantViolation(f"a rate reservation of job {reservation.job_id} was cancelled: "
                                          f"{codes}") from error
        return ReserveOutcome.RESERVED

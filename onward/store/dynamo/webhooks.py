"""Webhook endpoints and deliveries in the jobs table (onward.store.webhooks.WebhookRecorder on DynamoDB).

- an endpoint: `TENANT#<tenant>` / `WEBHOOK#<id>` (entity `webhook`), beside the tenant's settings and
  schedules: a tenant's endpoints are one Query of its partition (`begins_with(sk, "WEBHOOK#")`), what the
  matcher reads per tenant of a batch and GET /webhooks lists;
- a delivery: `WEBHOOK#<id>` / `DELIVERY#<delivery id>` (entity `webhook_delivery`), put only where none is
  (`attribute_not_exists`), updated only while its `attempts` is the one read; TTL `expires_at`
  DELIVERY_RETENTION_S after it was recorded.

The cap of MAX_WEBHOOKS_PER_TENANT is checked by a consistent count before the put: two creates racing at the
cap may both pass (a cap of endpoints, unlike schedules', protects nothing that a few more would break).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.webhooks import MAX_WEBHOOKS_PER_TENANT, Delivery, Webhook
from onward.store.dynamo.attributes import from_item, to_item
from onward.store.webhooks import RECENT_DELIVERIES, AddOutcome

WEBHOOK_SK_PREFIX = "WEBHOOK#"
DELIVERY_SK_PREFIX = "DELIVERY#"
WEBHOOK_ENTITY = "webhook"
DELIVERY_ENTITY = "webhook_delivery"
DELIVERY_RETENTION_S = 7 * 86_400
_STORAGE_ONLY = ("pk", "sk", "entity", "expires_at")


def webhook_key(tenant_id: str, webhook_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"TENANT#{tenant_id}"}, "sk": {"S": f"{WEBHOOK_SK_PREFIX}{webhook_id}"}}


def delivery_key(webhook_id: str, delivery_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"{WEBHOOK_SK_PREFIX}{webhook_id}"}, "sk": {"S": f"{DELIVERY_SK_PREFIX}{delivery_id}"}}


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _values(item: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in from_item(item).items() if name not in _STORAGE_ONLY}


class DynamoWebhooks:
    """WebhookRecorder on the jobs table (the items in this module's docstring)."""

    def __init__(self, client: Any, jobs_table: str) -> None:
        self._db = client
        self._table = jobs_table

    def register(self, webhook: Webhook) -> AddOutcome:
        if len(self.of_tenant(webhook.tenant_id)) >= MAX_WEBHOOKS_PER_TENANT:
            return AddOutcome.TOO_MANY
        item = {**to_item(webhook.model_dump(mode="json")), **webhook_key(webhook.tenant_id, webhook.webhook_id),
                "entity": {"S": WEBHOOK_ENTITY}}
        self._db.put_item(TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        return AddOutcome.ADDED

    def get(self, tenant_id: str, webhook_id: str) -> Webhook | None:
        answer = self._db.get_item(TableName=self._table, Key=webhook_key(tenant_id, webhook_id), ConsistentRead=True)
        return Webhook.model_validate(_values(answer["Item"])) if "Item" in answer else None

    def of_tenant(self, tenant_id: str) -> list[Webhook]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table, ConsistentRead=True,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": webhook_key(tenant_id, "")["pk"], ":prefix": {"S": WEBHOOK_SK_PREFIX}})
        found = [Webhook.model_validate(_values(item)) for page in pages for item in page["Items"]]
        return sorted(found, key=lambda hook: (hook.created_at, hook.webhook_id))

    def remove(self, tenant_id: str, webhook_id: str) -> bool:
        try:
            self._db.delete_item(TableName=self._table, Key=webhook_key(tenant_id, webhook_id),
                                 ConditionExpression="attribute_exists(pk)")
        except ClientError as error:
            if _error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def record(self, deliveries: list[Delivery]) -> list[Delivery]:
        return [self._record_one(delivery) for delivery in deliveries]

    def _record_one(self, delivery: Delivery) -> Delivery:
        try:
            self._db.put_item(TableName=self._table, Item=self._item(delivery),
                              ConditionExpression="attribute_not_exists(pk)",
                              ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise
            held = error.response.get("Item")
            if held:
                return Delivery.model_validate(_values(held))
            found = self.delivery(delivery.webhook_id, delivery.delivery_id)
            if found is None:
                raise
            return found
        return delivery

    def delivery(self, webhook_id: str, delivery_id: str) -> Delivery | None:
        answer = self._db.get_item(TableName=self._table, Key=delivery_key(webhook_id, delivery_id),
                                   ConsistentRead=True)
        return Delivery.model_validate(_values(answer["Item"])) if "Item" in answer else None

    def recent(self, webhook_id: str, limit: int = RECENT_DELIVERIES) -> list[Delivery]:
        """Read in full (a partition holds DELIVERY_RETENTION_S of one endpoint's deliveries), newest first."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": delivery_key(webhook_id, "")["pk"],
                                       ":prefix": {"S": DELIVERY_SK_PREFIX}})
        found = [Delivery.model_validate(_values(item)) for page in pages for item in page["Items"]]
        return sorted(found, key=lambda d: (d.created_at, d.delivery_id), reverse=True)[:limit]

    def update(self, delivery: Delivery, read_attempts: int) -> bool:
        try:
            self._db.put_item(TableName=self._table, Item=self._item(delivery),
                              ConditionExpression="attempts = :read",
                              ExpressionAttributeValues={":read": {"N": str(read_attempts)}})
        except ClientError as error:
            if _error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _item(self, delivery: Delivery) -> dict[str, Any]:
        return {**to_item(delivery.model_dump(mode="json")), **delivery_key(delivery.webhook_id, delivery.delivery_id),
                "entity": {"S": DELIVERY_ENTITY},
                "expires_at": {"N": str(delivery.created_at // 1000 + DELIVERY_RETENTION_S)}}

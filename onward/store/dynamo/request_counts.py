"""A tenant's API requests per quota window in the jobs table: `QUOTA#<tenant>#<window start ms>` / `QUOTA`,
`used` raised by conditional ADDs that never pass the window's limit, gone by TTL an hour after the window.
One item per tenant and window, written once per grant (about GRANTS_PER_WINDOW times a window): far from a
partition's 1,000 writes a second."""

from __future__ import annotations

from typing import Any

from onward.domain.request_quota import QUOTA_WINDOW_MS

QUOTA_PREFIX = "QUOTA#"
QUOTA_SK = "QUOTA"
KEPT_AFTER_WINDOW_S = 3600


class DynamoRequestCounter:
    def __init__(self, client: Any, jobs_table: str) -> None:
        self._client = client
        self._table = jobs_table

    def take(self, tenant_id: str, window_start_ms: int, amount: int, limit: int) -> int:
        for asked in (amount, 1) if amount > 1 else (amount,):
            if self._add(tenant_id, window_start_ms, asked, limit):
                return asked
        return 0

    def _add(self, tenant_id: str, window_start_ms: int, amount: int, limit: int) -> bool:
        expires_at = (window_start_ms + QUOTA_WINDOW_MS) // 1000 + KEPT_AFTER_WINDOW_S
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": f"{QUOTA_PREFIX}{tenant_id}#{window_start_ms}"}, "sk": {"S": QUOTA_SK}},
                UpdateExpression="ADD #used :amount SET #expires = :expires",
                ConditionExpression="attribute_not_exists(#used) OR #used <= :room",
                ExpressionAttributeNames={"#used": "used", "#expires": "expires_at"},
                ExpressionAttributeValues={":amount": {"N": str(amount)}, ":room": {"N": str(limit - amount)},
                                           ":expires": {"N": str(expires_at)}})
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True

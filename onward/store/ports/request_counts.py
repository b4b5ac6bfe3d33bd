"""The shared count of a tenant's API requests per quota window (onward.domain.request_quota), which every
execution environment of the API takes its grants from: DynamoDB (onward.store.dynamo.request_counts) or
memory (onward.store.memory.request_counts)."""

from __future__ import annotations

from typing import Protocol


class RequestCounter(Protocol):
    def take(self, tenant_id: str, window_start_ms: int, amount: int, limit: int) -> int:
        """Take `amount` of the tenant's window, or 1 when fewer than `amount` are left; how many were taken
        (0 once the window's `limit` is reached). Never lets the window's total pass `limit`."""
        ...

"""Where webhook endpoints and their deliveries (onward.domain.webhooks) are kept: the `WebhookRecorder`
protocol, answered on DynamoDB by onward.store.dynamo.webhooks.DynamoWebhooks (in the jobs table) and in memory
by `MemoryWebhooks`, with the same conditions (tests/contract/test_webhook_contract.py runs one suite on both).

- An endpoint is added only while its tenant has fewer than MAX_WEBHOOKS_PER_TENANT.
- Recording a delivery never overwrites one of the same id (the same event for the same endpoint): a
  redelivered stream batch finds it as it is, delivered or not.
- Every update of a delivery is conditional on the `attempts` it was read with, so of two deliverers holding
  the same delivery (a queue message seen twice) only one moves it.
"""

from __future__ import annotations

import threading
from enum import Enum
from typing import Protocol

from onward.domain.webhooks import MAX_WEBHOOKS_PER_TENANT, Delivery, Webhook

RECENT_DELIVERIES = 50  # what GET /webhooks/{id}/deliveries answers at most, newest first


class AddOutcome(Enum):
    ADDED = "added"
    TOO_MANY = "too_many"  # the tenant has MAX_WEBHOOKS_PER_TENANT endpoints: nothing written


class WebhookRecorder(Protocol):
    def register(self, webhook: Webhook) -> AddOutcome: ...

    def get(self, tenant_id: str, webhook_id: str) -> Webhook | None:
        """The tenant's endpoint; None when it has none of that id (another tenant's is answered the same)."""

    def of_tenant(self, tenant_id: str) -> list[Webhook]:
        """The tenant's endpoints, oldest first."""

    def remove(self, tenant_id: str, webhook_id: str) -> bool:
        """True when the endpoint was there; its deliveries stay until they expire."""

    def record(self, deliveries: list[Delivery]) -> list[Delivery]:
        """Each delivery as stored: the one given where none of its id was, else the one already there."""

    def delivery(self, webhook_id: str, delivery_id: str) -> Delivery | None: ...

    def recent(self, webhook_id: str, limit: int = RECENT_DELIVERIES) -> list[Delivery]:
        """The endpoint's deliveries, newest first."""

    def update(self, delivery: Delivery, read_attempts: int) -> bool:
        """Store `delivery` in place of the one read with `read_attempts`; False (nothing written) when it
        changed since."""


class MemoryWebhooks:
    """The recorder in memory, for tests and the fast tier."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._webhooks: dict[tuple[str, str], Webhook] = {}
        self._deliveries: dict[tuple[str, str], Delivery] = {}

    def register(self, webhook: Webhook) -> AddOutcome:
        with self._lock:
            if len(self._tenant(webhook.tenant_id)) >= MAX_WEBHOOKS_PER_TENANT:
                return AddOutcome.TOO_MANY
            self._webhooks[(webhook.tenant_id, webhook.webhook_id)] = webhook
            return AddOutcome.ADDED

    def get(self, tenant_id: str, webhook_id: str) -> Webhook | None:
        with self._lock:
            return self._webhooks.get((tenant_id, webhook_id))

    def of_tenant(self, tenant_id: str) -> list[Webhook]:
        with self._lock:
            return self._tenant(tenant_id)

    def remove(self, tenant_id: str, webhook_id: str) -> bool:
        with self._lock:
            return self._webhooks.pop((tenant_id, webhook_id), None) is not None

    def record(self, deliveries: list[Delivery]) -> list[Delivery]:
        with self._lock:
            return [self._deliveries.setdefault((d.webhook_id, d.delivery_id), d) for d in deliveries]

    def delivery(self, webhook_id: str, delivery_id: str) -> Delivery | None:
        with self._lock:
            return self._deliveries.get((webhook_id, delivery_id))

    def recent(self, webhook_id: str, limit: int = RECENT_DELIVERIES) -> list[Delivery]:
        with self._lock:
            found = [d for (hook, _), d in self._deliveries.items() if hook == webhook_id]
        return sorted(found, key=lambda d: (d.created_at, d.delivery_id), reverse=True)[:limit]

    def update(self, delivery: Delivery, read_attempts: int) -> bool:
        key = (delivery.webhook_id, delivery.delivery_id)
        with self._lock:
            held = self._deliveries.get(key)
            if held is None or held.attempts != read_attempts:
                return False
            self._deliveries[key] = delivery
            return True

    def _tenant(self, tenant_id: str) -> list[Webhook]:
        found = [hook for (tenant, _), hook in self._webhooks.items() if tenant == tenant_id]
        return sorted(found, key=lambda hook: (hook.created_at, hook.webhook_id))

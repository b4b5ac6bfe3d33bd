"""The bodies of the webhook routes (/webhooks): an endpoint (never its secret) and its deliveries."""

from __future__ import annotations

from pydantic import Field

from onward.api.contract.common import Answer
from onward.domain.clock import iso
from onward.domain.models import TenantId
from onward.domain.webhooks import Delivery, DeliveryState, Webhook


class WebhookInfo(Answer):
    """A tenant's endpoint as registered; the secret is write-only and never answered."""

    webhook_id: str
    tenant_id: TenantId
    url: str
    events: list[str]
    created_at: str

    @classmethod
    def of(cls, webhook: Webhook) -> WebhookInfo:
        fields = webhook.model_dump(exclude={"secret", "kinds"})
        return cls(**{**fields, "events": list(webhook.kinds), "created_at": iso(webhook.created_at)})


class Webhooks(Answer):
    webhooks: list[WebhookInfo] = Field(description="the tenant's endpoints, oldest first")


class DeliveryInfo(Answer):
    """One event for one endpoint: what was sent, and what came of it."""

    delivery_id: str = Field(description="the Onward-Delivery header's value; the same on every retry")
    webhook_id: str
    job_id: str
    version: int = Field(description="the job's version the event carries: a receiver keeps the newest")
    status: str
    event_id: str
    state: DeliveryState = Field(description="pending (to be sent, or sent again at next_attempt_at), delivered "
                                             "(a 2xx answer), failed (no 2xx before give_up_at, or the endpoint "
                                             "was deleted): POST .../redeliver sends it again")
    attempts: int = Field(description="how many times the delivery moved: each send tried, and each redeliver")
    created_at: str
    next_attempt_at: str | None = Field(description="while pending: not sent before")
    give_up_at: str
    delivered_at: str | None
    last_status_code: int | None
    last_error: str | None

    @classmethod
    def of(cls, delivery: Delivery) -> DeliveryInfo:
        return cls(delivery_id=delivery.delivery_id, webhook_id=delivery.webhook_id, job_id=delivery.job_id,
                   version=delivery.version, status=delivery.status, event_id=delivery.event_id, state=delivery.state,
                   attempts=delivery.attempts, created_at=iso(delivery.created_at),
                   next_attempt_at=(iso(delivery.next_attempt_at) if delivery.state is DeliveryState.PENDING
                                    else None),
                   give_up_at=iso(delivery.give_up_at),
                   delivered_at=iso(delivery.delivered_at) if delivery.delivered_at is not None else None,
                   last_status_code=delivery.last_status_code, last_error=delivery.last_error)


class Deliveries(Answer):
    deliveries: list[DeliveryInfo] = Field(description="the endpoint's recent deliveries, newest first (at most 50, "
                                                       "kept 7 days)")

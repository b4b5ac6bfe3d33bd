"""The webhook store's contract (onward.store.webhooks.WebhookRecorder), ONE suite run against both backends: in
memory (MemoryWebhooks) and on DynamoDB (DynamoWebhooks in the jobs table on the embedded endpoint, marked
integration).

What the matcher, the deliverer and the API rely on: an endpoint is its tenant's only (another tenant reads,
lists and deletes nothing of it), the cap holds, a delivery recorded twice keeps the first record (however far
it got), and an update made from a stale read is refused.
"""

from __future__ import annotations

import pytest

from onward.domain.webhooks import MAX_WEBHOOKS_PER_TENANT, Delivery, DeliveryState, Webhook
from onward.store.dynamo.webhooks import DynamoWebhooks
from onward.store.webhooks import AddOutcome, MemoryWebhooks, WebhookRecorder

JOB = "0123456789abcdef0123456789abcdef"


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def webhooks(request: pytest.FixtureRequest) -> WebhookRecorder:
    if request.param == "memory":
        return MemoryWebhooks()
    return DynamoWebhooks(request.getfixturevalue("dynamodb"), request.getfixturevalue("settings").jobs_table)


def endpoint(webhook_id: str, tenant: str = "acme", created_at: int = 1) -> Webhook:
    return Webhook(webhook_id=webhook_id, tenant_id=tenant, url="https://example.com/h", kinds=("*",),
                   secret="whsec-0123456789abcdef", created_at=created_at)


def delivery(delivery_id: str, webhook_id: str = "wh_a", created_at: int = 10, version: int = 3) -> Delivery:
    return Delivery(delivery_id=delivery_id, webhook_id=webhook_id, tenant_id="acme", job_id=JOB, version=version,
                    status="succeeded", event_id=f"{JOB}:{version}", payload={"job_id": JOB, "version": version},
                    created_at=created_at, next_attempt_at=created_at, give_up_at=created_at + 1000)


def test_an_endpoint_is_its_tenants_only(webhooks: WebhookRecorder) -> None:
    """Catches a read, listing or delete that crosses tenants (an endpoint is keyed by its tenant)."""
    assert webhooks.register(endpoint("wh_a", created_at=2)) is AddOutcome.ADDED
    assert webhooks.register(endpoint("wh_b", created_at=1)) is AddOutcome.ADDED
    assert webhooks.register(endpoint("wh_c", tenant="globex")) is AddOutcome.ADDED
    assert [hook.webhook_id for hook in webhooks.of_tenant("acme")] == ["wh_b", "wh_a"]  # oldest first
    assert webhooks.get("acme", "wh_a") == endpoint("wh_a", created_at=2)
    assert webhooks.get("globex", "wh_a") is None
    assert not webhooks.remove("globex", "wh_a")
    assert webhooks.remove("acme", "wh_a") and not webhooks.remove("acme", "wh_a")
    assert [hook.webhook_id for hook in webhooks.of_tenant("acme")] == ["wh_b"]


def test_a_tenant_keeps_at_most_the_cap(webhooks: WebhookRecorder) -> None:
    """Catches an add past MAX_WEBHOOKS_PER_TENANT, and a full tenant blocking another."""
    for index in range(MAX_WEBHOOKS_PER_TENANT):
        assert webhooks.register(endpoint(f"wh_{index:02d}")) is AddOutcome.ADDED
    assert webhooks.register(endpoint("wh_over")) is AddOutcome.TOO_MANY
    assert webhooks.get("acme", "wh_over") is None
    assert webhooks.register(endpoint("wh_other", tenant="globex")) is AddOutcome.ADDED


def test_recording_a_delivery_again_keeps_the_first_record(webhooks: WebhookRecorder) -> None:
    """Catches a redelivered stream batch resetting a delivery that was sent (it would be sent again) or that
    failed (its failure would vanish)."""
    first = delivery("d1")
    assert webhooks.record([first]) == [first]
    sent = first.model_copy(update={"state": DeliveryState.DELIVERED, "attempts": 1, "delivered_at": 20})
    assert webhooks.update(sent, read_attempts=0)
    again = webhooks.record([delivery("d1", created_at=99), delivery("d2", created_at=50)])
    assert again[0] == sent and again[1].delivery_id == "d2"
    assert webhooks.delivery("wh_a", "d1") == sent


def test_an_update_from_a_stale_read_is_refused(webhooks: WebhookRecorder) -> None:
    """Catches two deliverers holding the same message both moving the delivery (the later would overwrite the
    earlier's outcome)."""
    held = webhooks.record([delivery("d1")])[0]
    assert webhooks.update(held.model_copy(update={"attempts": 1, "last_error": "answered 500"}), read_attempts=0)
    assert not webhooks.update(held.model_copy(update={"attempts": 1, "state": DeliveryState.DELIVERED}),
                               read_attempts=0)
    assert webhooks.delivery("wh_a", "d1").last_error == "answered 500"  # type: ignore[union-attr]
    assert not webhooks.update(delivery("missing"), read_attempts=0)


def test_recent_deliveries_are_the_endpoints_own_newest_first(webhooks: WebhookRecorder) -> None:
    """Catches another endpoint's deliveries in the list, or an order that hides the newest failures."""
    webhooks.record([delivery(f"d{index}", created_at=index) for index in range(5)])
    webhooks.record([delivery("other", webhook_id="wh_b", created_at=100)])
    assert [d.delivery_id for d in webhooks.recent("wh_a", limit=3)] == ["d4", "d3", "d2"]
    assert [d.delivery_id for d in webhooks.recent("wh_b")] == ["other"]

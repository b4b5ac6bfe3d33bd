"""The client's webhook calls against the platform as `onward up` runs it: register an endpoint, receive a
finished job's signed delivery, see it delivered, redeliver it, delete the endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.client import Client, InvalidRequest, NotFound
from onward.testing.webhook_receiver import WebhookReceiver
from onward_infra.platform import LocalPlatform
from tests.integration.client.conftest import TOKENS

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read and write streams

SECRET = "client-hooks-secret-0123456789"


@pytest.fixture
def local_webhooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """As `onward up` allows: endpoints on this machine."""
    monkeypatch.setenv("ONWARD_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.1/32")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver(SECRET) as running:
        yield running


def test_a_registered_endpoint_receives_a_signed_delivery_the_client_can_list_and_redeliver(
        local_webhooks: None, receiver: WebhookReceiver, platform: LocalPlatform) -> None:
    """Catches a client call that builds the wrong route or body (the API refuses it), an answer model that
    drops the delivery's version or state, a webhook listed with its secret, and a redeliver that is not
    sent again (the receiver sees the same delivery id twice only if it was)."""
    with Client(platform.url, TOKENS["acme"]) as onward:
        hook = onward.create_webhook(receiver.url, ["final"], SECRET)
        assert [w.webhook_id for w in onward.webhooks()] == [hook.webhook_id]
        assert "secret" not in onward.webhooks()[0].model_dump()
        job = onward.submit("demo.echo", {"hello": "hooks"})
        final = onward.wait(job.job_id, timeout_s=60)
        first = receiver.wait_for(lambda got: got.body.get("job_id") == job.job_id, timeout_s=60)
        assert first.signature_valid and first.body["version"] == final.version
        (delivery,) = [d for d in onward.deliveries(hook.webhook_id) if d.job_id == job.job_id]
        assert (delivery.state, delivery.version, delivery.delivery_id) == ("delivered", final.version,
                                                                            first.delivery_id)
        again = onward.redeliver(hook.webhook_id, delivery.delivery_id)
        assert again.state == "pending"
        second = receiver.wait_for(lambda got: got.delivery_id == delivery.delivery_id and got.duplicate,
                                   timeout_s=60)
        assert second.signature_valid and second.stale  # the receiver's rule drops it: same version again
        onward.delete_webhook(hook.webhook_id)
        assert onward.webhooks() == []
        with pytest.raises(NotFound):
            onward.delete_webhook(hook.webhook_id)


def test_a_bad_endpoint_is_refused_naming_the_field(local_webhooks: None, platform: LocalPlatform) -> None:
    """Catches a refusal the client does not turn into InvalidRequest with the API's errors."""
    with Client(platform.url, TOKENS["acme"]) as onward:
        with pytest.raises(InvalidRequest) as refused:
            onward.create_webhook("ftp://127.0.0.1/hooks", ["final"], SECRET)
        assert "url" in str(refused.value.problem)
        assert onward.webhooks() == []

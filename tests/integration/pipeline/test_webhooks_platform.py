"""Completion webhooks on the local platform (`onward up`'s components on the embedded endpoint): endpoints
registered over HTTP, the matcher's own poller on the events stream, deliveries queued on the stack's SQS
queue (WebhookDeliveriesQueue), the deliverer's threads signing and POSTing them to receivers on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward import faults
from onward.bootstrap import Deployment
from onward.runtime.demo_jobs import registry
from onward.testing.webhook_receiver import WebhookReceiver
from onward_infra.platform import LocalPlatform, PlatformOptions
from tests.integration.api_support import http_call

pytestmark = pytest.mark.own_stack

TOKENS = {"acme": "acme-hooks-secret", "globex": "globex-hooks-secret"}
SECRET = "whsec-0123456789abcdef"


@pytest.fixture
def platform(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPlatform]:
    monkeypatch.setenv("ONWARD_TOKENS", ",".join(f"{tenant}={secret}" for tenant, secret in TOKENS.items()))
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", "operator-hooks-secret")
    monkeypatch.setenv("ONWARD_JOB_TYPES", ",".join(sorted(registry.types)))
    monkeypatch.setenv("ONWARD_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.1/32")
    monkeypatch.setenv("ONWARD_WEBHOOK_FIRST_RETRY_S", "0.3")
    monkeypatch.setenv("ONWARD_WEBHOOK_MAX_RETRY_S", "0.6")
    monkeypatch.setenv("ONWARD_WEBHOOK_GIVE_UP_S", "4")
    # longer than any test waits: a hanging request stays open (and counted by its receiver) until it is released
    monkeypatch.setenv("ONWARD_WEBHOOK_TIMEOUT_S", "30")
    monkeypatch.setenv("ONWARD_WEBHOOK_SLOTS_PER_ENDPOINT", "2")
    options = PlatformOptions(workers=2, lease_s=3.0, heartbeat_interval_s=0.5, poll_idle_s=0.1, http_port=0,
                              webhook_threads=8)
    with LocalPlatform(Deployment.from_environment(), registry, options) as running:
        yield running


def register(platform: LocalPlatform, tenant: str, url: str, events: list[str] | None = None) -> str:
    answer = http_call(platform.url, "POST", "/webhooks", token=TOKENS[tenant],
                       body={"url": url, "events": events or ["final"], "secret": SECRET})
    assert answer.status == 201, answer.body
    assert "secret" not in answer.body
    return str(answer.body["webhook_id"])


def submit(platform: LocalPlatform, tenant: str, job_type: str = "demo.echo", params: Any = None) -> str:
    answer = http_call(platform.url, "POST", "/jobs", token=TOKENS[tenant],
                       body={"type": job_type, "params": params or {}})
    assert answer.status in (200, 201, 202), answer.body
    return str(answer.body["job_id"])


def test_a_finished_job_is_delivered_signed_with_its_version_and_listed(platform: LocalPlatform) -> None:
    """Catches a delivery that is not made, not signed with the endpoint's secret, or lacks what a receiver needs
    to drop stale or duplicate ones (job id, version, event id); and a delivery the API does not show."""
    with WebhookReceiver(SECRET) as receiver:
        webhook_id = register(platform, "acme", receiver.url, ["succeeded"])
        job_id = submit(platform, "acme")
        got = receiver.wait_for(lambda item: item.body["job_id"] == job_id, timeout_s=60)
        assert got.signature_valid
        assert got.body["status"] == "succeeded" and got.body["version"] >= 3
        assert got.body["event_id"] == f"{job_id}:{got.body['version']}"
        assert got.delivery_id == got.body["delivery_id"]
        listed = http_call(platform.url, "GET", f"/webhooks/{webhook_id}/deliveries", token=TOKENS["acme"])
        assert listed.status == 200
        mine = [d for d in listed.body["deliveries"] if d["job_id"] == job_id]
        deadline = time.monotonic() + 30
        while not (mine and mine[0]["state"] == "delivered") and time.monotonic() < deadline:
            time.sleep(0.2)
            listed = http_call(platform.url, "GET", f"/webhooks/{webhook_id}/deliveries", token=TOKENS["acme"])
            mine = [d for d in listed.body["deliveries"] if d["job_id"] == job_id]
        assert mine[0]["state"] == "delivered" and mine[0]["last_status_code"] == 204
        assert http_call(platform.url, "GET", f"/webhooks/{webhook_id}", token=TOKENS["globex"]).status == 404


def test_a_hanging_endpoint_does_not_delay_another_tenants_deliveries(platform: LocalPlatform) -> None:
    """Catches head-of-line blocking: tenant acme's endpoint hangs on every request while it has many deliveries
    queued; globex's delivery must arrive while acme's requests are still hanging, and acme's endpoint never
    holds more than its slots (2) of the deliverer's threads. Without the per-endpoint slots, acme's deliveries
    would take every thread and globex's would wait for the sender's timeouts."""
    with WebhookReceiver(SECRET) as hanging, WebhookReceiver(SECRET) as healthy:
        hanging.hang.set()
        register(platform, "acme", hanging.url, ["*"])
        register(platform, "globex", healthy.url, ["succeeded"])
        for _ in range(6):
            submit(platform, "acme")
        deadline = time.monotonic() + 30
        while hanging.open_requests < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hanging.open_requests == 2, "acme's endpoint should be holding its two slots"
        job_id = submit(platform, "globex")
        got = healthy.wait_for(lambda item: item.body["job_id"] == job_id, timeout_s=60)
        assert got.signature_valid
        assert hanging.open_requests >= 1, "globex's delivery came only after acme's endpoint stopped hanging"
        assert hanging.most_open <= 2


def test_a_crash_between_record_and_queue_only_delivers_again(platform: LocalPlatform) -> None:
    """Catches a delivery lost to a matcher that dies after recording its batch's deliveries and before queueing
    them: the batch is handed to it again (the poller retries a failed batch), the delivery found recorded
    and queued, and the receiver gets it (at least once; a repeat carries the same delivery id)."""
    def die(point: str) -> None:
        raise RuntimeError(f"the matcher died at {point}")  # the invocation fails: its batch is not acknowledged

    with WebhookReceiver(SECRET) as receiver:
        register(platform, "acme", receiver.url, ["succeeded"])
        with faults.injected("webhooks.after_record", die) as fired:
            job_id = submit(platform, "acme")
            got = receiver.wait_for(lambda item: item.body["job_id"] == job_id, timeout_s=60)
        assert fired == ["webhooks.after_record"]
        assert got.signature_valid


def test_a_failing_endpoint_is_retried_then_failed_and_redelivered_on_request(platform: LocalPlatform) -> None:
    """Catches retries that never end (or never happen) and a redeliver that does not send again: the endpoint
    answers 500 until the give-up time (4 s here) passes, the delivery is failed with its last status, and a
    redeliver once the endpoint is fixed gets it delivered."""
    with WebhookReceiver(SECRET) as receiver:
        receiver.answer_status = 500
        webhook_id = register(platform, "acme", receiver.url, ["succeeded"])
        job_id = submit(platform, "acme")

        def delivery() -> dict[str, Any]:
            listed = http_call(platform.url, "GET", f"/webhooks/{webhook_id}/deliveries", token=TOKENS["acme"])
            found = [d for d in listed.body["deliveries"] if d["job_id"] == job_id]
            return found[0] if found else {"state": "none"}

        deadline = time.monotonic() + 60
        while delivery()["state"] != "failed" and time.monotonic() < deadline:
            time.sleep(0.3)
        failed = delivery()
        assert failed["state"] == "failed" and failed["last_status_code"] == 500
        tries = len([item for item in receiver.received if item.body["job_id"] == job_id])
        assert tries >= 2, "the delivery was not retried"
        receiver.answer_status = 204
        again = http_call(platform.url, "POST",
                          f"/webhooks/{webhook_id}/deliveries/{failed['delivery_id']}/redeliver", token=TOKENS["acme"])
        assert again.status == 202 and again.body["state"] == "pending"
        deadline = time.monotonic() + 30
        while delivery()["state"] != "delivered" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert delivery()["state"] == "delivered"

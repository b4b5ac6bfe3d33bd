"""The status page's Webhooks view in Chromium (#/webhooks, onward/web/webhooks.js) on the whole platform: a
tenant's failed delivery is listed with its last error and a Redeliver button, which queues it again until it
is delivered.

What breaks without which code: the view's route in onward/web/app.js (no #/webhooks), the redeliver action
(the failed delivery stays failed), `reconcile` in the view (a poll would rebuild the row under the button)."""

from __future__ import annotations

import time

import pytest

from onward.testing.webhook_receiver import WebhookReceiver
from tests.e2e.page_support import TOKENS, screenshot, sign_in
from tests.integration.api_support import http_call

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

SECRET = "whsec-0123456789abcdef"


@pytest.fixture(autouse=True)
def quick_webhooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the platform is built: receivers on 127.0.0.1 allowed, retries given up after 2 s."""
    monkeypatch.setenv("ONWARD_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.1/32")
    monkeypatch.setenv("ONWARD_WEBHOOK_FIRST_RETRY_S", "0.3")
    monkeypatch.setenv("ONWARD_WEBHOOK_MAX_RETRY_S", "0.5")
    monkeypatch.setenv("ONWARD_WEBHOOK_GIVE_UP_S", "2")


def test_a_failed_delivery_is_shown_and_redelivered_from_the_page(page, platform) -> None:
    from playwright.sync_api import expect

    with WebhookReceiver(SECRET) as receiver:
        receiver.answer_status = 500
        made = http_call(platform.url, "POST", "/webhooks", token=TOKENS["acme"],
                         body={"url": receiver.url, "events": ["succeeded"], "secret": SECRET})
        assert made.status == 201
        job = http_call(platform.url, "POST", "/jobs", token=TOKENS["acme"], body={"type": "demo.echo", "params": {}})
        job_id = job.body["job_id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = http_call(platform.url, "GET", f"/webhooks/{made.body['webhook_id']}/deliveries",
                               token=TOKENS["acme"]).body["deliveries"]
            if listed and listed[0]["state"] == "failed":
                break
            time.sleep(0.3)
        sign_in(page, "acme")
        page.goto(platform.url + "/#/webhooks")
        row = page.locator("#webhooks tbody tr", has_text=job_id[:12])
        expect(row).to_contain_text("failed", timeout=20_000)
        expect(row).to_contain_text("answered 500")
        screenshot(page, "webhooks-failed-delivery")
        receiver.answer_status = 204
        row.get_by_role("button", name=f"Redeliver the succeeded event of job {job_id}").click()
        expect(page.locator("#webhooks-status")).to_contain_text("queued again")
        expect(row).to_contain_text("delivered", timeout=30_000)
        assert any(item.body["job_id"] == job_id and item.signature_valid for item in receiver.received)

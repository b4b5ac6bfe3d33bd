"""The status page's paused banner and a paused job's reason in Chromium (onward/web/pauses.js, job.js) on the whole
platform: a tenant that paused its jobs sees it above every view, its waiting job says why it waits, an operator
sees the drain switch.

What breaks without which code: the banner's poll in onward/web/app.js (nothing shown), the `paused` case of
job.js's reasonText (the job would read "It has just ended"), explain's `paused` reason (the job would read as
waiting for its share)."""

from __future__ import annotations

import time

import pytest

from onward.store.pauses import FLOW_CACHE_MS
from tests.e2e.page_support import OPERATOR, TOKENS, screenshot, sign_in
from tests.integration.api_support import http_call

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]


def test_a_paused_tenant_sees_the_banner_and_its_jobs_reason(page, platform) -> None:
    from playwright.sync_api import expect

    assert http_call(platform.url, "POST", "/pause", token=TOKENS["acme"], body={}).status == 200
    time.sleep(FLOW_CACHE_MS / 1000 + 0.5)  # every worker process has seen it (the documented propagation)
    job = http_call(platform.url, "POST", "/jobs", token=TOKENS["acme"], body={"type": "demo.echo", "params": {}})
    job_id = job.body["job_id"]
    page.goto(f"{platform.url}/#/jobs/{job_id}")
    sign_in(page, "acme")
    expect(page.locator("#pause-notice")).to_contain_text("Paused: tenant acme", timeout=20_000)
    expect(page.locator("#job-waiting")).to_have_attribute("data-reason", "paused", timeout=20_000)
    expect(page.locator("#job-waiting-reason")).to_contain_text("Paused: tenant acme is paused", timeout=20_000)
    screenshot(page, "paused-job")
    assert http_call(platform.url, "POST", "/resume", token=TOKENS["acme"], body={}).status == 200
    expect(page.locator("#pause-notice")).to_be_hidden(timeout=20_000)


def test_an_operator_sees_the_drain_switch(page, platform) -> None:
    from playwright.sync_api import expect

    assert http_call(platform.url, "POST", "/ops/drain", token=OPERATOR, body={"on": True}).status == 200
    sign_in(page, "operator")
    expect(page.locator("#pause-notice")).to_contain_text("drained for maintenance", timeout=20_000)
    assert http_call(platform.url, "POST", "/ops/drain", token=OPERATOR, body={"on": False}).status == 200
    expect(page.locator("#pause-notice")).to_be_hidden(timeout=20_000)

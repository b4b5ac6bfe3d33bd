"""A rate-limited job's page in Chromium (issue 37): a job waiting for the token it reserved says it is rate
limited until that moment (GET /jobs/{id}/explain's `rate_limited`), in the viewer's zone.

Without the `rate_limited` case in onward/web/job.js the page shows the reason with no text of its own; without
WaitReason.RATE_LIMITED in onward/operator/explain.py the job is explained as `scheduled` (its due time is in the
future) as though its tenant had asked for that moment."""

from __future__ import annotations

import re
import time

import pytest

from onward.domain.models import NewJob
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def test_a_rate_limited_jobs_page_says_until_when(browser, platform) -> None:
    from playwright.sync_api import expect

    platform.store.rate_limits.put("acme", "slow-api", 1, 3600.0)
    ids = [platform.store.create("acme", NewJob(type="demo.echo", rate_limit_key="slow-api")).job.job_id
           for _ in range(2)]
    deadline = time.monotonic() + 30
    while not any(platform.store.get(job_id).rate_reserved_at for job_id in ids):
        assert time.monotonic() < deadline, "no job reserved its token"
        time.sleep(0.2)
    waiting_id = next(job_id for job_id in ids if platform.store.get(job_id).rate_reserved_at)
    page = browser.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{platform.url}/#/jobs/{waiting_id}")
    sign_in(page)
    expect(page.locator("#job-state")).to_have_text(re.compile(r"^queued\b"), timeout=20_000)
    waiting = page.locator("#job-waiting")
    expect(waiting).to_have_attribute("data-reason", "rate_limited")
    expect(page.locator("#job-waiting-reason")).to_contain_text("Rate limited until")
    expect(page.locator("#job-waiting-reason time")).to_have_attribute("title", re.compile(r" UTC$"))
    screenshot(page, "job-rate-limited")
    page.close()

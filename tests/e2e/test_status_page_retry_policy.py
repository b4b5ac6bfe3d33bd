"""A job's page shows the retry policy in force and a snoozed attempt (issue 37; onward/web/policy.js,
job.js), in Chromium on the whole local platform, whose workers declare the demo types' policies.

What breaks without which code: renderPolicy (no "Retry policy" row, or the platform's defaults shown for a
type its workers declared); the `snoozed` reason in job.js (a snoozed job's wait said as "it has just ended")."""

from __future__ import annotations

import pytest

from onward.domain.models import NewJob
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def test_a_jobs_page_shows_its_types_policy_and_why_a_snoozed_job_waits(page, platform) -> None:
    from playwright.sync_api import expect

    store = platform.store
    snoozing = store.create("acme", NewJob(type="demo.snooze", params={"seconds": 600})).job.job_id
    plain = store.create("acme", NewJob(type="demo.echo")).job.job_id
    sign_in(page)

    page.goto(platform.url + f"/#/jobs/{snoozing}")
    policy = page.locator("#job-policy")
    expect(policy).to_contain_text("2 attempts at most", timeout=30_000)
    expect(policy).to_contain_text("at most 10 snoozes")
    expect(policy).to_contain_text("declared by")
    expect(page.locator("#job-waiting-reason")).to_contain_text("Snoozed by its handler", timeout=30_000)
    expect(page.locator("#attempts li.outcome-snoozed").first).to_be_visible()
    screenshot(page, "job-snoozed")

    page.goto(platform.url + f"/#/jobs/{plain}")
    expect(page.locator("#job-policy")).to_contain_text("3 attempts at most", timeout=30_000)

"""A waiting job's page in Chromium: when it was asked to start, and why it waits (GET /jobs/{id}/explain),
in the viewer's zone; the explanation goes once the job no longer waits.

What breaks without which code: onward/web/job.js `pollExplanation` / `renderExplanation` (a queued job's page says
nothing of why it does not run: test_a_delayed_jobs_page_says_it_is_scheduled_...), the contract's
`x-waiting` statuses read by onward/web/core.js (the explanation would be asked for, or shown, on a cancelled job).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from onward.domain.clock import system_clock
from onward.domain.models import NewJob
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams

KOLKATA = timedelta(hours=5, minutes=30)  # Asia/Kolkata: no daylight saving, so the offset is fixed


def test_a_delayed_jobs_page_says_it_is_scheduled_and_stops_once_cancelled(browser, platform) -> None:
    """Catches a delayed job shown as an unexplained "queued", its run at missing from what it was created with,
    and the explanation left on the page after the job stopped waiting."""
    from playwright.sync_api import expect

    run_at = datetime.fromtimestamp(system_clock() // 1000 + 7200, UTC)
    job_id = platform.store.create("acme", NewJob(type="demo.echo", run_at=run_at)).job.job_id
    local = (run_at + KOLKATA).strftime("%Y-%m-%d %H:%M:%S")
    context = browser.new_context(timezone_id="Asia/Kolkata", viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{platform.url}/#/jobs/{job_id}")
    sign_in(page)
    expect(page.locator("#job-state")).to_have_text(re.compile(r"^queued\b"), timeout=20_000)
    waiting = page.locator("#job-waiting")
    expect(waiting).to_be_visible()
    expect(waiting).to_have_attribute("data-reason", "scheduled")
    expect(page.locator("#job-waiting-reason")).to_contain_text("Scheduled: it starts no earlier than")
    shown = page.locator("#job-waiting-reason time")
    expect(shown).to_have_text(local)  # in the viewer's zone
    expect(shown).to_have_attribute("title", re.compile(r" UTC$"))  # the UTC value on hover
    expect(page.locator("#job-run-at time")).to_have_text(local)
    expect(page.locator("#job-waiting-basis")).to_contain_text("from the job table")
    screenshot(page, "job-scheduled-why-it-waits")

    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-state")).to_have_text(re.compile(r"^cancelled\b"), timeout=20_000)
    expect(waiting).to_be_hidden()
    context.close()

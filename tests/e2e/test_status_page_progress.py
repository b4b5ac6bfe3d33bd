"""A running attempt's progress on the status page (issue 38), in Chromium against the whole platform (what
`onward up` runs): the job's facts show a bar and the handler's message while `demo.progress` runs, the bar
goes once the job succeeded, and the attempt keeps its last progress in the attempts list.

What breaks without which code: onward/web/progress.js `renderProgress` (no Progress row: the bar and message
never appear), the hiding of that row when the status carries no progress (a finished job would keep showing
a half-full bar), and `runProgress` in the attempt items (no "Last progress" line on the attempt).
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.page_support import screenshot, sign_in, submit, submitted_job_id

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def test_a_running_job_shows_its_progress_and_the_finished_one_shows_none(page, platform) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    submit(page, "demo.progress", '{"steps": 10, "step_s": 0.8}')
    job_id = submitted_job_id(page)
    page.goto(f"{platform.url}/#/jobs/{job_id}")

    expect(page.locator("#job-state")).to_have_text(re.compile(r"^running"), timeout=20_000)
    expect(page.locator("#job-progress")).to_be_visible(timeout=20_000)
    expect(page.locator("#job-progress-text")).to_have_text(re.compile(r"^\d+% · (starting 10 steps|step \d+ of 10)$"))
    expect(page.locator("#job-progress")).to_contain_text("attempt 1, reported")
    first = float(page.locator("#job-progress-bar").get_attribute("value"))
    expect(page.locator("#job-progress-text")).not_to_have_text(
        re.compile(rf"^{round(first * 100)}% "), timeout=20_000)  # it moves on, poll after poll
    assert float(page.locator("#job-progress-bar").get_attribute("value")) > first
    expect(page.locator("#attempts li").first.locator(".attempt-progress")).to_contain_text(
        re.compile(r"^Progress \d+%"))
    screenshot(page, "job-progress-running")

    expect(page.locator("#job-state")).to_have_text(re.compile(r"^succeeded"), timeout=30_000)
    expect(page.locator("#job-progress")).to_be_hidden()
    expect(page.locator("#job-progress-label")).to_be_hidden()
    expect(page.locator("#attempts li").first.locator(".attempt-progress")).to_contain_text(
        re.compile(r"^Last progress \d+%"))

"""A job held on its concurrency key, on its page in Chromium (issue 37): while another job of its key runs, it
reads "Concurrency limited: 1 of 1 running for concurrency key ..." (GET /jobs/{id}/explain's
`concurrency_limited`), and its status stays queued.

Without the `concurrency_limited` case in onward/web/job.js the page shows the reason with no text of its own
("It has just ended"); without WaitReason.CONCURRENCY_LIMITED in onward/operator/explain.py the job is explained as
waiting for its tenant's share, with an ETA it will not meet."""

from __future__ import annotations

import re
import time

import pytest

from onward.domain.concurrency import ConcurrencyRule
from onward.domain.models import NewJob
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def test_a_job_held_on_its_key_says_so_on_its_page(browser, platform) -> None:
    from playwright.sync_api import expect

    keyed = NewJob(type="demo.sleep", params={"seconds": 60}, concurrency=ConcurrencyRule(key="customer-42", limit=1))
    ids = [platform.store.create("acme", keyed).job.job_id for _ in range(2)]
    deadline = time.monotonic() + 30
    while not any(platform.store.row(job_id).held_by for job_id in ids):
        assert time.monotonic() < deadline, "no job was held on its key"
        time.sleep(0.2)
    held_id = next(job_id for job_id in ids if platform.store.row(job_id).held_by)
    page = browser.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{platform.url}/#/jobs/{held_id}")
    sign_in(page)
    expect(page.locator("#job-state")).to_have_text(re.compile(r"^queued\b"), timeout=20_000)
    expect(page.locator("#job-waiting")).to_have_attribute("data-reason", "concurrency_limited")
    expect(page.locator("#job-waiting-reason")).to_contain_text(
        "Concurrency limited: 1 of 1 running for concurrency key 'customer-42'")
    screenshot(page, "job-concurrency-limited")
    page.close()
    for job_id in ids:
        platform.store.cancel(job_id)

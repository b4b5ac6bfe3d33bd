"""An archived job's page in Chromium: a link to a job whose rows have expired still opens (issue 36), from the
run-history archive, with an "archived" badge, its final status, its attempts on the timeline, and neither
cancel nor replay (an operator's page included: the archive is read-only).

What breaks without which code: without GET /jobs/{id}'s archive fallback (onward/api/routes/jobs.py) the page
shows a 404 problem; without job.js `renderArchived` the badge stays hidden and an operator is offered a replay
of a dead job the job table no longer holds (a 404 on click); without timeline.js leaving out the lease an
archived attempt has none of, the attempt reads "lease until Invalid Date"."""

from __future__ import annotations

from pathlib import Path

import pytest

from onward.pipeline.archive.parquet import ParquetDirectory
from tests.e2e.page_support import screenshot, sign_in
from tests.unit.operator.archive_samples import job_id, record

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

ARCHIVED = job_id(0xA2C)


@pytest.mark.parametrize("platform", [{"workers": 0}], indirect=True)
def test_an_archived_jobs_link_opens_with_its_runs_and_no_actions(browser, platform, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect

    ParquetDirectory(tmp_path).write([record(ARCHIVED, tenant="acme", state="dead", attempts=2)])
    monkeypatch.setenv("ONWARD_ARCHIVE_DIR", str(tmp_path))  # the API reads its environment per request
    for who in ("acme", "operator"):
        page = browser.new_context().new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{platform.url}/#/jobs/{ARCHIVED}")
        sign_in(page, who)
        expect(page.locator("#job-state")).to_have_text("dead · final")
        expect(page.locator("#job-archived")).to_be_visible()
        expect(page.locator("#job-freshness")).to_contain_text("From the run-history archive")
        expect(page.locator("#job-kind")).to_have_text("demo.echo")
        expect(page.locator("#job-params")).to_contain_text("{}")
        expect(page.locator("#runs-source")).to_contain_text("run-history archive")
        expect(page.locator("#attempts li")).to_have_count(2)
        expect(page.locator("#attempts li").first).to_contain_text("Boom")
        expect(page.locator("#attempts")).not_to_contain_text("lease until")
        expect(page.get_by_role("button", name="Replay job")).to_be_hidden()
        expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()
        screenshot(page, f"job-archived-{who}")
        asked: list[str] = []
        page.on("request", lambda request, asked=asked: asked.append(request.url))
        page.wait_for_timeout(2500)  # more than a poll's interval (2 s)
        assert not [url for url in asked if f"/jobs/{ARCHIVED}" in url], asked  # read once, not every poll
        page.context.close()

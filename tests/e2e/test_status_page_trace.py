"""A job's page shows its trace id (onward/web/job.js renderTrace), in Chromium on the whole local platform: a
link into the tracing UI when the deployment names one (ONWARD_TRACE_URL, answered as `trace_url`), the id as
text without, "none" for a job without a trace.

What breaks without which code: renderTrace (no trace on the page at all); trace_url in JobStatus.of_view (text
only, never a link); the template's {trace_id} substitution (a link to the wrong trace)."""

from __future__ import annotations

import pytest

from onward.domain.models import NewJob
from onward.observability.trace_links import TRACE_URL_VARIABLE
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
UI = "https://traces.example.com/trace/{trace_id}?from=onward"


@pytest.fixture(autouse=True)
def trace_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set before the platform's deployment is built (autouse fixtures come first)."""
    monkeypatch.setenv(TRACE_URL_VARIABLE, UI)


def test_a_jobs_page_links_its_trace_and_shows_none_without_one(page, platform,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect

    traced = platform.store.create("acme", NewJob(type="demo.echo").model_copy(
        update={"trace_parent": f"00-{TRACE}-00f067aa0ba902b7-01"})).job.job_id
    plain = platform.store.create("acme", NewJob(type="demo.echo")).job.job_id
    sign_in(page)
    page.goto(platform.url + f"/#/jobs/{traced}")
    trace = page.locator("#job-trace")
    link = trace.get_by_role("link", name=TRACE)
    expect(link).to_be_visible(timeout=30_000)
    assert link.get_attribute("href") == UI.replace("{trace_id}", TRACE)
    assert link.get_attribute("rel") == "noopener noreferrer"
    screenshot(page, "job-trace-link")

    page.goto(platform.url + f"/#/jobs/{plain}")
    expect(page.locator("#job-state")).to_contain_text("succeeded", timeout=30_000)
    expect(trace).to_have_text("none")

    # without a tracing UI the API answers no trace_url (its deployment is read from the environment per
    # request): the id is shown as text, not a link
    monkeypatch.delenv(TRACE_URL_VARIABLE)
    page.goto(platform.url + f"/#/jobs/{traced}")
    expect(trace).to_have_text(TRACE, timeout=30_000)
    expect(trace.get_by_role("link")).to_have_count(0)

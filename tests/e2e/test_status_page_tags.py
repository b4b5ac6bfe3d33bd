"""The status page filters by tag and shows a job's tags (onward/web/list.js, job.js, tags.js), in Chromium on the
whole local platform: the tag filter lives in the URL like the others, narrows the list and the counts, pages
with the API's cursors, and each tag shown on a row or a job's page links to the jobs carrying it.

What breaks without which code: the `tag` in filterOf / hashOf (a reload or a shared link loses the filter);
the tag passed to both GET /jobs and GET /jobs/counts (the list narrows but the counts are the tenant's);
tagLinks (a row's tags are not shown, or lead nowhere); the check of the filter's form before the API is asked
(a bad filter shows the API's 400 instead of saying what a tag looks like)."""

from __future__ import annotations

import re

import pytest

from onward.domain.models import NewJob
from tests.e2e.page_support import screenshot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def _shown(rows) -> list[str]:
    return sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)"))


def test_the_list_filters_by_tag_in_the_url_with_counts_paging_and_tag_links(page, platform) -> None:
    from playwright.sync_api import expect

    store = platform.store
    prod = [store.create("acme", NewJob(type="demo.echo", tags={"env": "prod", "team": "red"})).job.job_id
            for _ in range(22)]
    staging = [store.create("acme", NewJob(type="demo.echo", tags={"env": "staging"})).job.job_id for _ in range(2)]
    plain = store.create("acme", NewJob(type="demo.echo")).job.job_id
    theirs = store.create("globex", NewJob(type="demo.echo", tags={"env": "prod"})).job.job_id
    sign_in(page)
    counts = page.locator("#counts")
    expect(counts.get_by_role("link", name="25 succeeded")).to_be_visible(timeout=30_000)

    page.locator("#filter-tag").fill("env:staging")
    page.locator("#filter-tag").press("Enter")
    expect(page).to_have_url(re.compile(r"#/jobs\?tag=env%3Astaging$"))
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(2)
    assert _shown(rows) == sorted(staging)
    expect(counts.get_by_role("link", name="2 succeeded")).to_be_visible()
    expect(page.locator("#counts-caption")).to_contain_text("tagged env:staging")
    page.reload()  # the filter is the URL's
    expect(rows).to_have_count(2)
    expect(page.locator("#filter-tag")).to_have_value("env:staging")

    # a row's tag links to the jobs carrying it: 22, a page of 20 and one of 2, never another tenant's
    page.goto(platform.url + "/#/jobs")
    expect(rows).to_have_count(20, timeout=30_000)
    rows.locator(".tag", has_text="team:red").first.click()
    expect(page).to_have_url(re.compile(r"#/jobs\?tag=team%3Ared$"))
    expect(counts.get_by_role("link", name="22 succeeded")).to_be_visible()
    expect(rows).to_have_count(20)
    first_page = _shown(rows)
    page.get_by_role("button", name="Older").click()
    expect(page).to_have_url(re.compile(r"tag=team%3Ared&cursor="))
    expect(rows).to_have_count(2)
    assert sorted(first_page + _shown(rows)) == sorted(prod) and theirs not in first_page and plain not in first_page
    screenshot(page, "list-by-tag")

    # a filter that is not key:value is said on the form; the list stays as it was
    page.locator("#filter-tag").fill("env")
    page.locator("#filter-tag").press("Enter")
    said = page.locator("#filter-tag").evaluate("input => input.validationMessage")
    assert said == "A tag is key:value, e.g. env:prod"
    expect(page).to_have_url(re.compile(r"tag=team%3Ared&cursor="))
    expect(page.locator("#list-problem")).to_be_hidden()

    # a job's page shows its tags, each a link to the jobs carrying it
    page.goto(platform.url + f"/#/jobs/{staging[0]}")
    tags = page.locator("#job-tags")
    expect(tags.locator(".tag")).to_have_text(["env:staging"])
    tags.get_by_role("link", name="env:staging").click()
    expect(page).to_have_url(re.compile(r"#/jobs\?tag=env%3Astaging$"))
    expect(rows).to_have_count(2)
    page.goto(platform.url + f"/#/jobs/{plain}")
    expect(page.locator("#job-tags")).to_have_text("none")

"""The status page's views in Chromium (Playwright, Debian's browser): a job's own page with its attempt
timeline, the list people work with (filters in the URL, counts, paging, search), the operator's view with
bulk replay, and what makes the page usable (keyboard, labels, 360 px, no layout jumps while polling, times
in the viewer's zone, the API's problem details). Screenshots land in build/screenshots/.

What breaks without which code:
- the page's router (onward/web/app.js) and the job view (onward/web/job.js): a job has no URL to share
  (test_a_failed_then_succeeded_job_...: opened from a fresh tab by its URL);
- onward/web/timeline.js `analyse`: a zombie's late report would not be marked, nor its overlap with the attempt
  that replaced it (test_a_fenced_zombie_...);
- onward/web/core.js `reconcile` (rows kept and updated in place): each poll rebuilt the table, which moved the focus
  off a row's link and shifted the page (test_polling_moves_nothing_and_keeps_the_focus);
- the filters read from and written to the URL (onward/web/list.js `filterOf` / `hashOf`): a reload or a shared link
  loses them (test_the_list_filters_live_in_the_url_...).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import iso, system_clock
from onward.domain.dispatch import TenantPolicy
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.states import JobState
from onward.store.service import Tenant
from tests.e2e.page_support import (
    OPERATOR,
    screenshot,
    sign_in,
    submit,
    submitted_job_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams

KOLKATA = timedelta(hours=5, minutes=30)  # Asia/Kolkata: no daylight saving, so the offset is fixed


def expect_view(page, job_id: str, status: str, timeout: int = 20_000) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#job-state")).to_have_text(re.compile(rf"^{status}\b"), timeout=timeout)
    expect(page.locator("#job-title-id")).to_have_text(job_id)


def test_a_failed_then_succeeded_job_has_its_own_page_with_the_attempt_timeline(browser, platform) -> None:
    """Keyboard only, in the viewer's zone (Asia/Kolkata here): from the list to the job's page and back; the
    job's URL opens it in a fresh tab (after a token); the timeline shows the failed attempt with its error,
    then the one that succeeded."""
    from playwright.sync_api import expect

    context = browser.new_context(timezone_id="Asia/Kolkata", viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(platform.url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the content"
    sign_in(page)
    submit(page, "demo.flaky", '{"failures": 1}')
    job_id = submitted_job_id(page)
    row = page.locator(f'tr[data-job-id="{job_id}"]')
    expect(row.locator(".status")).to_have_text("succeeded", timeout=20_000)

    page.keyboard.press("/")  # the shortcut to the search box
    expect(page.locator("#filter-id")).to_be_focused()
    for _ in range(40):  # on by Tab to the job's link
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Job {job_id}":
            break
    else:
        pytest.fail("Tab never reached the job's link")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focus is visible
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"#/jobs/{job_id}$"))
    expect(page.locator("#job-heading")).to_be_focused()
    expect_view(page, job_id, "succeeded")

    items = page.locator("#attempts li")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Attempt 1 · failed")
    expect(items.nth(0).locator(".attempt-error")).to_have_text(
        "ConnectionError: simulated transient failure on attempt 1")
    expect(items.nth(1)).to_contain_text("Attempt 2 · succeeded")
    assert page.locator("#timeline-chart rect.bar.outcome-failed").count() == 1
    assert page.locator("#timeline-chart rect.bar.outcome-succeeded").count() == 1
    expect(page.locator("#timeline-summary")).to_have_text("2 attempts: #1 failed (ConnectionError), #2 succeeded.")
    expect(page.locator("#job-params pre")).to_contain_text('"failures": 1')
    expect(page.locator("#job-result pre")).to_contain_text('"succeeded_on_attempt": 2')
    expect(page.locator("#job-freshness")).to_contain_text("Confirmed current up to")
    expect(page.locator("#job-cancel")).to_be_hidden()  # final: nothing to cancel

    # every time in the viewer's zone, its UTC value on hover
    claimed = items.nth(0).locator("time").first
    utc = datetime.strptime(claimed.get_attribute("datetime"), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert claimed.inner_text() == (utc + KOLKATA).strftime("%Y-%m-%d %H:%M:%S")
    assert claimed.get_attribute("title") == utc.strftime("%Y-%m-%d %H:%M:%S.") + f"{utc.microsecond // 1000:03d} UTC"
    screenshot(page, "job-failed-then-succeeded")

    page.keyboard.press("Shift+Tab")  # the link back, just before the heading
    expect(page.locator("#back-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_be_visible()
    expect(page.locator("#jobs-heading")).to_be_focused()

    shared = browser.new_context()  # the URL alone, in a tab with no token yet
    other = shared.new_page()
    other.goto(f"{platform.url}/#/jobs/{job_id}")
    expect(other.locator("#view-job")).to_be_visible()
    sign_in(other)
    expect_view(other, job_id, "succeeded")
    expect(other.locator("#attempts li")).to_have_count(2)
    shared.close()
    context.close()


@pytest.mark.parametrize("platform", [{"workers": 0}], indirect=True)
def test_a_fenced_zombie_and_overlapping_attempts_are_marked(page, platform) -> None:
    """Attempt 1's lease lapses and the reaper closes it; attempt 2 claims the job; then attempt 1's worker, a
    zombie, reports success: fenced (it changes nothing) and marked on its run. It was still working while
    attempt 2 held the job: the two overlap."""
    from playwright.sync_api import expect

    store = platform.store
    job_id = store.create("acme", NewJob(type="demo.echo", params={"zombie": True})).job.job_id
    first = store.claim("worker-a", 0.2)
    assert first is not None and first.job_id == job_id
    time.sleep(0.4)
    store.reap()
    second = store.claim("worker-b", 30)
    assert second is not None and second.attempt == 2
    time.sleep(0.3)
    assert store.complete(first, {"from": "zombie"}).status.value == "fenced"
    store.complete(second, {"from": "worker-b"})

    page.goto(f"{page.url.split('#')[0]}#/jobs/{job_id}")
    sign_in(page)
    expect_view(page, job_id, "succeeded")
    items = page.locator("#attempts li")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Attempt 1 · fenced · worker worker-a")
    expect(items.nth(0).locator(".fenced")).to_contain_text("Fenced zombie: it reported succeeded at")
    expect(items.nth(0).locator(".fenced")).to_contain_text("after its run was closed (lease expired)")
    expect(items.nth(0).locator(".overlapping")).to_have_text(re.compile(r"^Overlapped attempt 2:"))
    expect(items.nth(1).locator(".overlapping")).to_have_text(re.compile(r"^Overlapped attempt 1:"))
    expect(items.nth(1)).to_contain_text("Attempt 2 · succeeded · worker worker-b")
    assert page.locator("#timeline-chart .late-report").count() == 1
    assert page.locator("#timeline-chart rect.overlap").count() == 1
    expect(page.locator("#timeline-summary")).to_have_text(
        "2 attempts: #1 fenced (LeaseExpired), #2 succeeded. 1 fenced. 2 overlapping.")
    expect(page.locator("#job-result pre")).to_contain_text('"from": "worker-b"')  # not the zombie's
    screenshot(page, "job-fenced-zombie-overlap")


def test_cancel_and_an_operators_replay_show_their_answers(browser, page, platform) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    submit(page, "demo.sleep", '{"seconds": 30}')
    sleeper = submitted_job_id(page)
    submit(page, "demo.fail", '{"permanent": true}')
    doomed = submitted_job_id(page)
    page.goto(f"{platform.url}/#/jobs/{sleeper}")
    expect_view(page, sleeper, "running")
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-action-status")).to_have_text(
        re.compile(r"^Cancel: requested; the worker stops at its next lease renewal \(version \d+\)\.$"))
    expect_view(page, sleeper, "cancelled")
    expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()

    page.goto(f"{platform.url}/#/jobs/{doomed}")
    expect_view(page, doomed, "dead")
    expect(page.locator("#job-result")).to_contain_text("PermanentError: simulated permanent failure")
    expect(page.get_by_role("button", name="Replay job")).to_be_hidden()  # a tenant does not replay

    operator = browser.new_context().new_page()
    operator.goto(f"{platform.url}/#/jobs/{doomed}")
    sign_in(operator, "operator")
    expect_view(operator, doomed, "dead")
    version = int(re.match(r"(\d+) ", operator.locator("#job-version").inner_text()).group(1))
    operator.get_by_role("button", name="Replay job").click()
    expect(operator.locator("#job-action-status")).to_have_text(f"Replay: queued again as version {version + 1}.")
    # it runs again, fails for good again: a second failed attempt on its timeline
    expect(operator.locator("#attempts li")).to_have_count(2, timeout=20_000)
    expect_view(operator, doomed, "dead")
    screenshot(operator, "job-replayed-by-operator")

    # a replay the job no longer allows: its refusal is shown (no worker runs it, the view still says dead)
    platform.workers.stop()
    platform.projector.stop()
    platform.store.replay(doomed)
    operator.get_by_role("button", name="Replay job").click()
    expect(operator.locator("#job-action-status")).to_have_text(
        f"Replay refused: Not replayable (HTTP 409): job {doomed} is queued; only dead or quarantined jobs replay")
    operator.context.close()


def test_the_list_filters_live_in_the_url_with_counts_paging_and_search(page, platform) -> None:
    from playwright.sync_api import expect

    store = platform.store
    echoes = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(22)]
    dead = [store.create("acme", NewJob(type="demo.fail", params={"permanent": True})).job.job_id for _ in range(2)]
    theirs = store.create("globex", NewJob(type="demo.fail", params={"permanent": True})).job.job_id
    sign_in(page)
    counts = page.locator("#counts")
    expect(counts.get_by_role("link", name="22 succeeded")).to_be_visible(timeout=30_000)
    expect(counts.get_by_role("link", name="2 dead")).to_be_visible(timeout=30_000)

    counts.get_by_role("link", name="2 dead").click()
    expect(page).to_have_url(re.compile(r"#/jobs\?status=dead$"))
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(2)
    assert sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)")) == sorted(dead)
    assert page.get_by_role("checkbox", name="dead").is_checked()
    page.reload()  # the filter is the URL's
    expect(rows).to_have_count(2)
    assert page.get_by_role("checkbox", name="dead").is_checked()

    page.get_by_role("checkbox", name="succeeded").focus()
    page.keyboard.press("Space")
    expect(page).to_have_url(re.compile(r"#/jobs\?status=(dead,succeeded|succeeded,dead)$"))
    page.get_by_label("Job type").select_option("demo.fail")
    expect(page).to_have_url(re.compile(r"status=.*&type=demo\.fail$"))
    expect(rows).to_have_count(2)
    screenshot(page, "list-filtered")

    page.get_by_role("link", name="Clear filters").click()
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    expect(rows).to_have_count(20)  # a page
    expect(page.locator("#list-status")).to_have_text("Showing 20 jobs, most recent first.")
    first_page = rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)")
    page.get_by_role("button", name="Older").click()
    expect(page).to_have_url(re.compile(r"#/jobs\?cursor="))
    expect(rows).to_have_count(4)
    second_page = rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)")
    assert sorted(first_page + second_page) == sorted(echoes + dead) and theirs not in first_page + second_page
    expect(page.get_by_role("button", name="Older")).to_be_disabled()
    page.get_by_role("button", name="Newer").click()
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    expect(rows).to_have_count(20)

    prefix = echoes[5][:5]
    page.get_by_label("Job id or its beginning").fill(prefix)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"#/jobs\?id={prefix}$"))
    expect(page.locator(f'tr[data-job-id="{echoes[5]}"]')).to_be_visible()
    assert all(job_id.startswith(prefix) for job_id in rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)"))
    page.get_by_label("Job id or its beginning").fill(theirs)  # another tenant's: a whole id opens its page...
    page.keyboard.press("Enter")
    expect(page.locator("#job-problem")).to_contain_text(f"Not found (HTTP 404, reading the job): no job '{theirs}'")
    page.goto(f"{platform.url}/#/jobs?id={theirs[:6]}")  # ...and no filter finds it
    expect(page.locator("#list-status")).to_have_text("No jobs match these filters.")


def test_the_operator_view_shows_the_platform_and_replays_in_bulk(page, platform) -> None:
    from playwright.sync_api import expect

    store = platform.store
    store.register_tenant(Tenant("acme", TenantPolicy(weight=2.0, cap=4)))
    failing = NewJob(type="demo.fail", params={"permanent": True})
    dead = [store.create(tenant, failing).job.job_id for tenant in ("acme", "acme", "globex")]
    for n in range(3):
        store.create("globex", NewJob(type="demo.echo", params={"n": n}))
    deployment = Deployment.from_environment()
    deployment.parked_records.park("projector", "shardId-000000000001", "4711", b'{"schema": 1, "job_id": \xff',
                                   "not JSON: Expecting value: line 1 column 26 (char 25)")
    deployment.parked_records.park("projector", "shardId-000000000001", "4712", b'{"job_id": "' + b"p" * 32 + b'"}',
                                   "failed 3 deliveries, last with PoisonError: cannot project", job_id="p" * 32,
                                   failures=3)
    held = OutboxEvent(event_id="c:2", job_id="c" * 32, tenant_id="initech", type="demo.echo", version=2,
                       status=JobState.RUNNING, attempt=1, occurred_at=iso(system_clock()))
    deployment.status_projector.project(held)
    deployment.status_projector.project(held.model_copy(update={"status": JobState.CANCELLED}))

    sign_in(page, "operator")
    expect(page.locator("#whoami")).to_have_text("Operator (every tenant)")
    page.get_by_role("link", name="Operator").click()
    expect(page.locator("#ops-heading")).to_be_focused()
    tenants = page.locator("#tenants tbody tr")
    expect(tenants).to_have_count(2)
    expect(tenants.nth(0)).to_have_text(re.compile(r"acme\s*2\s*4\s*\d+\s*\d+\s*\d+ % \(\d+\)"), timeout=15_000)
    expect(tenants.nth(1)).to_contain_text("globex")
    expect(page.locator("#share-summary")).to_contain_text("Share of claims over the last 5 minutes: acme")
    # one part per tenant with claims, once globex's claims have reached the outbox's index too (polled)
    expect(page.locator("#share-chart rect.part")).to_have_count(2, timeout=15_000)
    shards = page.locator("#shards tbody tr")
    expect(shards.first).to_contain_text("its own watermark", timeout=15_000)
    expect(page.locator("#relay-lag")).to_contain_text("confirmed through")
    unreadable = page.locator("#parked tbody tr", has_text="not JSON")
    expect(unreadable).to_contain_text("not JSON: Expecting value")
    expect(unreadable).to_contain_text('{"schema": 1, "job_id": \\xff')
    expect(unreadable).to_contain_text("unreadable")
    poison = page.locator("#parked tbody tr", has_text="PoisonError")
    expect(poison).to_contain_text("poison (failed 3 deliveries)")
    expect(poison).to_contain_text("p" * 12)
    expect(page.locator("#conflicts tbody tr")).to_contain_text(
        'version 2 arrived again with other content: status ("running" in the view, "cancelled" incoming)')

    replayable = page.locator("#replayable tbody tr")
    expect(replayable).to_have_count(3, timeout=20_000)
    screenshot(page, "operator-view")
    page.get_by_role("button", name="Select all").click()
    expect(page.get_by_role("button", name="Replay selected (3)")).to_be_enabled()
    platform.workers.stop()  # nothing runs a replayed job from here: one replayed meanwhile stays queued
    store.replay(dead[2])  # by someone else: its answer will say so
    page.get_by_role("button", name="Replay selected (3)").click()
    expect(page.locator("#replay-summary")).to_have_text("Replayed 2 of 3:")
    results = page.locator("#replay-results li")
    expect(results).to_have_count(3)
    answers = {dead[0]: "queued again as version 4 (HTTP 202)", dead[1]: "queued again as version 4 (HTTP 202)",
               dead[2]: "Not replayable (HTTP 409): job"}
    for job_id, answer in answers.items():
        expect(page.locator(f'#replay-results li[data-job-id="{job_id}"]')).to_contain_text(answer)
    screenshot(page, "operator-bulk-replay")

    page.get_by_role("link", name="acme", exact=True).click()  # a tenant's jobs, as its operator sees them
    expect(page).to_have_url(re.compile(r"#/jobs\?tenant=acme$"))
    expect(page.locator("#jobs-heading")).to_have_text("Jobs of acme")
    expect(page.get_by_label("Tenant", exact=True)).to_have_value("acme")
    expect(page.locator("#jobs tbody tr")).to_have_count(2)
    expect(page.get_by_role("button", name=f"Cancel job {dead[0]}")).to_be_visible()  # queued again: cancellable


def test_refusals_show_the_apis_problem_details_and_empty_states_say_why(page, platform) -> None:
    from playwright.sync_api import expect

    theirs = platform.store.create("globex", NewJob(type="demo.echo")).job.job_id
    sign_in(page)
    expect(page.locator("#list-status")).to_have_text("No jobs yet.")
    page.goto(f"{platform.url}/#/jobs?status=dead")
    expect(page.locator("#list-status")).to_have_text("No jobs match these filters.")
    expect(page.get_by_role("link", name="Clear filters")).to_be_visible()

    page.goto(f"{platform.url}/#/jobs?cursor=bm90LWEtY3Vyc29y")
    problem = page.locator("#list-problem")
    expect(problem).to_have_text("Bad request (HTTP 400, listing jobs): the cursor is not one this API returned "
                                 "for this tenant")
    page.goto(f"{platform.url}/#/jobs?id=xyz")
    expect(problem).to_contain_text("Bad request (HTTP 400, listing jobs): id_prefix is 1 to 32 lower-case")
    screenshot(page, "list-problem")

    page.goto(f"{platform.url}/#/jobs/{theirs}")  # another tenant's job: as if it never existed
    expect(page.locator("#job-problem")).to_have_text(f"Not found (HTTP 404, reading the job): no job '{theirs}'")
    expect(page.locator("#job-body")).to_be_hidden()

    page.goto(f"{platform.url}/#/ops")  # not a link a tenant is offered, but the URL works: the API refuses
    expect(page.locator("#nav-ops")).to_be_hidden()
    expect(page.locator("#tenants-problem")).to_have_text(
        "Forbidden (HTTP 403, listing tenants): this is for operators")
    expect(page.locator("#replayable-problem")).to_contain_text("Forbidden (HTTP 403")
    screenshot(page, "ops-refused-for-a-tenant")


def test_readable_at_360_px_with_every_control_labelled(browser, platform) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 360, "height": 780})
    page = context.new_page()
    page.goto(platform.url + "/")
    unlabelled = """[...document.querySelectorAll('input, select, textarea')]
        .filter(e => !e.labels.length && !e.getAttribute('aria-label') && !e.closest('[hidden]'))
        .map(e => e.id || e.name)"""

    overlapping = """[...document.querySelectorAll('tbody tr')].filter(r => r.offsetParent).map(r => {
            const cells = [...r.children].map(c => c.getBoundingClientRect()).filter(b => b.height);
            return {row: r.getBoundingClientRect(), bottom: Math.max(...cells.map(b => b.bottom))};
        }).filter((row, i, rows) => row.bottom > row.row.bottom + 1 || (i && row.row.top < rows[i - 1].bottom - 1))
        .length"""

    def fits(name: str) -> None:
        assert page.evaluate("document.documentElement.scrollWidth") <= 360, name  # no sideways scrolling
        assert page.evaluate(overlapping) == 0, name  # each row (a card here) holds its cells, below the one before
        assert page.evaluate(unlabelled) == [], name
        screenshot(page, f"narrow-{name}")

    sign_in(page)
    submit(page, "demo.fail", '{"permanent": true}')
    job_id = submitted_job_id(page)
    submit(page, "demo.flaky", '{"failures": 1}')
    expect(page.locator(f'tr[data-job-id="{job_id}"] .status')).to_have_text("dead", timeout=20_000)
    fits("list")
    page.goto(f"{platform.url}/#/jobs/{job_id}")
    expect_view(page, job_id, "dead")
    expect(page.locator("#attempts li")).to_have_count(1)
    fits("job")
    page.get_by_label("Bearer token").fill(OPERATOR)
    page.get_by_role("button", name="Use token").click()
    page.goto(f"{platform.url}/#/ops")
    expect(page.locator("#replayable tbody tr")).to_have_count(1, timeout=20_000)
    expect(page.locator("#shards tbody tr").first).to_be_visible()
    fits("ops")
    context.close()


@pytest.mark.parametrize("platform", [{"workers": 0}], indirect=True)
def test_polling_moves_nothing_and_keeps_the_focus(page, platform) -> None:
    """Over several polls, while a job goes from running to succeeded: no layout shift (Chromium's
    layout-shift entries), every row where it was, and the focused link still focused. The test moves the jobs
    itself (no workers), so the change comes while it watches. (A job that changes moves to the top: the list
    is the API's, most recently changed first; here the one that changes is on top already.)"""
    from playwright.sync_api import expect

    store = platform.store
    for n in range(3):
        store.create("acme", NewJob(type="demo.echo", params={"n": n}))
        lease = store.claim("worker-t", 30)
        assert lease is not None
        store.complete(lease, {"n": n})
    sleeper = store.create("acme", NewJob(type="demo.sleep")).job.job_id
    running = store.claim("worker-t", 30)
    assert running is not None and running.job_id == sleeper
    sign_in(page)
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(4)
    expect(page.locator(f'tr[data-job-id="{sleeper}"] .status')).to_have_text("running")
    expect(page.locator("#jobs .status", has_text="succeeded")).to_have_count(3)
    page.wait_for_timeout(300)
    page.evaluate("""() => {
        window.shifts = [];
        new PerformanceObserver(list => window.shifts.push(
            ...list.getEntries().filter(e => !e.hadRecentInput).map(e => e.value))).observe({type: 'layout-shift'});
    }""")
    last = rows.nth(3).locator("a.job-link")
    last.focus()
    boxes = rows.evaluate_all("rows => rows.map(r => JSON.stringify(r.getBoundingClientRect()))")
    page.wait_for_timeout(2_100)  # a poll with nothing new
    store.complete(running, {"slept_s": 0})
    expect(page.locator(f'tr[data-job-id="{sleeper}"] .status')).to_have_text("succeeded", timeout=15_000)
    page.wait_for_timeout(2_500)  # more polls after the change
    assert page.evaluate("window.shifts") == []
    assert rows.evaluate_all("rows => rows.map(r => JSON.stringify(r.getBoundingClientRect()))") == boxes
    assert page.evaluate("document.activeElement.closest('tr')?.dataset.jobId") == rows.nth(3).get_attribute(
        "data-job-id")
    # the observer does see a shift when there is one (else the first check proved nothing)
    page.evaluate("document.querySelector('main').prepend(Object.assign(document.createElement('div'), "
                  "{style: 'height: 40px'}))")
    # (observer entries are delivered when the page is idle: on a loaded machine that can take seconds; polled
    # from here because wait_for_function's later polls run a string eval the page's CSP refuses)
    deadline = time.monotonic() + 20
    while not page.evaluate("window.shifts.length") and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert page.evaluate("window.shifts.length") > 0

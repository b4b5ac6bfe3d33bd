"""The status page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by Playwright, against
the whole platform (workers, reaper, heartbeats, relay and projector pollers, HTTP API) on the embedded
endpoint. A missing browser fails these tests; `.ci/run` installs it.

What breaks without which code:
- without pipeline heartbeats (onward.pipeline.heartbeats, relayed to every shard and raising the watermarks), an
  idle healthy system reads as delayed: the notice would never clear after the projector restarts and the
  page would cry wolf while nothing happens (test_delay_notice_appears_when_the_projector_stops_...).
- if freshness were measured from the projector's processing time instead of projected commit times, a
  stopped projector would not be noticed: the notice would never appear.
- if the page made a new Idempotency-Key for a retry, a response lost after the server committed would
  create the job twice (test_a_retry_after_a_lost_response_reuses_the_idempotency_key).
"""

from __future__ import annotations

import re

import pytest

from onward.runtime.demo_jobs import registry
from tests.e2e.page_support import (
    STALE_AFTER_S,
    sign_in,
    submit,
    submitted_job_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the pipeline reads and writes streams


def test_a_submitted_job_is_watched_to_succeeded_with_ticking_freshness(page) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    expect(page.locator("#token-status")).to_contain_text("Token set")
    submit(page, "demo.echo", '{"hello": "browser"}')
    job_id = submitted_job_id(page)
    row = page.locator(f'tr[data-job-id="{job_id}"]')
    expect(row.locator(".status")).to_have_text("succeeded")
    expect(row.locator(".updated")).to_have_text(re.compile(r"^updated \d+ s ago$"))
    first = int(re.search(r"\d+", row.locator(".updated").inner_text()).group(0))
    expect(row.locator(".updated")).to_have_text(re.compile(rf"^updated (?!{first} )\d+ s ago$"), timeout=5_000)
    expect(page.locator("#delay-notice")).to_be_hidden()
    expect(page.locator("#lag-summary")).to_contain_text("Projection lag now")
    assert page.locator("#lag-chart polyline").get_attribute("points")


def test_delay_notice_appears_when_the_projector_stops_and_clears_when_it_restarts(page, platform) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    expect(page.locator("#lag-summary")).to_contain_text("Projection lag now")
    notice = page.locator("#delay-notice")
    expect(notice).to_be_hidden()

    platform.projector.stop()
    submit(page, "demo.echo")
    job_id = submitted_job_id(page)
    expect(notice).to_be_visible(timeout=15_000)
    expect(notice).to_contain_text(re.compile(r"Updates delayed: last confirmed at \d\d:\d\d:\d\d"))
    assert page.locator(f'tr[data-job-id="{job_id}"]').count() == 0  # the view has not heard of it

    platform.projector.start()
    expect(notice).to_be_hidden(timeout=15_000)
    expect(page.locator(f'tr[data-job-id="{job_id}"] .status')).to_have_text("succeeded")
    page.wait_for_timeout(STALE_AFTER_S * 2 * 1000)  # idle now: only heartbeats keep the view confirmed
    expect(notice).to_be_hidden()


def test_a_retry_after_a_lost_response_reuses_the_idempotency_key(page, platform) -> None:
    """The first POST reaches the API (the job is committed) but its response is lost on the way back."""
    from playwright.sync_api import expect

    keys: list[str] = []

    def lose_first_response(route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) == 1:
            route.fetch()  # the server creates the job...
            route.abort("connectionreset")  # ...and the browser never hears of it
        else:
            route.continue_()

    page.route("**/jobs", lose_first_response)
    sign_in(page)
    submit(page, "demo.echo", '{"once": true}')
    expect(page.locator("#submit-status")).to_contain_text("Network error")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submit-status")).to_contain_text("was already submitted; nothing new was created")
    assert len(keys) == 2 and keys[0] == keys[1]
    acme_jobs = [job for job in platform.store.all_jobs() if job.tenant_id == "acme"]
    assert len(acme_jobs) == 1

    submit(page, "demo.echo", '{"once": true}')  # a new submit after an answer is a new job
    expect(page.locator("#submit-status")).to_contain_text("queued")
    assert len(keys) == 3 and keys[2] != keys[0]


def test_a_refused_token_and_a_refused_job_are_said_plainly(page) -> None:
    from playwright.sync_api import expect

    page.get_by_label("Bearer token").fill("not-a-token")
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#token-status")).to_contain_text("not accepted")
    sign_in(page, "globex")
    submit(page, "no.such.type")
    expect(page.locator("#submit-status")).to_contain_text("Not submitted. Unknown job type")
    submit(page, "demo.echo", "{not json")
    expect(page.locator("#submit-status")).to_contain_text("Params are not valid JSON")


def test_an_unreachable_api_is_said_instead_of_showing_old_statuses_silently(page) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    expect(page.locator("#list-status")).to_contain_text(re.compile("No jobs yet|Showing"))
    listing = re.compile(r"/jobs\?")
    page.route(listing, lambda route: route.abort("connectionrefused"))
    notice = page.locator("#delay-notice")
    expect(notice).to_contain_text(re.compile(r"The API cannot be reached\. Last answer at \d\d:\d\d:\d\d\."))
    page.unroute(listing)
    expect(notice).to_be_hidden()


def test_the_page_shows_validation_errors_and_why_a_job_died_and_forgets_a_refused_token(page, platform) -> None:
    """Before: a 422 said only "the body does not match the schema" (the API's `errors` were dropped), a
    dead job showed no reason, an empty "Max attempts" was sent as 0 (a 422 for a field the user left
    empty), and a token the API refused stayed in sessionStorage and was sent again after a reload."""
    from playwright.sync_api import expect

    sign_in(page, "globex")
    submit(page, "demo.echo", '{"n": 1e200}')
    status = page.locator("#submit-status")
    expect(status).to_contain_text("Not submitted. Invalid request: params: params.n: a magnitude outside")

    page.get_by_label("Max attempts").fill("")
    submit(page, "demo.fail", '{"permanent": true}')
    job_id = submitted_job_id(page)
    row = page.locator(f'tr[data-job-id="{job_id}"]')
    expect(row.locator(".status")).to_contain_text("dead")
    expect(row.locator(".reason")).to_contain_text(re.compile(r"^\w+: .+"))
    assert platform.store.get(job_id).max_attempts == 3  # the API's default, not 0

    page.evaluate("sessionStorage.setItem('onward.token', 'revoked-token')")
    page.reload()
    expect(page.locator("#token-status")).to_contain_text("not accepted")
    assert page.evaluate("sessionStorage.getItem('onward.token')") is None
    page.reload()
    expect(page.locator("#list-status")).to_contain_text("Paste a token")


def test_the_page_takes_its_job_types_and_final_statuses_from_the_api(page, platform) -> None:
    """The page keeps no copy of the contract: the job types it offers come from /openapi.json and a row's
    cancel button from the status's `terminal` flag. Before, both were lists written into the page, which
    drifted silently when the registry or the state machine changed."""
    from playwright.sync_api import expect

    options = page.locator("#job-types option")
    expect(options).to_have_count(len(registry.types))
    assert sorted(options.evaluate_all("nodes => nodes.map(n => n.value)")) == sorted(registry.types)
    sign_in(page)
    submit(page, "demo.sleep", '{"seconds": 30}')
    row = page.locator(f'tr[data-job-id="{submitted_job_id(page)}"]')
    expect(row.locator(".status")).to_have_text("running")
    row.get_by_role("button", name=re.compile("Cancel job")).click()
    expect(row.locator(".status")).to_have_text("cancelled", timeout=15_000)
    expect(row.get_by_role("button")).to_have_count(0)

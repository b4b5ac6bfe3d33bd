"""The status page never puts a token in a URL, in Chromium: not when Enter is pressed in the token field
before the page's scripts have loaded, and not when the page is opened at a URL that carries one.

What breaks without which code:
- without method="post" on the page's forms (onward/web/index.html), a form the scripts have not taken over
  yet is submitted the browser's default way, as a GET: Enter in the token field navigates to /?token=...,
  and the token stays in the history, the address bar and any log of the URL
  (test_enter_before_the_scripts_load_never_puts_the_token_in_a_url).
- without the API answering POST / (a 303 to the page, the body unread), that early submit is a 405 page
  instead of the page again.
- without app.js dropping the query from the address (history.replaceState), a link or bookmark with
  ?token= keeps it in the history entry (test_a_token_in_the_address_is_dropped_from_it_and_never_sent_on).
- without Referrer-Policy: no-referrer on the page's answers, a request the page makes (or a link followed
  from it) tells the other side the page's address, query included.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from tests.e2e.page_support import TOKENS

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read streams

TOKEN = TOKENS["acme"]
NO_WORKERS = pytest.mark.parametrize("platform", [{"workers": 0}], indirect=True)


class HeldScripts:
    """Holds every request for the page's scripts (/web/*.js) until `release()`, as a slow network would:
    meanwhile the page is parsed and its forms can be used, but no script has attached a listener."""

    def __init__(self, context: Any) -> None:
        self.held: list[Any] = []
        self.released = False
        self.lock = threading.Lock()
        context.route(re.compile(r"/web/[^/]+\.js$"), self._hold)

    def _hold(self, route: Any) -> None:
        with self.lock:
            if not self.released:
                self.held.append(route)
                return
        route.continue_()

    def release(self) -> None:
        with self.lock:
            self.released = True
            held, self.held = self.held, []
        for route in held:
            route.continue_()


def watch(context: Any, page: Any) -> tuple[list[str], list[str], list[Any]]:
    """The URL of every request and of every navigation of the main frame, and every request (to read its
    method and body)."""
    urls: list[str] = []
    navigations: list[str] = []
    requests: list[Any] = []
    context.on("request", lambda request: (urls.append(request.url), requests.append(request)))
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    return urls, navigations, requests


@NO_WORKERS
def test_enter_before_the_scripts_load_never_puts_the_token_in_a_url(browser, platform) -> None:
    """The scripts are held back, the token is typed and Enter pressed: the form is submitted by the browser
    itself. No request and no navigation has the token in its URL; the one request that carries it is the
    POST of the form, in its body, and the API answers it with the page again (303 to /), which then loads
    and works once its scripts arrive."""
    from playwright.sync_api import expect

    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    scripts = HeldScripts(context)
    urls, navigations, requests = watch(context, page)
    page.goto(platform.url + "/", wait_until="commit")
    field = page.locator("#token")
    field.wait_for()
    field.fill(TOKEN)
    with page.expect_navigation(wait_until="commit"):
        field.press("Enter")
    assert scripts.held, "the scripts were still held when Enter was pressed"
    scripts.release()
    expect(page.locator("#list-status")).to_have_text("Paste a token to see your jobs.")
    assert page.evaluate("location.search") == ""
    carried = [request for request in requests if TOKEN in (request.post_data or "")]
    assert [(request.method, request.url) for request in carried] == [("POST", platform.url + "/")]
    assert not [url for url in [*urls, *navigations, page.url] if TOKEN in url], (urls, navigations)
    answer = carried[0].response()
    assert answer is not None and answer.status == 303 and answer.headers["location"] == "/"
    context.close()


@NO_WORKERS
def test_a_token_in_the_address_is_dropped_from_it_and_never_sent_on(browser, platform, capfd) -> None:
    """Opened at /?token=...: once its scripts run, the page's address and its history entry have no query
    (history.replaceState), nothing the page requests afterwards carries the token in its URL or a Referer,
    the page is answered with Referrer-Policy: no-referrer, and nothing of the request is printed."""
    from playwright.sync_api import expect

    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    urls, _, requests = watch(context, page)
    answer = page.goto(f"{platform.url}/?token={TOKEN}#/jobs")
    assert answer is not None and answer.headers["referrer-policy"] == "no-referrer"
    expect(page.locator("#list-status")).to_have_text("Paste a token to see your jobs.")
    assert page.url == f"{platform.url}/#/jobs"
    assert page.evaluate("location.search") == ""
    after_the_page = requests[1:]
    assert after_the_page, "the page requested its scripts and the API"
    assert not [url for url in urls[1:] if TOKEN in url]
    assert not [request.url for request in after_the_page if TOKEN in (request.all_headers().get("referer") or "")]
    captured = capfd.readouterr()
    assert TOKEN not in captured.out + captured.err
    context.close()

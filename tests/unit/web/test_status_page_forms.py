"""The status page's forms never put what they hold in a URL, whatever its scripts' state: every form of
onward/web/index.html posts to /, and the API answers that post with the page again (303) without reading
the body, with Referrer-Policy: no-referrer like every file of the page. In Chromium:
tests/e2e/test_status_page_token.py.

Without method="post", a form submitted before app.js attaches its listener (a slow network) is a GET with
its fields in the query: /?token=... in the history and in any log of the URL. Without the POST / route, that
submit is a 405. Without Referrer-Policy, the page's own requests carry its address as Referer."""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from onward.api import app as api
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext

INDEX = Path(api.__file__).resolve().parent.parent / "web" / "index.html"
SECRET = "form-secret-7c1e"


class Forms(HTMLParser):
    """Every <form> of a page: id -> its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, str | None]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form":
            found = dict(attrs)
            self.forms[found.get("id") or f"form {len(self.forms)}"] = found


def answer(method: str, path: str, headers: tuple[tuple[str, str], ...] = (),
           body: bytes = b"") -> dict[str, Any]:
    return api.handler(build_event(method, path, list(headers), body), LocalLambdaContext("onward-api"))


def test_every_form_of_the_page_posts_to_the_page() -> None:
    parser = Forms()
    parser.feed(INDEX.read_text(encoding="utf-8"))
    assert "token-form" in parser.forms, "the token form is on the page"
    posted = {name: (form.get("method"), form.get("action")) for name, form in parser.forms.items()}
    assert posted == dict.fromkeys(parser.forms, ("post", "/"))


def test_a_form_posted_to_the_page_is_answered_with_the_page_and_its_body_is_not_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    logged = io.StringIO()
    for log_handler in api.logger.handlers:
        monkeypatch.setattr(log_handler, "stream", logged)
    reply = answer("POST", "/", (("content-type", "application/x-www-form-urlencoded"),),
                   f"token={SECRET}".encode())
    assert reply["statusCode"] == 303
    assert reply["headers"]["Location"] == "/" and reply["headers"]["Referrer-Policy"] == "no-referrer"
    assert SECRET not in reply["body"] and SECRET not in logged.getvalue()


@pytest.mark.parametrize("path", ["/", "/?token=" + SECRET, "/web/app.js", "/web/style.css"])
def test_the_page_and_its_files_are_sent_with_no_referrer(path: str) -> None:
    reply = answer("GET", path)
    assert reply["statusCode"] == 200
    assert reply["headers"]["Referrer-Policy"] == "no-referrer"
    assert "default-src 'self'" in reply["headers"]["Content-Security-Policy"]
    assert SECRET not in reply["body"]

"""The status page's routes: the page itself (GET /, and POST / for its forms), and its files (GET /web/<name>)
from onward/web/ (or ONWARD_WEB_ROOT), with the headers they are served with."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from aws_lambda_powertools.event_handler import Response

from onward.api.answers import Problem
from onward.api.routing import new_router

WEB_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# no-referrer: a request the page makes, or a link followed from it, never carries the page's address (it
# could hold a token pasted into a URL before the page's script removed it).
PAGE_HEADERS = {
    "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"}

router = new_router()


@cache
def web_files() -> dict[str, tuple[str, str]]:
    """name -> (content type, text) of every file of the status page."""
    root = Path(os.environ.get("ONWARD_WEB_ROOT") or Path(__file__).resolve().parent.parent.parent / "web")
    return {path.name: (WEB_TYPES[path.suffix], path.read_text(encoding="utf-8"))
            for path in sorted(root.iterdir()) if path.suffix in WEB_TYPES}


@router.get("/")
def status_page() -> Response[str]:
    return _static("index.html")


@router.post("/")
def status_page_form() -> Response[str]:
    """The page's forms are method="post" so that what they hold (a token) never lands in a URL; one reaches
    here only when the page's scripts have not taken it over yet (or never will). Answered with the page
    again (303, so a reload does not post it twice); the body is never read."""
    return Response(303, "text/plain; charset=utf-8", "", headers={"Location": "/", **PAGE_HEADERS})


@router.get("/web/<name>")
def status_page_asset(name: str) -> Response[str]:
    return _static(name)


def _static(name: str) -> Response[str]:
    """A file of the status page (web/), from a fixed list: nothing else on disk can be named."""
    found = web_files().get(name)
    if found is None:
        raise Problem(404, "Not found", "no such file", slug="route-not-found")
    content_type, body = found
    return Response(200, content_type, body, headers=PAGE_HEADERS)

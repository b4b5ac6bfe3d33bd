"""The status page's routes: the page itself (GET /, and POST / for its forms), and its files (GET /web/<name>)
from onward/web/ (or ONWARD_WEB_ROOT), with the headers they are served with."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path as PathParameter
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponseContentSchema

from onward.api.answers import no_such_file
from onward.api.openapi import problem
from onward.api.routing import new_router
from onward.domain.text_patterns import WEB_ASSET

WEB_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# no-referrer: a request the page makes, or a link followed from it, never carries the page's address (it
# could hold a token pasted into a URL before the page's script removed it).
PAGE_HEADERS = {
    "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"}
TEXT: OpenAPIResponseContentSchema = {"schema": {"type": "string"}}

router = new_router()


@cache
def web_files() -> dict[str, tuple[str, str]]:
    """name -> (content type, text) of every file of the status page."""
    root = Path(os.environ.get("ONWARD_WEB_ROOT") or Path(__file__).resolve().parent.parent.parent / "web")
    return {path.name: (WEB_TYPES[path.suffix], path.read_text(encoding="utf-8"))
            for path in sorted(root.iterdir()) if path.suffix in WEB_TYPES}


@router.get("/", operation_id="statusPage", responses={200: {
    "description": "the status page (HTML; its scripts and styles are under /web/)", "content": {"text/html": TEXT}}})
def status_page() -> Response[str]:
    return _static("index.html")


@router.post("/", operation_id="statusPageForm", responses={303: {
    "description": "the page again (Location: /): a form of the page submitted before its scripts took it over; the "
                   "body is not read", "headers": {"Location": {"schema": {"type": "string"}}}}})
def status_page_form() -> Response[str]:
    """The page's forms are method="post" so that what they hold (a token) never lands in a URL; one reaches
    here only when the page's scripts have not taken it over yet (or never will). Answered with the page
    again (303, so a reload does not post it twice); the body is never read."""
    return Response(303, "text/plain; charset=utf-8", "", headers={"Location": "/", **PAGE_HEADERS})


@router.get("/web/<name>", operation_id="statusPageAsset", responses={
    200: {"description": "a static file of the status page",
          "content": {"text/javascript": TEXT, "text/css": TEXT, "image/svg+xml": TEXT}},
    404: problem("no such file")})
def status_page_asset(name: Annotated[str, PathParameter(pattern=WEB_ASSET.anchored)]) -> Response[str]:
    return _static(name)


def _static(name: str) -> Response[str]:
    """A file of the status page (web/), from a fixed list: nothing else on disk can be named."""
    found = web_files().get(name)
    if found is None:
        raise no_such_file(name)
    content_type, body = found
    return Response(200, content_type, body, headers=PAGE_HEADERS)

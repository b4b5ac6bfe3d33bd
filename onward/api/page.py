"""The status page's files (onward/web/, or ONWARD_WEB_ROOT) and the headers they are served with by the API
(onward/api/app.py, which routes them)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

WEB_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# no-referrer: a request the page makes, or a link followed from it, never carries the page's address (it
# could hold a token pasted into a URL before the page's script removed it).
PAGE_HEADERS = {
    "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"}


@cache
def web_files() -> dict[str, tuple[str, str]]:
    """name -> (content type, text) of every file of the status page."""
    root = Path(os.environ.get("ONWARD_WEB_ROOT") or Path(__file__).resolve().parent.parent / "web")
    return {path.name: (WEB_TYPES[path.suffix], path.read_text(encoding="utf-8"))
            for path in sorted(root.iterdir()) if path.suffix in WEB_TYPES}

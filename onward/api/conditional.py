"""Conditional reads of a job's status (GET /jobs/{job_id}): the entity tag that names what the status view shows
of a job, and whether a request's If-None-Match already holds it (then the answer is 304, with no body).

A tag is weak (RFC 9110, section 8.8.1): two answers under one tag carry the same status but differ in their
`freshness` block, which is computed at each request. It names the view row's version and a hash of the whole row
(so a change that keeps the version, a field another projection adds, still changes it), an archived job's
version, or a job the view has not shown yet. If-None-Match is compared weakly, as RFC 9110 section 13.1.2 asks.
"""

from __future__ import annotations

import hashlib

from onward.domain.models import StatusView

PENDING_TAG = 'W/"pending"'
ROW_HASH_CHARS = 16


def view_tag(view: StatusView) -> str:
    """The tag of a job's row in the status view: its version and a hash of every field of the row."""
    row_hash = hashlib.sha256(view.model_dump_json().encode()).hexdigest()[:ROW_HASH_CHARS]
    return f'W/"v{view.version}-{row_hash}"'


def archived_tag(version: int) -> str:
    """The tag of a job answered from the run-history archive (it changes only if the job is replayed)."""
    return f'W/"archived-v{version}"'


def _opaque(tag: str) -> str:
    """A tag without its weakness mark: what the weak comparison compares."""
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def none_match(if_none_match: str | None, current: str) -> bool:
    """True when the request's If-None-Match holds `current` (or is `*`, any current representation): the
    caller already has this status, so the answer is 304. A header that names no tag matches nothing."""
    if if_none_match is None:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = _opaque(current)
    return any(_opaque(tag) == wanted for tag in if_none_match.split(",") if tag.strip())

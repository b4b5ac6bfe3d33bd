"""A link from a job to its trace in a tracing UI: ONWARD_TRACE_URL, a URL template holding `{trace_id}`
(`https://ui.example.com/trace/{trace_id}`), validated at start. GET /jobs/{id} answers the link as `trace_url`
and the status page shows it; unset, the trace id is shown as text."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

TRACE_URL_VARIABLE = "ONWARD_TRACE_URL"
PLACEHOLDER = "{trace_id}"


def trace_url_template(environ: Mapping[str, str]) -> str | None:
    """ONWARD_TRACE_URL, checked: an http(s) URL with a host holding `{trace_id}` once and no other braces;
    ValueError says why not. None when unset."""
    template = (environ.get("ONWARD_TRACE_URL") or "").strip()  # TRACE_URL_VARIABLE, literal for the template's checks
    if not template:
        return None
    parts = urlsplit(template.replace(PLACEHOLDER, "0" * 32))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{TRACE_URL_VARIABLE} must be an http or https URL, not {template!r}")
    if template.count(PLACEHOLDER) != 1 or "{" in template.replace(PLACEHOLDER, "") or "}" in template.replace(
            PLACEHOLDER, ""):
        raise ValueError(f"{TRACE_URL_VARIABLE} must hold {PLACEHOLDER} once (and no other braces), not {template!r}")
    return template


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """The trace's address in the UI, or None without a template or a trace."""
    if template is None or trace_id is None:
        return None
    return template.replace(PLACEHOLDER, trace_id)

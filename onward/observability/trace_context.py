"""W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and `tracestate` headers, parsed
and validated as the recommendation says, with no dependency (the API parses them on every POST /jobs, also
where no OpenTelemetry package is installed).

An invalid `traceparent` is ignored, not refused (the recommendation: a receiver that cannot parse it starts a
new trace): the job is created without trace context. A `tracestate` is kept only beside a valid
`traceparent`, and dropped when invalid. A `traceparent` of a later version than 00 is read as version 00
reads it (its first four fields) and kept as version 00, as the recommendation asks of a version-00 parser."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_INVALID_VERSION = "ff"
_VERSION_00_LENGTH = 55
MAX_TRACESTATE_MEMBERS = 32
# key = simple-key / multi-tenant-key; value = 0*255(chr) nblk-chr (section 3.3.1.3)
_TRACESTATE_KEY = re.compile(r"[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}")
_TRACESTATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_OWS = " \t"


@dataclass(frozen=True)
class TraceParent:
    """A valid `traceparent`: the trace, the caller's span (the parent of the next one) and its flags."""

    trace_id: str  # 32 lowercase hex digits, not all zero
    parent_id: str  # 16 lowercase hex digits, not all zero
    flags: int  # bit 0: sampled

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 0x01)

    def header(self) -> str:
        """As a version-00 `traceparent` header."""
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags:02x}"


def parse_traceparent(header: str | None) -> TraceParent | None:
    """The header's trace context, or None when it is absent or invalid (section 3.2, and 4.3 for versions
    after 00)."""
    if header is None:
        return None
    value = header.strip(_OWS)
    match = _TRACEPARENT.match(value)
    if match is None:
        return None
    version, trace_id, parent_id, flags = match.groups()
    if version == _INVALID_VERSION:
        return None
    if len(value) > _VERSION_00_LENGTH and (version == "00" or value[_VERSION_00_LENGTH] != "-"):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return TraceParent(trace_id, parent_id, int(flags, 16))


def parse_tracestate(header: str | None) -> str | None:
    """The header's list-members joined by commas (empty members dropped), or None when it is absent, empty
    or invalid: a key or value outside the grammar, a key twice, more than 32 members (section 3.3)."""
    if header is None:
        return None
    members = [member.strip(_OWS) for member in header.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    keys: set[str] = set()
    for member in members:
        key, equals, value = member.partition("=")
        if not equals or not _TRACESTATE_KEY.fullmatch(key) or not _TRACESTATE_VALUE.fullmatch(value):
            return None
        if key in keys:
            return None
        keys.add(key)
    return ",".join(members)


def trace_id_of(trace_parent: str | None) -> str | None:
    """The trace id of a stored (valid, version-00) `traceparent`, or None."""
    parsed = parse_traceparent(trace_parent)
    return None if parsed is None else parsed.trace_id

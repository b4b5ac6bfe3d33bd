"""The status projection as pure functions: event digest, how an incoming event relates to what the view
holds, the view item an event produces (with its TTL once the job has ended), and the view rebuilt from an
event history (deterministic)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from onward.domain.clock import epoch_ms
from onward.domain.models import OutboxEvent
from onward.domain.retention import RetentionPolicy
from onward.domain.states import is_terminal
from onward.domain.text_patterns import TRACE_PARENT


class ProjectionOutcome(StrEnum):
    APPLIED = "applied"  # newer than the view: written
    DUPLICATE = "duplicate"  # same version, same content: a redelivery, no-op
    STALE = "stale"  # older than the view: no-op
    CONFLICT = "conflict"  # same version, different content: kept apart, alarmed, never overwrites


# Fields added to the event contract after its first version, left out of the digest while absent: the view
# stores digests, so an event without them must digest as it did before they existed (else the redelivery
# of an old event after a deploy would be taken for a conflict).
ADDED_FIELDS = ("run_at",)
# What a digest covers, for good: a field added to the event from now on is left out, however it is set.
DIGESTED_FIELDS = frozenset({
    "event_id", "job_id", "tenant_id", "type", "version", "status", "attempt", "cancel_requested", "occurred_at",
    "schema_version", "error", "result_size_bytes", "result_inline", *ADDED_FIELDS})


def digest(event: OutboxEvent) -> str:
    """A stable fingerprint of an event's content (canonical JSON, sorted keys), over DIGESTED_FIELDS only.
    Not of `committed_at`: the same transition re-published from the outbox has none, and is the same event.
    Nor of an ADDED_FIELDS field the event does not have. Nor of a field added to the contract later, or
    unknown to this code: a projector not yet upgraded and one upgraded must agree on a redelivery of an
    event that carries it, else it reads as a conflict (onward.domain.schema_versions)."""
    absent = {name for name in ADDED_FIELDS if getattr(event, name) is None}
    content = event.model_dump(mode="json", by_alias=True, include=set(DIGESTED_FIELDS - absent))
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def classify(view_version: int | None, view_digest: str | None, event: OutboxEvent) -> ProjectionOutcome:
    """What the view must do with `event`, given the version and digest it holds (None: no view yet)."""
    if view_version is None or event.version > view_version:
        return ProjectionOutcome.APPLIED
    if event.version < view_version:
        return ProjectionOutcome.STALE
    return ProjectionOutcome.DUPLICATE if view_digest == digest(event) else ProjectionOutcome.CONFLICT


def view_fields(event: OutboxEvent) -> dict[str, Any]:
    """The status view's attributes for one event (projected_at is added by the writer)."""
    fields: dict[str, Any] = {
        "job_id": event.job_id,
        "tenant_id": event.tenant_id,
        "type": event.type,
        "status": event.status.value,
        "version": event.version,
        "attempt": event.attempt,
        "cancel_requested": event.cancel_requested,
        "occurred_at": event.occurred_at,
        "committed_at": event.committed_at,
        "digest": digest(event),
        "error": event.error.model_dump(mode="json") if event.error else None,
        "result_size_bytes": event.result_size_bytes,
        "result_inline": event.result_inline,
        "run_at": event.run_at,
        "tags": event.tags,  # not digested (DIGESTED_FIELDS): the tag index's entries follow the row
        "trace_id": trace_id(event.trace_parent),  # trace context (issue 38); not digested (added later)
    }
    return fields


def trace_id(trace_parent: str | None) -> str | None:
    """The 32-hex trace id of a job's stored traceparent (version 00), or None."""
    return trace_parent.split("-")[1] if trace_parent is not None and TRACE_PARENT.matches(trace_parent) else None


def view_expires_at(event: OutboxEvent, retention: RetentionPolicy | int,
                    live_horizon_s: int | None = None) -> int | None:
    """The TTL (epoch seconds) of the view row `event` writes, counted from the event's time (its commit
    time, else its decision time).

    A terminal status: the job's retention for its tenant, type and outcome (`retention`: the policy, or one
    retention for all), as the job's own row. A status of a job that goes on: `live_horizon_s` after the
    event's time, or after its `run_at` when that is later (a job delayed up to MAX_DELAY_S keeps its row until
    it is due); each newer event of a live job moves it. The projector passes the outbox retention plus the
    longest job retention (live_view_horizon_s): an event replayed from the outbox cannot be older than the
    outbox retention, so the row of a job deleted after its retention never outlives what could rewrite it,
    and a live job that has not moved for that long answers as a job the view has not seen (`visible: false`).
    None (no horizon given): a live job's row never expires, as before the horizon existed.

    A row is replaced whole by each newer version. An old event redelivered after its row expired writes a row
    that is already expired: the next TTL sweep takes it again."""
    at_s = epoch_ms(event.committed_at or event.occurred_at) // 1000
    if is_terminal(event.status):
        policy = retention if isinstance(retention, RetentionPolicy) else RetentionPolicy.uniform(retention)
        return at_s + policy.retention_s(event.tenant_id, event.type, event.status.value)
    if live_horizon_s is None:
        return None
    due_s = epoch_ms(event.run_at) // 1000 if event.run_at is not None else at_s
    return max(at_s, due_s) + live_horizon_s


def live_view_horizon_s(policy: RetentionPolicy, outbox_retention_s: int) -> int:
    """How long the view row of a job that goes on is kept after its last event: the outbox retention (the
    oldest event a replay can bring back) plus the longest job retention (the longest a job is kept)."""
    return outbox_retention_s + policy.longest_s


def view_item(event: OutboxEvent, projected_at: str, retention: RetentionPolicy | int,
              live_horizon_s: int | None = None) -> dict[str, Any]:
    """The whole view row `event` writes (view_fields, when it was projected, and its TTL if it has one);
    `retention`: the job retention policy (or one retention); `live_horizon_s`: view_expires_at."""
    item = {**view_fields(event), "projected_at": projected_at}
    expires = view_expires_at(event, retention, live_horizon_s)
    if expires is not None:
        item["expires_at"] = expires
    return item


def fold(events: Iterable[OutboxEvent]) -> dict[str, OutboxEvent]:
    """The event each job's view must show: its highest version (the projection, rebuilt from history)."""
    latest: dict[str, OutboxEvent] = {}
    for event in events:
        held = latest.get(event.job_id)
        if held is None or event.version > held.version:
            latest[event.job_id] = event
    return latest

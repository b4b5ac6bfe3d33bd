"""The status projection as pure functions: event digest, how an incoming event relates to what the view
holds, the view item an event produces, and the view rebuilt from an event history (deterministic)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from onward.models import OutboxEvent


class ProjectionOutcome(StrEnum):
    APPLIED = "applied"  # newer than the view: written
    DUPLICATE = "duplicate"  # same version, same content: a redelivery, no-op
    STALE = "stale"  # older than the view: no-op
    CONFLICT = "conflict"  # same version, different content: kept apart, alarmed, never overwrites


def digest(event: OutboxEvent) -> str:
    """A stable fingerprint of an event's content (canonical JSON, sorted keys). Not of `committed_at`: the
    same transition re-published from the outbox has none, and is the same event."""
    canonical = json.dumps(event.model_dump(mode="json", by_alias=True, exclude={"committed_at"}), sort_keys=True,
                           separators=(",", ":"))
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
    }
    return fields


def fold(events: Iterable[OutboxEvent]) -> dict[str, OutboxEvent]:
    """The event each job's view must show: its highest version (the projection, rebuilt from history)."""
    latest: dict[str, OutboxEvent] = {}
    for event in events:
        held = latest.get(event.job_id)
        if held is None or event.version > held.version:
            latest[event.job_id] = event
    return latest

"""The projection conflicts the projector kept apart, read back for a person, each with its reason: which
fields of the view's row and of the incoming event of the same version disagree.

A conflict is an event whose version the view already holds with other content (onward.domain.projection.classify):
the projector never overwrites the view with it, keeps both payloads in the conflicts table and alarms. Two
writers deciding one version differently is a bug in the store; what differs is where to start looking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from onward.domain.models import OutboxEvent
from onward.domain.projection import view_fields
from onward.pipeline.projector.kept_conflicts import KeptConflictTable

# Attributes that differ between two deliveries of one transition without a disagreement about it (the TTL
# follows committed_at).
_NOT_CONTENT = frozenset({"digest", "committed_at", "projected_at", "expires_at"})


@dataclass(frozen=True)
class Difference:
    field: str
    in_view: Any
    incoming: Any


@dataclass(frozen=True)
class KeptConflict:
    job_id: str
    tenant_id: str | None
    version: int
    detected_at: str
    differences: tuple[Difference, ...]
    reason: str


def differences(held: dict[str, Any], incoming: OutboxEvent) -> tuple[Difference, ...]:
    """The view attributes on which the held row and the incoming event disagree (pure)."""
    arrived = view_fields(incoming)
    names = sorted((set(held) | set(arrived)) - _NOT_CONTENT)
    return tuple(Difference(name, held.get(name), arrived.get(name)) for name in names
                 if _canonical(held.get(name)) != _canonical(arrived.get(name)))


def reason_of(version: int, found: tuple[Difference, ...]) -> str:
    if not found:
        return f"version {version} arrived again with a different digest but the same view fields"
    shown = ", ".join(f"{d.field} ({_short(d.in_view)} in the view, {_short(d.incoming)} incoming)" for d in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"version {version} arrived again with other content: {shown}{more}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(value: Any, limit: int = 60) -> str:
    text = _canonical(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ConflictReader:
    """The kept conflicts, each with its reason."""

    def __init__(self, table: KeptConflictTable) -> None:
        self._table = table

    def newest(self, limit: int) -> tuple[list[KeptConflict], bool]:
        """Up to `limit` kept conflicts, newest first among those read, and whether more are kept."""
        items, more = self._table.first(limit)
        found = [_conflict(item) for item in items]
        return sorted(found, key=lambda conflict: conflict.detected_at, reverse=True), more


def _conflict(item: dict[str, Any]) -> KeptConflict:
    version = int(item.get("version", 0))
    try:
        held = json.loads(item.get("view_payload") or "{}")
    except ValueError:
        held = None
    if not isinstance(held, dict):
        held = {}
    try:
        incoming = OutboxEvent.model_validate_json(item.get("incoming_payload") or "")
    except ValidationError as error:
        return KeptConflict(item["job_id"], held.get("tenant_id"), version, item.get("detected_at", ""), (),
                            f"version {version}: the incoming payload cannot be read ({error.error_count()} errors)")
    found = differences(held, incoming)
    return KeptConflict(item["job_id"], incoming.tenant_id, version, item.get("detected_at", ""), found,
                        reason_of(version, found))

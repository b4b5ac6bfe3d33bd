"""One job's events of one batch coalesced into at most one write: what writing them one by one, in batch
order, would do to a view holding a given version (pure), so that only the last event applied is written.

The view row is derived from its event alone, so writing the last applied event ends the view where writing
each in turn would. Its condition keeps that exact: the write is made only while the view holds no version of
the job or one below the FIRST applied event's, the state the plan was decided from (every event after the
first is judged against the events before it, not the view). When the view holds more than assumed, the
refusal returns what it holds and the plan is decided again from it: a duplicate, a stale event and a
same-version disagreement (with the view, or with an earlier record of the same batch) are judged as one by
one would judge them, and the conflicts kept with both payloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onward.domain.models import OutboxEvent
from onward.domain.projection import ProjectionOutcome, classify, digest, view_fields


@dataclass(frozen=True)
class Held:
    """What the view holds of a job: its version, digest and row (as plain values)."""

    version: int | None
    digest: str | None
    row: dict[str, Any]

    @classmethod
    def of(cls, row: dict[str, Any]) -> Held:
        version = row.get("version")
        return cls(None if version is None else int(version), row.get("digest"), row)


@dataclass(frozen=True)
class KeptApart:
    """A same-version event with other content, and the row it disagrees with (the view's, or the row an
    earlier record of the batch would have written)."""

    event: OutboxEvent
    held: dict[str, Any]


@dataclass(frozen=True)
class Coalesced:
    outcomes: tuple[ProjectionOutcome, ...]  # each event's, in batch order
    write: OutboxEvent | None  # the one row to write: the last event applied (None: none applies)
    below: int  # write it only while the view holds no version or one below this (the first applied event's)
    conflicts: tuple[KeptApart, ...]

    @property
    def applied(self) -> int:
        return sum(outcome is ProjectionOutcome.APPLIED for outcome in self.outcomes)


def coalesce(events: Sequence[OutboxEvent], held: Held | None) -> Coalesced:
    """What writing `events` (one job's, in batch order) one by one would do to a view holding `held` (None:
    nothing, or a version below the first event's): each event's outcome, the conflicts to keep, and the one
    write that ends the view where those writes would."""
    version, held_digest, row = (held.version, held.digest, held.row) if held else (None, None, {})
    outcomes: list[ProjectionOutcome] = []
    conflicts: list[KeptApart] = []
    write: OutboxEvent | None = None
    below = 0
    for event in events:
        outcome = classify(version, held_digest, event)
        outcomes.append(outcome)
        if outcome is ProjectionOutcome.APPLIED:
            below = below or event.version
            write = event
            version, held_digest, row = event.version, digest(event), view_fields(event)
        elif outcome is ProjectionOutcome.CONFLICT:
            conflicts.append(KeptApart(event, row))
    return Coalesced(tuple(outcomes), write, below, tuple(conflicts))

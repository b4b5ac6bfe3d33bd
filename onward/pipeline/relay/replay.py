"""Replay: re-publish a window of retained outbox events to Kinesis. Idempotent by construction: the
projector's version guard turns every event it already applied into a counted duplicate.

The outbox may keep a job's events longer than the job itself (its retention, onward.domain.retention): replay
re-publishes them anyway and leaves the decision to the projector, which looks up jobs whose events are older
than the shortest retention and writes no view row for a gone one (onward/pipeline/projector/gone.py,
tests/integration/pipeline/test_replay_retention.py). One check, where every event passes, instead of two."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from onward.domain.clock import EpochMs, epoch_ms, iso, system_clock
from onward.domain.models import OutboxEvent
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.relay.publisher import KinesisPublisher

BATCH = 500
EPOCH = "1970-01-01T00:00:00.000Z"


@dataclass(frozen=True)
class ReplaySelection:
    job_id: str | None = None
    tenant_id: str | None = None
    since: EpochMs | None = None  # inclusive; parse what a person typed with onward.domain.clock.parse_instant
    until: EpochMs | None = None  # inclusive


@dataclass(frozen=True)
class ReplaySummary:
    selected: int
    published: int


def select(reader: OutboxReader, selection: ReplaySelection) -> list[OutboxEvent]:
    """The events of the selection, in commit order (per job: version order)."""
    if selection.job_id is not None:
        events: Iterable[OutboxEvent] = reader.events_of(selection.job_id)
    elif selection.since is not None:
        until = selection.until if selection.until is not None else system_clock()
        events = reader.window(iso(selection.since), iso(until))  # the index's canonical UTC text
    else:
        events = reader.all()
    chosen = [
        event for event in events
        if (selection.tenant_id is None or event.tenant_id == selection.tenant_id)
        and (selection.since is None or epoch_ms(event.occurred_at) >= selection.since)
        and (selection.until is None or epoch_ms(event.occurred_at) <= selection.until)
    ]
    return sorted(chosen, key=lambda event: (event.occurred_at, event.job_id, event.version))


def replay(
    reader: OutboxReader,
    publisher: KinesisPublisher,
    selection: ReplaySelection,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ReplaySummary:
    events = select(reader, selection)
    published = 0
    for start in range(0, len(events), BATCH):
        batch = events[start:start + BATCH]
        outcome = publisher.publish(batch)
        published += sum(outcome)
        progress(published, len(events))
        if not all(outcome):
            break
    return ReplaySummary(selected=len(events), published=published)

"""The relay and progress events (onward/store/dynamo/progress_items.py): a progress item of the outbox stream goes
to Kinesis in stream order with its job's transitions, stamped with its commit time; a malformed one is parked,
never passed on as a transition's event."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from onward.domain.models import OutboxEvent
from onward.domain.progress import ProgressEvent, progress_event
from onward.pipeline.heartbeats import Heartbeat
from onward.pipeline.relay.publisher import PublishStats
from onward.pipeline.relay.relay import Relay, StreamRecord
from onward.store.dynamo.progress_items import progress_outbox_item
from tests.unit.pipeline.test_relay_interleavings import BASE_MS, event_image
from tests.unit.pipeline.test_relay_poison import Parked

JOB = "a" * 32


@dataclass
class Publisher:
    published: list[OutboxEvent | ProgressEvent] = field(default_factory=list)
    stats: PublishStats = field(default_factory=PublishStats)

    def publish(self, events: Sequence[OutboxEvent | ProgressEvent]) -> list[bool]:
        self.published.extend(events)
        return [True] * len(events)

    def publish_heartbeat(self, heartbeat: Heartbeat) -> bool:
        return True


def relay_of(publisher: Publisher, parked: Parked) -> Relay:
    publisher_: Any = publisher
    parked_: Any = parked
    checkpoints: Any = None
    return Relay(publisher_, checkpoints, parked_)


def test_progress_goes_out_between_the_transitions_it_was_committed_between():
    """Without the relay reading progress items they would be parked as invalid transition events, and the view
    would never show progress; reordered, an update would be published after the completion (harmless to the
    view, but a waste: the order is the outbox stream's)."""
    update = progress_event(JOB, "acme", 2, 1, 1, 0.5, "half", BASE_MS + 1)
    records = [StreamRecord("1", "INSERT", event_image(JOB, 2, BASE_MS), BASE_MS),
               StreamRecord("2", "INSERT", progress_outbox_item(update, 2_000_000_000), BASE_MS + 1_000),
               StreamRecord("3", "INSERT", event_image(JOB, 3, BASE_MS + 2), BASE_MS + 2_000)]
    publisher, parked = Publisher(), Parked()

    outcome = relay_of(publisher, parked).relay(records)

    assert outcome.published == 3 and parked.records == []
    kinds = [type(event).__name__ for event in publisher.published]
    assert kinds == ["OutboxEvent", "ProgressEvent", "OutboxEvent"]
    relayed = publisher.published[1]
    assert isinstance(relayed, ProgressEvent)
    assert (relayed.version, relayed.seq, relayed.fraction, relayed.message) == (2, 1, 0.5, "half")
    assert relayed.committed_at is not None


def test_a_malformed_progress_item_is_parked_with_its_reason():
    """Without the relay's parking of what it cannot read, one bad item would hold its stream shard."""
    image = progress_outbox_item(progress_event(JOB, "acme", 2, 1, 1, 0.5, None, BASE_MS), 2_000_000_000)
    del image["fraction"]
    publisher, parked = Publisher(), Parked()

    outcome = relay_of(publisher, parked).relay([StreamRecord("1", "INSERT", image, BASE_MS)])

    assert outcome.parked == 1 and publisher.published == []
    assert "invalid outbox image" in parked.records[0]["reason"]

"""The relay: committed outbox events (the outbox table's stream) -> Kinesis, with its own checkpoint.

For one batch of stream records from one shard: records at or before the relay's checkpoint were published
already and are skipped; INSERTs are published (relay.publisher); the checkpoint then moves past the
longest contiguous run of records that are done. Pipeline heartbeats (onward.heartbeat) go to every
events shard after the batch's events. The answer names the first record not done, so the event
source resumes there (Lambda's partial batch response; the local poller does the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from pydantic import ValidationError

from onward.checkpoints import RELAY_CONSUMER, Checkpoint, CheckpointStore
from onward.clock import Clock, epoch_ms, iso, system_clock
from onward.faults import fault_point
from onward.heartbeat import Heartbeat, heartbeat_from_image, is_heartbeat_image
from onward.models import OutboxEvent
from onward.outbox import OutboxReader, event_from_image
from onward.parking import ParkedRecords
from relay.publisher import MAX_RECORD_BYTES, KinesisPublisher, encode

logger = Logger(service="onward-relay")

RECOVERY_MARGIN_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class StreamRecord:
    """One outbox-stream record, as the relay needs it (from a Lambda event or the Streams API)."""

    sequence_number: str
    event_name: str  # INSERT | MODIFY | REMOVE
    new_image: dict[str, Any] | None


@dataclass
class RelayOutcome:
    published: int = 0
    already_published: int = 0
    ignored: int = 0  # not INSERTs: the outbox is append-only, TTL removals are not events
    parked: int = 0
    heartbeats: int = 0  # pipeline heartbeats passed on to every events shard
    first_unpublished: str | None = None  # where the event source must resume; None: the batch is done
    checkpoint: Checkpoint | None = None
    retried_entries: int = 0
    requests: int = 0
    error_codes: dict[str, int] = field(default_factory=dict)


class Relay:
    def __init__(
        self,
        publisher: KinesisPublisher,
        checkpoints: CheckpointStore,
        parked: ParkedRecords,
        outbox: OutboxReader,
        clock: Clock = system_clock,
    ) -> None:
        self._publisher = publisher
        self._checkpoints = checkpoints
        self._parked = parked
        self._outbox = outbox
        self._clock = clock

    def checkpoint(self, shard_id: str) -> Checkpoint | None:
        return self._checkpoints.checkpoint(RELAY_CONSUMER, shard_id)

    def relay(self, shard_id: str | None, records: Sequence[StreamRecord]) -> RelayOutcome:
        """Publish one batch of one shard's records. With `shard_id` None (the shard could not be told)
        nothing is skipped by checkpoint and none is written: the event source's position alone holds."""
        outcome = RelayOutcome()
        checkpoint = self.checkpoint(shard_id) if shard_id is not None else None
        todo: list[StreamRecord] = []
        for record in records:
            if checkpoint is not None and checkpoint.covers(record.sequence_number):
                outcome.already_published += 1
            else:
                todo.append(record)

        events: list[OutboxEvent] = []
        event_of: dict[int, int] = {}  # position in todo -> position in events
        heartbeats: dict[int, Heartbeat] = {}  # position in todo -> heartbeat
        for position, record in enumerate(todo):
            if record.event_name != "INSERT" or record.new_image is None:
                outcome.ignored += 1
                continue
            try:
                if is_heartbeat_image(record.new_image):
                    heartbeats[position] = heartbeat_from_image(record.new_image)
                    continue
                event = event_from_image(record.new_image)
            except (ValidationError, KeyError, TypeError, ValueError, AttributeError) as error:
                # AttributeError: an image whose attribute values are not typed as DynamoDB types them
                self._parked.park(RELAY_CONSUMER, shard_id or "unknown", record.sequence_number,
                                  repr(record.new_image).encode(), f"invalid outbox image: {error}")
                outcome.parked += 1
                continue
            if len(encode(event)) + len(event.job_id) > MAX_RECORD_BYTES:
                self._parked.park(RELAY_CONSUMER, shard_id or "unknown", record.sequence_number,
                                  encode(event), "event larger than a Kinesis record (1 MiB)")
                outcome.parked += 1
                continue
            event_of[position] = len(events)
            events.append(event)

        stats = self._publisher.stats
        before = stats.requests, stats.retried_entries, dict(stats.error_codes)
        fault_point("relay.before_put_records")
        published = self._publisher.publish(events) if events else []
        # A heartbeat goes out after every event of the batch, only once they all did: it vouches for them.
        heartbeat_sent = bool(heartbeats) and all(published) and self._publisher.publish_heartbeat(
            max(heartbeats.values(), key=lambda heartbeat: heartbeat.occurred_at))
        outcome.heartbeats = len(heartbeats) if heartbeat_sent else 0
        fault_point("relay.after_put_records")
        outcome.requests = self._publisher.stats.requests - before[0]
        outcome.retried_entries = self._publisher.stats.retried_entries - before[1]
        outcome.published = sum(published)
        outcome.error_codes = {code: count - before[2].get(code, 0) for code, count in stats.error_codes.items()
                               if count > before[2].get(code, 0)}

        done_through: StreamRecord | None = None
        event_time = checkpoint.event_time if checkpoint else None
        for position, record in enumerate(todo):
            index = event_of.get(position)
            if (index is not None and not published[index]) or (position in heartbeats and not heartbeat_sent):
                outcome.first_unpublished = record.sequence_number
                break
            done_through = record
            if index is not None:
                event_time = max(event_time or "", events[index].occurred_at)
            elif position in heartbeats:
                event_time = max(event_time or "", heartbeats[position].occurred_at)
        if done_through is not None and shard_id is not None:
            advanced = Checkpoint(shard_id, done_through.sequence_number, event_time or iso(self._clock()))
            self._checkpoints.advance(RELAY_CONSUMER, advanced)
            outcome.checkpoint = advanced
        logger.info("relayed", extra={"shard_id": shard_id, "published": outcome.published,
                                      "already_published": outcome.already_published,
                                      "first_unpublished": outcome.first_unpublished})
        return outcome

    def recover(self, shard_id: str) -> int:
        """The stream was trimmed past this shard's checkpoint: re-publish from the outbox every event
        committed since the checkpoint's event time (minus a margin), so nothing is lost. Duplicates are
        absorbed by the projector's version guard. Returns the number of events re-published."""
        checkpoint = self.checkpoint(shard_id)
        if checkpoint is None:
            since = "1970-01-01T00:00:00.000Z"
        else:
            since = iso(epoch_ms(checkpoint.event_time) - RECOVERY_MARGIN_MS)
        events = sorted(self._outbox.window(since, iso(self._clock())), key=lambda e: (e.occurred_at, e.version))
        published = self._publisher.publish(events)
        logger.warning("re-published from the outbox after the stream was trimmed",
                       extra={"shard_id": shard_id, "since": since, "events": sum(published)})
        if not all(published):
            raise RuntimeError(f"recovery of shard {shard_id}: {len(published) - sum(published)} events unpublished")
        return len(events)

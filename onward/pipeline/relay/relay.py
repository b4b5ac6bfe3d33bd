"""The relay: committed outbox events (the outbox table's stream) -> Kinesis.

A batch of stream records comes from one stream shard, which Lambda's event does not name. So the relay
publishes every INSERT it is handed, in order (onward.pipeline.relay.publisher), and skips nothing by a position of its
own:
whatever Lambda redelivers (after a partial failure or a crash) is published again and absorbed by the
projector's version guard; nothing it delivers is ever left out. The answer names the first record not
done, so the event source resumes there (Lambda's partial batch response; the local poller does the same).

An event is passed on whole: a field this relay does not know (a newer writer's, same major) reaches the
projector as it was written. An event of a newer major is parked with the reason, for the upgraded relay to
re-drive (onward.domain.schema_versions).

Heartbeat slots (onward.pipeline.heartbeats) in the batch go to every events shard after the batch's events, with their
commit times (each no later than its beat's `vouches_until`); the relay then records them in its own
watermark over the whole outbox stream (onward.pipeline.checkpoints): every commit before it was published. That
watermark is where `recover` re-publishes from should the stream ever be trimmed past what was relayed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from pydantic import ValidationError

from onward.domain.clock import Clock, EpochMs, epoch_ms, iso, system_clock
from onward.domain.models import OutboxEvent
from onward.domain.progress import ProgressEvent
from onward.domain.schema_versions import NewerSchema
from onward.faults import fault_point
from onward.pipeline.checkpoints import OUTBOX_STREAM, RELAY_CONSUMER, CheckpointStore, Watermark
from onward.pipeline.heartbeats import Heartbeat, HeartbeatPart, heartbeat_part, is_heartbeat_image
from onward.pipeline.outbox import OutboxReader, event_from_image
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.poison import PARK_AFTER_FAILURES, FailureCounts
from onward.pipeline.relay.publisher import MAX_RECORD_BYTES, KinesisPublisher, encode
from onward.store.dynamo.progress_items import is_progress_image, progress_from_image

logger = Logger(service="onward-relay")

RECOVERY_MARGIN_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class StreamRecord:
    """One outbox-stream record, as the relay needs it (from a Lambda event or the Streams API)."""

    sequence_number: str
    event_name: str  # INSERT | MODIFY | REMOVE
    new_image: dict[str, Any] | None
    committed_at: EpochMs  # ApproximateCreationDateTime: when DynamoDB committed it (whole seconds on AWS)


@dataclass
class RelayOutcome:
    published: int = 0
    ignored: int = 0  # not INSERTs: the outbox is append-only, TTL removals are not events
    parked: int = 0
    heartbeats: int = 0  # heartbeat slots passed on to every events shard
    first_unpublished: str | None = None  # where the event source must resume; None: the batch is done
    retried_entries: int = 0
    requests: int = 0
    error_codes: dict[str, int] = field(default_factory=dict)


class Relay:
    def __init__(
        self,
        publisher: KinesisPublisher,
        checkpoints: CheckpointStore,
        parked: ParkedRecords,
        outbox: OutboxReader | None = None,
        clock: Clock = system_clock,
        failure_counts: FailureCounts | None = None,
    ) -> None:
        """`failure_counts`: each record's failed deliveries, to park an event that fails every publish
        (onward/pipeline/poison.py); without it such a record is left to the event source mapping."""
        self._publisher = publisher
        self._checkpoints = checkpoints
        self._parked = parked
        self._outbox = outbox
        self._clock = clock
        self._failure_counts = failure_counts

    def watermark(self) -> Watermark | None:
        """The relay's progress through the whole outbox stream (None before any heartbeat)."""
        return self._checkpoints.watermark(RELAY_CONSUMER, OUTBOX_STREAM)

    def relay(self, records: Sequence[StreamRecord]) -> RelayOutcome:
        """Publish one batch of one stream shard's records, in order; say where the source must resume. An event
        whose publish failed is counted (poison.py); on its PARK_AFTER_FAILURES-th failed delivery it is parked
        in full and the records after it are relayed: a record Kinesis keeps refusing holds back only its job
        (which `onward redrive` replays from the outbox)."""
        outcome = self._relay(records)
        while outcome.first_unpublished is not None:
            position = next(i for i, record in enumerate(records)
                            if record.sequence_number == outcome.first_unpublished)
            if not self._parks_poison(records[position]):
                break
            rest = self._relay(records[position + 1:])
            outcome = RelayOutcome(
                published=outcome.published + rest.published, ignored=outcome.ignored + rest.ignored,
                parked=outcome.parked + 1 + rest.parked, heartbeats=outcome.heartbeats + rest.heartbeats,
                first_unpublished=rest.first_unpublished,
                retried_entries=outcome.retried_entries + rest.retried_entries,
                requests=outcome.requests + rest.requests,
                error_codes={code: outcome.error_codes.get(code, 0) + rest.error_codes.get(code, 0)
                             for code in outcome.error_codes.keys() | rest.error_codes.keys()})
            records = records[position + 1:]
        return outcome

    def _parks_poison(self, record: StreamRecord) -> bool:
        """Count the failed delivery of an event's record; park it (its image, sequence number and commit time)
        on its PARK_AFTER_FAILURES-th. False for a heartbeat (not an event: it vouches, it is never parked), or
        when counting or parking failed (the mapping delivers it again)."""
        if self._failure_counts is None or record.new_image is None or is_heartbeat_image(record.new_image):
            return False
        try:
            failures = self._failure_counts.count(RELAY_CONSUMER, OUTBOX_STREAM, record.sequence_number)
            if failures < PARK_AFTER_FAILURES:
                return False
            event = event_from_image(record.new_image)
            self._parked.park(RELAY_CONSUMER, OUTBOX_STREAM, record.sequence_number,
                              json.dumps(record.new_image, sort_keys=True).encode(),
                              f"publishing failed {failures} deliveries in a row", job_id=event.job_id,
                              stream_record=json.dumps({"sequence_number": record.sequence_number,
                                                        "event_name": record.event_name,
                                                        "committed_at": iso(record.committed_at)}),
                              failures=failures)
        except Exception as error:  # noqa: BLE001 - the record stays failed; the mapping delivers it again
            logger.warning("counting or parking a failed record failed",
                           extra={"sequence_number": record.sequence_number, "error": type(error).__name__})
            return False
        logger.error("poison record parked: its event failed every publish",
                     extra={"sequence_number": record.sequence_number, "failures": failures})
        return True

    def _relay(self, records: Sequence[StreamRecord]) -> RelayOutcome:
        outcome = RelayOutcome()
        events: list[OutboxEvent | ProgressEvent] = []
        event_of: dict[int, int] = {}  # position in records -> position in events
        parts: dict[int, HeartbeatPart] = {}  # position in records -> heartbeat slot
        for position, record in enumerate(records):
            if record.event_name != "INSERT" or record.new_image is None:
                outcome.ignored += 1
                continue
            try:
                if is_heartbeat_image(record.new_image):
                    part = heartbeat_part(record.new_image)
                    if part is not None:
                        parts[position] = part
                    else:
                        outcome.ignored += 1  # a heartbeat of an older format: it vouches for nothing
                    continue
                # a running attempt's progress (onward.store.dynamo.progress_items) travels as a job's event does
                image = record.new_image
                read: OutboxEvent | ProgressEvent = (
                    progress_from_image(image) if is_progress_image(image) else event_from_image(image))
                event = read.model_copy(update={"committed_at": iso(record.committed_at)})
            except NewerSchema as error:  # an upgraded relay re-drives it (onward.domain.schema_versions)
                self._parked.park(RELAY_CONSUMER, OUTBOX_STREAM, record.sequence_number,
                                  repr(record.new_image).encode(), str(error))
                outcome.parked += 1
                continue
            except (ValidationError, KeyError, TypeError, ValueError, AttributeError) as error:
                # AttributeError: an image whose attribute values are not typed as DynamoDB types them
                self._parked.park(RELAY_CONSUMER, OUTBOX_STREAM, record.sequence_number,
                                  repr(record.new_image).encode(), f"invalid outbox image: {error}")
                outcome.parked += 1
                continue
            if len(encode(event)) + len(event.job_id) > MAX_RECORD_BYTES:
                self._parked.park(RELAY_CONSUMER, OUTBOX_STREAM, record.sequence_number,
                                  encode(event), "event larger than a Kinesis record (1 MiB)")
                outcome.parked += 1
                continue
            event_of[position] = len(events)
            events.append(event)

        stats = self._publisher.stats
        before = stats.requests, stats.retried_entries, dict(stats.error_codes)
        fault_point("relay.before_put_records")
        published = self._publisher.publish(events) if events else []
        # The slots go out after every event of the batch, only once they all did: they vouch for them.
        heartbeat = _heartbeat(records, parts)
        heartbeat_sent = heartbeat is not None and all(published) and self._publisher.publish_heartbeat(heartbeat)
        fault_point("relay.after_put_records")
        if heartbeat is not None and heartbeat_sent:
            outcome.heartbeats = len(parts)
            self._checkpoints.record_slots(RELAY_CONSUMER, OUTBOX_STREAM, heartbeat.through, heartbeat.slots,
                                           iso(self._clock()))
        outcome.requests = self._publisher.stats.requests - before[0]
        outcome.retried_entries = self._publisher.stats.retried_entries - before[1]
        outcome.published = sum(published)
        outcome.error_codes = {code: count - before[2].get(code, 0) for code, count in stats.error_codes.items()
                               if count > before[2].get(code, 0)}
        for position, record in enumerate(records):
            index = event_of.get(position)
            if (index is not None and not published[index]) or (position in parts and not heartbeat_sent):
                outcome.first_unpublished = record.sequence_number
                break
        logger.info("relayed", extra={"published": outcome.published, "heartbeat_slots": outcome.heartbeats,
                                      "first_unpublished": outcome.first_unpublished})
        return outcome

    def recover(self) -> int:
        """The stream was trimmed past records the relay may not have published: re-publish from the outbox
        every event committed since the relay's watermark (minus a margin; all of them without one), so
        nothing is lost. Duplicates are absorbed by the projector's version guard. Returns the number of
        events re-published. Only a relay given the outbox can (the local pollers' is: on AWS, a trimmed stream
        is the on-failure queue's and `onward replay`'s, so the relay function needs no read of the outbox)."""
        if self._outbox is None:
            raise ValueError("this relay was built without the outbox reader that recovery re-publishes from")
        watermark = self.watermark()
        if watermark is None or watermark.newest_event_at is None:
            since = "1970-01-01T00:00:00.000Z"
        else:
            since = iso(epoch_ms(watermark.newest_event_at) - RECOVERY_MARGIN_MS)
        events = sorted(self._outbox.window(since, iso(self._clock())), key=lambda e: (e.occurred_at, e.version))
        published = self._publisher.publish(events)
        logger.warning("re-published from the outbox after the stream was trimmed",
                       extra={"since": since, "events": sum(published)})
        if not all(published):
            raise RuntimeError(f"recovery: {len(published) - sum(published)} events unpublished")
        return len(events)


def _heartbeat(records: Sequence[StreamRecord], parts: dict[int, HeartbeatPart]) -> Heartbeat | None:
    """The batch's heartbeat slots as one heartbeat: per slot, its newest item's commit time, but no later
    than the item's beat may vouch for (onward.pipeline.heartbeats: a shard opened after the beat's listing may hold
    none of its slots)."""
    if not parts:
        return None
    through: dict[int, EpochMs] = {}
    for position, part in parts.items():
        vouched = min(records[position].committed_at, part.vouches_until)
        through[part.slot] = max(through.get(part.slot, 0), vouched)
    return Heartbeat(slots=max(part.slots for part in parts.values()), through=through)

"""The status projector: Kinesis events -> the status view, guarded by version.

Each event costs ONE conditional write: written when the view holds no version or an older one;
otherwise DynamoDB refuses and returns the view's item (ReturnValuesOnConditionCheckFailure=ALL_OLD), which
is enough to classify the refusal with no extra read: duplicate, stale, or conflict. A conflict (same
version, different content) is kept as its own item with both payloads and never overwrites the view.

The write is a PutItem, not an UpdateItem: a view item is derived from its event alone, so the whole item
is replaced; it costs the same write units and DynamoDB evaluates no update expression. That also keeps the
TTL right: a terminal status's row carries `expires_at` (onward.projection.view_expires_at), a newer
non-terminal one (a replay) replaces it without. Kept conflicts and parked records expire after the same
retention, counted from when they were written.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError
from pydantic import ValidationError

from onward.checkpoints import PROJECTOR_CONSUMER, CheckpointStore
from onward.clock import Clock, EpochMs, epoch_ms, iso, system_clock
from onward.dynamo import from_item, to_item
from onward.heartbeat import Heartbeat, SlotId, decode_heartbeat, merge_through
from onward.keys import ttl_after
from onward.models import EVENT_SCHEMA, OutboxEvent
from onward.parking import ParkedRecords
from onward.projection import ProjectionOutcome, classify, view_fields, view_item
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS

logger = Logger(service="onward-projector")



class UnreadableRecord(ValueError):
    """A record that is not a valid event of a schema this projector knows."""


def parse_record(data: bytes) -> OutboxEvent | Heartbeat:
    """A record's job event, or a pipeline heartbeat; UnreadableRecord says why it is neither."""
    try:
        payload = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableRecord(f"not JSON: {error}") from error
    if not isinstance(payload, dict):
        raise UnreadableRecord("not a JSON object")
    try:
        heartbeat = decode_heartbeat(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid heartbeat: {error.errors()[0]['msg']}") from error
    if heartbeat is not None:
        return heartbeat
    if payload.get("schema") != EVENT_SCHEMA:
        raise UnreadableRecord(f"unsupported schema {payload.get('schema')!r} (this projector reads {EVENT_SCHEMA})")
    try:
        return OutboxEvent.model_validate(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid event: {error.error_count()} errors: {error.errors()[0]['msg']}") from error


@dataclass
class BatchTally:
    """What one batch did; the handler turns it into metrics."""

    outcomes: dict[ProjectionOutcome, int] = field(default_factory=dict)
    parked: int = 0
    heartbeats: int = 0
    slots: int = 0  # K of the newest heartbeat seen
    through: dict[SlotId, EpochMs] = field(default_factory=dict)  # heartbeat slots: newest commit time each
    parents: tuple[str, ...] = ()  # the shard's parents, as its heartbeats name them
    lag_ms: list[int] = field(default_factory=list)

    def count(self, outcome: ProjectionOutcome) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


class OutcomeTotals:
    """Every outcome this process's batches projected, a crashed batch's included (what its metrics would
    have said had it lived): read by local drills and the soak audit; on Lambda the metrics are the record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, tally: BatchTally) -> None:
        with self._lock:
            self._counts.update({outcome.value: count for outcome, count in tally.outcomes.items()})
            self._counts["parked"] += tally.parked

    def snapshot(self) -> dict[str, int]:
        """Counts by outcome (applied, duplicate, stale, conflict) and parked, zero when none."""
        with self._lock:
            return {name: self._counts.get(name, 0) for name in [*(o.value for o in ProjectionOutcome), "parked"]}


class StatusProjector:
    def __init__(
        self,
        client: Any,
        status_table: str,
        conflicts_table: str,
        checkpoints: CheckpointStore,
        parked: ParkedRecords,
        clock: Clock = system_clock,
        retention_s: int = DEFAULT_JOB_RETENTION_DAYS * DAY_S,
    ) -> None:
        """`retention_s`: the job retention (Settings.job_retention_s), the TTL of terminal view rows and of
        kept conflicts."""
        self._db = client
        self._status = status_table
        self._conflicts = conflicts_table
        self._checkpoints = checkpoints
        self._parked = parked
        self._clock = clock
        self._retention_s = retention_s

    def project(self, event: OutboxEvent) -> ProjectionOutcome:
        """Write the view if `event` is newer than what it holds; one request on every common path."""
        item = to_item(view_item(event, iso(self._clock()), self._retention_s))
        try:
            self._db.put_item(
                TableName=self._status,
                Item=item,
                ConditionExpression="attribute_not_exists(job_id) OR #version < :version",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues={":version": {"N": str(event.version)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return ProjectionOutcome.APPLIED
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            held = from_item(error.response.get("Item", {}))
        outcome = classify(held.get("version"), held.get("digest"), event)
        if outcome is ProjectionOutcome.CONFLICT:
            self._keep_conflict(event, held)
        return outcome

    def _keep_conflict(self, event: OutboxEvent, held: dict[str, Any]) -> None:
        incoming = view_fields(event)
        now = self._clock()
        self._db.put_item(
            TableName=self._conflicts,
            Item={
                "job_id": {"S": event.job_id},
                "conflict_id": {"S": f"{event.version:012d}#{incoming['digest']}"},
                "version": {"N": str(event.version)},
                "view_payload": {"S": json.dumps(held, sort_keys=True, default=str)},
                "incoming_payload": {"S": event.model_dump_json(by_alias=True)},
                "detected_at": {"S": iso(now)},
                "expires_at": {"N": str(ttl_after(now, self._retention_s))},
            },
        )
        logger.error("same-version conflict kept apart; the view is unchanged",
                     extra={"job_id": event.job_id, "version": event.version, "view_digest": held.get("digest"),
                            "incoming_digest": incoming["digest"]})

    def handle_record(self, shard_id: str, sequence_number: str, data: bytes, tally: BatchTally) -> None:
        """Project one record; an unreadable one is parked with its raw bytes and the reason (the shard
        moves on). DynamoDB errors propagate: the batch stops there and the record is retried."""
        try:
            event = parse_record(data)
        except UnreadableRecord as error:
            self._parked.park(PROJECTOR_CONSUMER, shard_id, sequence_number, data, str(error))
            tally.parked += 1
            logger.warning("record parked", extra={"shard_id": shard_id, "sequence_number": sequence_number,
                                                   "reason": str(error)})
            return
        if isinstance(event, Heartbeat):  # its slots are projected up to their times; the view is untouched
            tally.heartbeats += 1
            merge_through(tally.through, event.through)
            tally.slots = max(tally.slots, event.slots)
            tally.parents = event.parents or tally.parents
            return
        outcome = self.project(event)
        tally.count(outcome)
        if outcome is ProjectionOutcome.APPLIED:
            tally.lag_ms.append(self._clock() - epoch_ms(event.committed_at or event.occurred_at))

    def finish_batch(self, shard_id: str, tally: BatchTally) -> None:
        """Record the heartbeat slots the batch projected in the shard's watermark (and the shard's parents,
        once a heartbeat named them: they are drained, their watermarks retire). Events alone move nothing:
        one partition's event says nothing of the others'."""
        if tally.through:
            self._checkpoints.record_slots(PROJECTOR_CONSUMER, shard_id, tally.through, tally.slots,
                                           iso(self._clock()), parents=tally.parents)

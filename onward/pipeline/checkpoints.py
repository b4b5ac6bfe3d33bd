"""Positions of the stream consumers, in the checkpoint table.

- Watermarks (onward.pipeline.heartbeats): per slot of the pipeline heartbeats, the newest commit time a consumer has
  passed on; the watermark is the oldest slot's. The relay keeps one for the whole outbox stream
  (`RELAY_CONSUMER`, `OUTBOX_STREAM`: Lambda's events do not say which stream shard a batch came from, and
  the slots need not know), which says where to re-publish from if the stream was ever trimmed past it;
  the projector keeps one per Kinesis shard (whose events do name it), with the shard's parents once a
  heartbeat named them.
- Positions by sequence number (`Checkpoint`): the local event-source mappings' own, per shard they read,
  as Lambda keeps its mappings' positions.

Sequence numbers are decimal strings of up to 56 digits (Kinesis), beyond DynamoDB's 38-digit numbers:
they are stored zero-padded so that string order is numeric order, and compared as integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs, iso

SEQUENCE_WIDTH = 80
RELAY_CONSUMER = "relay"  # its watermark over the whole outbox stream
PROJECTOR_CONSUMER = "projector"  # its watermarks, one per Kinesis shard
OUTBOX_STREAM = "outbox-stream"  # the relay's watermark's key: the stream, never one of its shards
SLOT_PREFIX = "t"  # slot i's newest commit time (epoch ms) is the attribute t<i>
SLOTS_PER_UPDATE = 150  # an update expression may be at most 4 KB


def sequence_key(sequence_number: str | int) -> str:
    return f"{int(sequence_number):0{SEQUENCE_WIDTH}d}"


@dataclass(frozen=True)
class Checkpoint:
    shard_id: str
    sequence_number: str
    event_time: str  # when the position was recorded


@dataclass(frozen=True)
class Watermark:
    """A consumer's progress through one stream (or one shard): every commit before `newest_event_at`
    has passed it. None while some slot has not been heard from yet: nothing can be vouched for then."""

    shard_id: str
    newest_event_at: str | None  # the oldest heartbeat slot's newest commit time passed on
    processed_at: str  # when the consumer last passed a heartbeat on
    parents: tuple[str, ...] = ()  # shards this one was resharded from: drained before it was read
    slots: int = 0  # K of the newest beat seen


class CheckpointStore:
    """Reads and advances consumer positions (a position only ever moves forward) and watermarks."""

    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def checkpoint(self, consumer: str, shard_id: str) -> Checkpoint | None:
        item = self._get(consumer, shard_id)
        if item is None or "sequence_number" not in item:
            return None
        return Checkpoint(shard_id, str(int(item["sequence_number"]["S"])), item["event_time"]["S"])

    def advance(self, consumer: str, checkpoint: Checkpoint) -> bool:
        """Move the checkpoint forward to `checkpoint`; False when it was already there or beyond."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(consumer, checkpoint.shard_id),
                UpdateExpression="SET sequence_number = :s, event_time = :t",
                ConditionExpression="attribute_not_exists(sequence_number) OR sequence_number < :s",
                ExpressionAttributeValues={
                    ":s": {"S": sequence_key(checkpoint.sequence_number)}, ":t": {"S": checkpoint.event_time},
                },
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    def watermark(self, consumer: str, shard_id: str) -> Watermark | None:
        item = self._get(consumer, shard_id)
        return None if item is None or "slots" not in item else _watermark(item)

    def watermarks(self, consumer: str) -> list[Watermark]:
        """Every watermark of `consumer`, read consistently (one Query, page after page)."""
        request: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "consumer = :c",
            "ExpressionAttributeValues": {":c": {"S": consumer}}, "ConsistentRead": True,
        }
        found: list[Watermark] = []
        while True:
            page = self._db.query(**request)
            found += [_watermark(item) for item in page["Items"] if "slots" in item]
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def record_slots(self, consumer: str, shard_id: str, through: Mapping[int, EpochMs], slots: int,
                     processed_at: str, parents: tuple[str, ...] = ()) -> None:
        """Record heartbeat slots passed on: each slot's newest commit time, K, when, and the shard's parents
        when known. One UpdateItem per SLOTS_PER_UPDATE slots. A slot is set, not raised: a redelivered old
        heartbeat can only make the watermark read older until the next beat."""
        ordered = sorted(through.items())
        for start in range(0, max(1, len(ordered)), SLOTS_PER_UPDATE):
            chunk = ordered[start:start + SLOTS_PER_UPDATE]
            values: dict[str, dict[str, Any]] = {":k": {"N": str(slots)}, ":p": {"S": processed_at}}
            sets = ["slots = :k", "processed_at = :p"]
            for slot, at in chunk:
                sets.append(f"{SLOT_PREFIX}{slot} = :{SLOT_PREFIX}{slot}")
                values[f":{SLOT_PREFIX}{slot}"] = {"N": str(at)}
            if parents:
                sets.append("parents = :ps")
                values[":ps"] = {"SS": sorted(parents)}
            self._db.update_item(TableName=self._table, Key=self._key(consumer, shard_id),
                                 UpdateExpression="SET " + ", ".join(sets), ExpressionAttributeValues=values)

    def _get(self, consumer: str, shard_id: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._db.get_item(TableName=self._table, Key=self._key(consumer, shard_id),
                                                         ConsistentRead=True).get("Item")
        return item

    @staticmethod
    def _key(consumer: str, shard_id: str) -> dict[str, Any]:
        return {"consumer": {"S": consumer}, "shard_id": {"S": shard_id}}


def _watermark(item: dict[str, Any]) -> Watermark:
    slots = int(item["slots"]["N"])
    marks = [item.get(f"{SLOT_PREFIX}{slot}") for slot in range(slots)]
    newest = None if not marks or None in marks else iso(min(int(mark["N"]) for mark in marks if mark))
    return Watermark(item["shard_id"]["S"], newest, item["processed_at"]["S"],
                     tuple(sorted(item.get("parents", {}).get("SS", []))), slots)

"""Positions of the stream consumers, in the checkpoint table.

- The relay's checkpoint per outbox-stream shard: the last sequence number published, and the event time
  it had reached (to re-publish from the outbox if the stream was trimmed past it).
- The projector's watermark per Kinesis shard: the newest event time projected and when, and the shard's
  parents once a heartbeat named them (onward.heartbeat).

Sequence numbers are decimal strings of up to 56 digits (Kinesis), beyond DynamoDB's 38-digit numbers:
they are stored zero-padded so that string order is numeric order, and compared as integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

SEQUENCE_WIDTH = 80
RELAY_CONSUMER = "relay"  # its checkpoints
PROJECTOR_CONSUMER = "projector"  # its watermarks


def sequence_key(sequence_number: str | int) -> str:
    return f"{int(sequence_number):0{SEQUENCE_WIDTH}d}"


@dataclass(frozen=True)
class Checkpoint:
    shard_id: str
    sequence_number: str
    event_time: str  # occurred_at of the last event published

    def covers(self, sequence_number: str) -> bool:
        """True for a record at or before this checkpoint: already published."""
        return int(sequence_number) <= int(self.sequence_number)


@dataclass(frozen=True)
class Watermark:
    shard_id: str
    newest_event_at: str  # the newest occurred_at projected from this shard
    processed_at: str  # when the projector last finished a batch from this shard
    parents: tuple[str, ...] = ()  # shards this one was resharded from: drained before it was read


class CheckpointStore:
    """Reads and advances consumer positions; a position only ever moves forward."""

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

    def checkpoints(self, consumer: str) -> list[Checkpoint]:
        items = self._db.query(
            TableName=self._table,
            KeyConditionExpression="consumer = :c",
            ExpressionAttributeValues={":c": {"S": consumer}},
            ConsistentRead=True,
        )["Items"]
        return [Checkpoint(i["shard_id"]["S"], str(int(i["sequence_number"]["S"])), i["event_time"]["S"])
                for i in items if "sequence_number" in i]

    def watermark(self, consumer: str, shard_id: str) -> Watermark | None:
        item = self._get(consumer, shard_id)
        if item is None or "newest_event_at" not in item:
            return None
        return _watermark(item)

    def watermarks(self, consumer: str) -> list[Watermark]:
        items = self._db.query(
            TableName=self._table,
            KeyConditionExpression="consumer = :c",
            ExpressionAttributeValues={":c": {"S": consumer}},
        )["Items"]
        return [_watermark(i) for i in items if "newest_event_at" in i]

    def raise_watermark(self, consumer: str, shard_id: str, newest_event_at: str, processed_at: str,
                        parents: tuple[str, ...] = ()) -> None:
        """Record a finished batch: processed_at always, newest_event_at only forward, and the shard's
        parents when known. One request, two when the batch held only older events (a replay)."""
        key = self._key(consumer, shard_id)
        values: dict[str, dict[str, str | list[str]]] = {":p": {"S": processed_at}}
        also = ""
        if parents:
            values[":ps"] = {"SS": sorted(parents)}
            also = ", parents = :ps"
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"SET processed_at = :p, newest_event_at = :t{also}",
                ConditionExpression="attribute_not_exists(newest_event_at) OR newest_event_at <= :t",
                ExpressionAttributeValues={**values, ":t": {"S": newest_event_at}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"SET processed_at = :p{also}",
                ExpressionAttributeValues=values,
            )

    def _get(self, consumer: str, shard_id: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._db.get_item(TableName=self._table, Key=self._key(consumer, shard_id),
                                                         ConsistentRead=True).get("Item")
        return item

    @staticmethod
    def _key(consumer: str, shard_id: str) -> dict[str, Any]:
        return {"consumer": {"S": consumer}, "shard_id": {"S": shard_id}}


def _watermark(item: dict[str, Any]) -> Watermark:
    return Watermark(item["shard_id"]["S"], item["newest_event_at"]["S"], item["processed_at"]["S"],
                     tuple(sorted(item.get("parents", {}).get("SS", []))))

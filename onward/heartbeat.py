"""Pipeline heartbeats: proof that the event path is moving while no job changes.

A status is shown with `view_lag_s`, an upper bound on how far behind the view is, measured from each
Kinesis shard's newest projected commit time (onward.freshness). With no traffic that bound would grow
without end and an idle, healthy system would read as delayed. So, on a schedule, a heartbeat is written to
the outbox like any commit; the relay publishes it to EVERY shard of the events stream after the events
before it, and the projector raises each shard's watermark to the heartbeat's time without touching the
view. After a reshard, each copy also names its shard's parents: Kinesis consumers read a child shard only
once its parents are drained, so the parents' watermarks (frozen at their last event) stop counting then
(onward.freshness). A heartbeat seen on a shard therefore proves the shard was projected up to that moment; a stopped
relay or projector stops the heartbeats too, and the lag grows as it should.

Heartbeat items live under one partition (`job_id = HEARTBEAT`, version = epoch ms) with no `time_bucket`
(so replay windows never see them) and a short TTL. `OutboxReader` skips them.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict

from onward.clock import Clock, EpochMs, iso, system_clock
from onward.dynamo import Item

HEARTBEAT_PARTITION = "HEARTBEAT"
HEARTBEAT_KIND: Final = "heartbeat"
HEARTBEAT_TTL_S = 3600


class Heartbeat(BaseModel):
    """One heartbeat as it travels through the outbox stream and Kinesis."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["heartbeat"] = HEARTBEAT_KIND
    occurred_at: str  # the moment it was committed to the outbox
    parents: tuple[str, ...] = ()  # on Kinesis: the parent shards of the shard it was put on (after a reshard)


def is_heartbeat_image(image: Item) -> bool:
    """Whether an outbox item (DynamoDB wire format) is a heartbeat rather than a job event."""
    kind: str | None = image.get("kind", {}).get("S")
    return kind == HEARTBEAT_KIND


def heartbeat_from_image(image: Item) -> Heartbeat:
    return Heartbeat(occurred_at=image["occurred_at"]["S"])


def encode_heartbeat(heartbeat: Heartbeat) -> bytes:
    """The record's data; `parents` only when there are some (a stream never resharded keeps the format)."""
    return heartbeat.model_dump_json(exclude=None if heartbeat.parents else {"parents"}).encode()


def decode_heartbeat(payload: dict[str, Any]) -> Heartbeat | None:
    """The heartbeat a decoded Kinesis record holds, or None when the record is not a heartbeat."""
    if payload.get("kind") != HEARTBEAT_KIND:
        return None
    return Heartbeat.model_validate(payload)


def heartbeat_item(at: EpochMs) -> Item:
    return {
        "job_id": {"S": HEARTBEAT_PARTITION},
        "version": {"N": str(at)},
        "kind": {"S": HEARTBEAT_KIND},
        "occurred_at": {"S": iso(at)},
        "expires_at": {"N": str(at // 1000 + HEARTBEAT_TTL_S)},
    }


class HeartbeatEmitter:
    """Writes heartbeats to the outbox table (one PutItem each)."""

    def __init__(self, client: Any, outbox_table: str, clock: Clock = system_clock) -> None:
        self._db = client
        self._table = outbox_table
        self._clock = clock

    def emit(self) -> Heartbeat | None:
        """Commit one heartbeat now; None if another emitter committed one in the same millisecond."""
        at = self._clock()
        try:
            self._db.put_item(TableName=self._table, Item=heartbeat_item(at),
                              ConditionExpression="attribute_not_exists(version)")
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return Heartbeat(occurred_at=iso(at))

"""Writing pipeline heartbeats (onward.heartbeat) into the outbox table: one item per slot, K slots by the count
of the outbox stream's open shards."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from onward.clock import Clock, EpochMs, iso, system_clock
from onward.heartbeat import heartbeat_items, slot_count

BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit
SHARD_COUNT_TTL_MS = 60_000

logger = Logger(service="onward-heartbeat")


@dataclass(frozen=True)
class Beat:
    """One beat written: when, and over how many slots."""

    occurred_at: str
    slots: int


class OutboxShardCount:
    """How many shards of the outbox table's stream are open (DescribeTable, then DescribeStream page by
    page), read at most once a minute."""

    def __init__(self, dynamodb: Any, streams: Any, outbox_table: str, clock: Clock = system_clock) -> None:
        self._db = dynamodb
        self._streams = streams
        self._table = outbox_table
        self._clock = clock
        self._lock = threading.Lock()
        self._known: tuple[EpochMs, int] | None = None

    def __call__(self) -> int:
        with self._lock:
            if self._known is None or self._clock() - self._known[0] > SHARD_COUNT_TTL_MS:
                self._known = (self._clock(), self._count())
            return self._known[1]

    def _count(self) -> int:
        arn = self._db.describe_table(TableName=self._table)["Table"]["LatestStreamArn"]
        request: dict[str, Any] = {"StreamArn": arn}
        open_shards = 0
        while True:
            description = self._streams.describe_stream(**request)["StreamDescription"]
            open_shards += sum(1 for shard in description["Shards"]
                               if "EndingSequenceNumber" not in shard["SequenceNumberRange"])
            if not description.get("LastEvaluatedShardId"):
                return max(1, open_shards)
            request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]


class HeartbeatEmitter:
    """Writes beats to the outbox table: K items by BatchWriteItem (25 per request)."""

    def __init__(self, client: Any, outbox_table: str, clock: Clock = system_clock,
                 stream_shards: Callable[[], int] = lambda: 1, sleep: Callable[[float], None] = time.sleep) -> None:
        self._db = client
        self._table = outbox_table
        self._clock = clock
        self._stream_shards = stream_shards
        self._sleep = sleep

    def emit(self) -> Beat:
        """Commit one beat now. A slot DynamoDB leaves unprocessed after a few tries is left out: its
        consumers' watermarks then wait for the next beat, which can only make them read older."""
        at = self._clock()
        items = heartbeat_items(at, slot_count(self._stream_shards()))
        for start in range(0, len(items), BATCH_WRITE_ITEMS):
            self._write([{"PutRequest": {"Item": item}} for item in items[start:start + BATCH_WRITE_ITEMS]])
        return Beat(iso(at), len(items))

    def _write(self, requests: list[dict[str, Any]]) -> None:
        for round_ in range(5):
            unprocessed = self._db.batch_write_item(RequestItems={self._table: requests}).get("UnprocessedItems", {})
            requests = unprocessed.get(self._table, [])
            if not requests:
                return
            self._sleep(0.05 * 2 ** round_)
        logger.warning("heartbeat slots left unwritten", extra={"slots": len(requests)})

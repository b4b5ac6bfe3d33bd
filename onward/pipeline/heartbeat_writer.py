"""Writing pipeline heartbeats (onward.pipeline.heartbeats) into the outbox table: a listing of the outbox stream's open
shards for every beat, then one item per slot of the beat it plans (onward.pipeline.heartbeats.plan_beat).

Requests per beat: DescribeTable (the stream's ARN, read each time so a re-enabled stream is followed),
DescribeStream page by page (100 shards a page, closed ones of the last 24 h included), and BatchWriteItem
for every 25 slots: for 4 open shards 1 + 1 + 3, for 32 (and about 200 listed) 1 + 2 + 21. A listing is never
reused: a beat sized from an older one would vouch only up to that listing, and a count kept for a minute
left shards that had opened since without a slot (issue 32)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from onward.domain.clock import Clock, EpochMs, iso, system_clock
from onward.pipeline.heartbeats import AWS_BEAT_SLACK_MS, heartbeat_items, plan_beat

BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit

logger = Logger(service="onward-heartbeat")


@dataclass(frozen=True)
class Beat:
    """One beat written: when, over how many slots, and the latest commit time it may vouch for."""

    occurred_at: str
    slots: int
    vouches_until: str


@dataclass(frozen=True)
class ShardListing:
    """The outbox stream's open shards as one listing counted them, and when (the emitter's clock) it began."""

    listed_at: EpochMs
    open_shards: int


class OutboxStreamListing:
    """Lists the open shards of the outbox table's stream (DescribeTable, then DescribeStream page by page),
    every time it is called."""

    def __init__(self, dynamodb: Any, streams: Any, outbox_table: str, clock: Clock = system_clock) -> None:
        self._db = dynamodb
        self._streams = streams
        self._table = outbox_table
        self._clock = clock

    def __call__(self) -> ShardListing:
        listed_at = self._clock()  # before the first request: a shard opened later may be missing, not earlier
        arn = self._db.describe_table(TableName=self._table)["Table"]["LatestStreamArn"]
        request: dict[str, Any] = {"StreamArn": arn}
        open_shards = 0
        while True:
            description = self._streams.describe_stream(**request)["StreamDescription"]
            open_shards += sum(1 for shard in description["Shards"]
                               if "EndingSequenceNumber" not in shard["SequenceNumberRange"])
            if not description.get("LastEvaluatedShardId"):
                return ShardListing(listed_at, max(1, open_shards))
            request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]


class HeartbeatEmitter:
    """Writes beats to the outbox table: a listing, then K items by BatchWriteItem (25 per request)."""

    def __init__(self, client: Any, outbox_table: str, listing: Callable[[], ShardListing], *,
                 clock: Clock = system_clock, slack_ms: int = AWS_BEAT_SLACK_MS,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._db = client
        self._table = outbox_table
        self._listing = listing
        self._clock = clock
        self._slack_ms = slack_ms
        self._sleep = sleep

    def emit(self) -> Beat:
        """Commit one beat now. A slot DynamoDB leaves unprocessed after a few tries is left out: its
        consumers' watermarks then wait for the next beat, which can only make them read older."""
        listing = self._listing()
        plan = plan_beat(listing.open_shards, listing.listed_at, self._slack_ms)
        at = self._clock()
        items = heartbeat_items(at, plan)
        for start in range(0, len(items), BATCH_WRITE_ITEMS):
            self._write([{"PutRequest": {"Item": item}} for item in items[start:start + BATCH_WRITE_ITEMS]])
        return Beat(iso(at), len(items), iso(plan.vouches_until))

    def _write(self, requests: list[dict[str, Any]]) -> None:
        for round_ in range(5):
            unprocessed = self._db.batch_write_item(RequestItems={self._table: requests}).get("UnprocessedItems", {})
            requests = unprocessed.get(self._table, [])
            if not requests:
                return
            self._sleep(0.05 * 2 ** round_)
        logger.warning("heartbeat slots left unwritten", extra={"slots": len(requests)})

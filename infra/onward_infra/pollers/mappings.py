"""Lambda's event source mappings, on this machine: the relay's (the outbox table's DynamoDB stream,
`OutboxStreamPoller`) and the projector's (the events stream on Kinesis, `EventsStreamPoller`).

Each poller reads its source through the real AWS API of the embedded endpoint (DynamoDB Streams, Kinesis),
builds events of the exact shape Lambda sends, invokes the SAME handler that runs on AWS, and honours its
partial batch response the way Lambda does: the next batch starts at the lowest failed sequence number; with the
mapping's `handling` (template.yaml's BisectBatchOnFunctionError, MaximumRetryAttempts, MaximumRecordAgeInSeconds)
a failed batch is bisected, retried a bounded number of times, and old records are given up (failures.py).
How shards are polled, backed off and their positions kept: shards.py; how records are read: records.py.
"""


from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, RELAY_CONSUMER, CheckpointStore
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.relay.relay import Relay
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.pollers.failures import FailureHandling, OnFailure
from onward_infra.pollers.records import (
    RecordReader,
    dynamodb_lambda_record,
    dynamodb_record_fault,
    kinesis_lambda_record,
    kinesis_record_arrival,
    kinesis_record_fault,
    kinesis_record_sequence,
    stream_record_arrival,
    stream_record_sequence,
)
from onward_infra.pollers.shards import (
    AFTER_SEQUENCE_NUMBER,
    POSITION_EVERY_S,
    TRIM_HORIZON,
    Monotonic,
    ShardBackoff,
    ShardCursor,
    ShardPoller,
    StreamPosition,
    error_code,
)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

INSERT = "INSERT"
DEFAULT_BACKOFF = ShardBackoff()
RELIST_EVERY_S = 3.0  # the outbox poller lists the stream's shards again at least this often while busy
NO_FAILURE_HANDLING = FailureHandling()  # Lambda's defaults: no bisection, retried until the records expire



def failed_sequence(response: dict[str, Any]) -> str | None:
    failures = response.get("batchItemFailures") or []
    return min((f["itemIdentifier"] for f in failures), key=int) if failures else None


class OutboxStreamPoller(ShardPoller):
    """The relay's event source: the outbox table's DynamoDB stream, INSERT records only (the filter
    template.yaml puts on the mapping), batches of `batch_size`. Its position per shard (what Lambda's
    mapping keeps for itself) is kept in the checkpoint table as `consumer`; when the stream was trimmed
    past it, the relay re-publishes from the outbox first. An unreadable INSERT is parked in `parked`
    (source "relay"); without `parked` its shard stays on it, backed off.

    Every shard is read, as Lambda's mapping reads them: the shards DescribeStream lists (page by page), a
    child only once its parent is drained (listed as closed, and read to its end: GetRecords answered no
    NextShardIterator), so that an item's records from before a split reach the handler before those after
    it. The events name the stream, never the shard (eventSourceARN is the stream's ARN).

    The listing is kept between polls, not asked for in every one: the stream is described again when a
    shard was read to its end (a split or a rollover closed it: its children are listed now), when a
    shard failed (it may have been trimmed away), at least every `relist_every_s` while polls keep
    finding records (an open shard's split, and any shard added, is seen while its parent is still being
    read), and before a poll answers that it found nothing: a poll that takes no record has read every
    shard of a listing made during it, so polling until idle still means the whole stream is read."""

    # The records the mapping's filter lets through (template.yaml: INSERT), what they are for, and the function.
    EVENT_NAMES: frozenset[str] = frozenset({INSERT})
    SOURCE = RELAY_CONSUMER
    FUNCTION_NAME = "onward-relay"

    def __init__(self, streams: Any, stream_arn: str, handler: Handler, relay: Relay | None,
                 positions: CheckpointStore, batch_size: int = 100, consumer: str = "local-mapping:relay", *,
                 parked: ParkedRecords | None = None, backoff: ShardBackoff = DEFAULT_BACKOFF,
                 monotonic: Monotonic = time.monotonic, relist_every_s: float = RELIST_EVERY_S,
                 position_every_s: float = POSITION_EVERY_S, concurrency: int = 1,
                 handling: FailureHandling = NO_FAILURE_HANDLING, on_failure: OnFailure | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        super().__init__(RecordReader(streams, stream_record_sequence, dynamodb_record_fault), self.SOURCE,
                         stream_arn, batch_size, parked, backoff, monotonic, positions, consumer, position_every_s,
                         concurrency, relist_every_s, handling, on_failure, wall)
        self._streams = streams
        self._arn = stream_arn
        self._handler = handler
        self._relay = relay  # None: nothing to recover when the stream was trimmed past the position

    def _iterator(self, shard_id: str, kind: str, sequence_number: str | None = None) -> str:
        request = {"StreamArn": self._arn, "ShardId": shard_id, "ShardIteratorType": kind}
        if sequence_number is not None:
            request["SequenceNumber"] = sequence_number
        iterator: str = self._streams.get_shard_iterator(**request)["ShardIterator"]
        return iterator

    def _open(self, shard_id: str, position: StreamPosition | None) -> str:
        if position is None:
            stored = self._positions.checkpoint(self._consumer, shard_id)
            if stored is None:
                return self._iterator(shard_id, TRIM_HORIZON)
            position = StreamPosition(AFTER_SEQUENCE_NUMBER, stored.sequence_number)
        try:
            return self._iterator(shard_id, position.iterator_type, position.sequence_number)
        except ClientError as error:
            if error_code(error) != "TrimmedDataAccessException":
                raise
            if self._relay is not None:
                self._relay.recover()
            return self._iterator(shard_id, TRIM_HORIZON)

    def _list_shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream: DescribeStream, page after page (ExclusiveStartShardId)."""
        shards: list[dict[str, Any]] = []
        request: dict[str, Any] = {"StreamArn": self._arn}
        while True:
            description = self._streams.describe_stream(**request)["StreamDescription"]
            shards += description["Shards"]
            last = description.get("LastEvaluatedShardId")
            if not last:
                return shards
            request["ExclusiveStartShardId"] = last

    def _poll_shard(self, shard_id: str, cursor: ShardCursor) -> int:
        batch = self._read(shard_id, cursor)
        inserts = [r for r in batch.records if r["eventName"] in self.EVENT_NAMES]
        if inserts:
            def invoke(records: list[dict[str, Any]]) -> str | None:
                return failed_sequence(self._handler(
                    {"Records": [dynamodb_lambda_record(r, self._arn) for r in records]},
                    LocalLambdaContext(self.FUNCTION_NAME)))

            if not self._deliver(shard_id, cursor, inserts, stream_record_sequence, stream_record_arrival, invoke):
                return len(inserts)
        taken = len(inserts)
        if batch.unreadable is not None:
            if batch.unreadable.event_name in self.EVENT_NAMES:  # the mapping's filter drops the others unread
                self._park(shard_id, batch.unreadable)
                taken += 1
            self._remember(shard_id, cursor, batch.unreadable.sequence_number)
            self._move(shard_id, cursor, StreamPosition(AFTER_SEQUENCE_NUMBER,
                                                        batch.unreadable.sequence_number))
            return taken
        if batch.records:
            last = stream_record_sequence(batch.records[-1])
            if inserts:
                self._remember(shard_id, cursor, last)
            cursor.resume = StreamPosition(AFTER_SEQUENCE_NUMBER, last)
        cursor.iterator = batch.next_iterator
        if batch.next_iterator is None:
            if shard_id in self._listed_closed:  # a closed shard, read to its end
                self._drained.add(shard_id)
            # Either way the listing is behind: a drained shard's children may be missing from it, and a
            # shard that ended while listed open is closed now (it drains once a listing says so).
            self._relist = True
        return taken



class JobsStreamPoller(OutboxStreamPoller):
    """The fence reconciler's event source (issue 39): the jobs table's DynamoDB stream (NEW_AND_OLD_IMAGES),
    its INSERT and MODIFY records (removals are TTL's or the store's own: nothing to reconcile), read as the
    outbox's is; no relay to recover when trimmed (the reconciler starts again at the trim horizon, and the
    adoption pass holds what it missed)."""

    EVENT_NAMES = frozenset({INSERT, "MODIFY"})
    SOURCE = "fence-reconciler"
    FUNCTION_NAME = "onward-fence-reconciler"


class EventsStreamPoller(ShardPoller):
    """The projector's event source: every shard of the Kinesis events stream, batches of `batch_size`.
    Its position (what Lambda's mapping keeps for itself) is kept in the checkpoint table as `consumer`.
    An unreadable record is parked in `parked` (source "projector"); without `parked` its shard stays on
    it, backed off, while the other shards go on.

    The shards ListShards lists are kept between polls as the outbox poller keeps its listing (listed again
    when a shard ended or failed, every `relist_every_s` while polls find records, and before a poll
    answers that it found nothing): a ListShards per poll was about a third of the projector's requests
    in a burst, and ListShards is throttled per stream on AWS."""

    def __init__(self, kinesis: Any, stream_name: str, handler: Handler, positions: CheckpointStore,
                 batch_size: int = 100, consumer: str = "local-mapping:projector", *,
                 parked: ParkedRecords | None = None, backoff: ShardBackoff = DEFAULT_BACKOFF,
                 monotonic: Monotonic = time.monotonic, relist_every_s: float = RELIST_EVERY_S,
                 position_every_s: float = POSITION_EVERY_S, concurrency: int = 1,
                 handling: FailureHandling = NO_FAILURE_HANDLING, on_failure: OnFailure | None = None,
                 wall: Callable[[], float] = time.time, function_name: str = "onward-projector") -> None:
        super().__init__(RecordReader(kinesis, kinesis_record_sequence, kinesis_record_fault),
                         PROJECTOR_CONSUMER, stream_name, batch_size, parked, backoff, monotonic, positions,
                         consumer, position_every_s, concurrency, relist_every_s, handling, on_failure, wall)
        self._kinesis = kinesis
        self._handler = handler
        self._function_name = function_name  # the Lambda context's, as the function's logs carry it
        self._arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]

    def _open(self, shard_id: str, position: StreamPosition | None) -> str:
        request: dict[str, Any] = {"StreamName": self._stream, "ShardId": shard_id}
        if position is None:
            stored = self._positions.checkpoint(self._consumer, shard_id)
            position = StreamPosition(AFTER_SEQUENCE_NUMBER, stored.sequence_number) if stored else None
        if position is None:
            request["ShardIteratorType"] = TRIM_HORIZON
        else:
            request |= {"ShardIteratorType": position.iterator_type,
                        "StartingSequenceNumber": position.sequence_number}
        iterator: str = self._kinesis.get_shard_iterator(**request)["ShardIterator"]
        return iterator

    def _list_shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream: ListShards, page after page (NextToken)."""
        answer = self._kinesis.list_shards(StreamName=self._stream)
        shards: list[dict[str, Any]] = answer["Shards"]
        while answer.get("NextToken"):
            answer = self._kinesis.list_shards(NextToken=answer["NextToken"])
            shards += answer["Shards"]
        return shards

    def _poll_shard(self, shard_id: str, cursor: ShardCursor) -> int:
        batch = self._read(shard_id, cursor)
        taken = 0
        if batch.records:
            def invoke(records: list[dict[str, Any]]) -> str | None:
                return failed_sequence(self._handler(
                    {"Records": [kinesis_lambda_record(r, shard_id, self._arn) for r in records]},
                    LocalLambdaContext(self._function_name)))

            taken = len(batch.records)
            if not self._deliver(shard_id, cursor, batch.records, kinesis_record_sequence, kinesis_record_arrival,
                                 invoke):
                return taken
            self._remember(shard_id, cursor, kinesis_record_sequence(batch.records[-1]))
        if batch.unreadable is not None:
            self._park(shard_id, batch.unreadable)
            self._remember(shard_id, cursor, batch.unreadable.sequence_number)
            self._move(shard_id, cursor, StreamPosition(AFTER_SEQUENCE_NUMBER,
                                                        batch.unreadable.sequence_number))
            return taken + 1
        if batch.records:
            cursor.resume = StreamPosition(AFTER_SEQUENCE_NUMBER, kinesis_record_sequence(batch.records[-1]))
        cursor.iterator = batch.next_iterator
        if batch.next_iterator is None:  # a closed shard (split, merged), read to its end
            if not batch.records:
                self._drained.add(shard_id)
            self._relist = True  # its children may be missing from the listing
        return taken

"""Lambda's event source mappings, on this machine.

Each poller reads its source through the real AWS API of the embedded endpoint (DynamoDB Streams, Kinesis),
builds events of the exact shape Lambda sends, invokes the SAME handler that runs on AWS, and honours its
partial batch response the way Lambda does: the next batch starts at the lowest failed sequence number.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from infra.lambda_context import LocalLambdaContext
from onward.checkpoints import Checkpoint, CheckpointStore
from onward.clock import iso, system_clock
from relay.relay import Relay

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
REGION = "us-east-1"


def _epoch_s(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


@dataclass
class _Position:
    iterator: str | None


def _failed_sequence(response: dict[str, Any]) -> str | None:
    failures = response.get("batchItemFailures") or []
    return min((f["itemIdentifier"] for f in failures), key=int) if failures else None


class OutboxStreamPoller:
    """The relay's event source: the outbox table's DynamoDB stream, INSERT records only (the filter
    template.yaml puts on the mapping), batches of `batch_size`. Starts after the relay's own checkpoint;
    when the stream was trimmed past it, the relay re-publishes from the outbox first."""

    def __init__(self, streams: Any, stream_arn: str, handler: Handler, relay: Relay, batch_size: int = 100) -> None:
        self._streams = streams
        self._arn = stream_arn
        self._handler = handler
        self._relay = relay
        self._batch_size = batch_size
        self._positions: dict[str, _Position] = {}

    def _iterator(self, shard_id: str, kind: str, sequence_number: str | None = None) -> str:
        request = {"StreamArn": self._arn, "ShardId": shard_id, "ShardIteratorType": kind}
        if sequence_number is not None:
            request["SequenceNumber"] = sequence_number
        return self._streams.get_shard_iterator(**request)["ShardIterator"]

    def _start(self, shard_id: str) -> str:
        checkpoint = self._relay.checkpoint(shard_id)
        if checkpoint is None:
            return self._iterator(shard_id, "TRIM_HORIZON")
        try:
            return self._iterator(shard_id, "AFTER_SEQUENCE_NUMBER", checkpoint.sequence_number)
        except ClientError as error:
            if error.response["Error"]["Code"] != "TrimmedDataAccessException":
                raise
            self._relay.recover(shard_id)
            return self._iterator(shard_id, "TRIM_HORIZON")

    def poll_once(self) -> int:
        """One batch per shard; the number of records delivered to the handler."""
        delivered = 0
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            position = self._positions.setdefault(shard_id, _Position(None))
            if position.iterator is None:
                position.iterator = self._start(shard_id)
            response = self._streams.get_records(ShardIterator=position.iterator, Limit=self._batch_size)
            records = [r for r in response["Records"] if r["eventName"] == "INSERT"]
            next_iterator = response.get("NextShardIterator")
            if not records:
                position.iterator = next_iterator
                continue
            event = {"Records": [self._lambda_record(r) for r in records]}
            result = self._handler(event, LocalLambdaContext("onward-relay"))
            delivered += len(records)
            failed = _failed_sequence(result)
            position.iterator = (self._iterator(shard_id, "AT_SEQUENCE_NUMBER", failed)
                                 if failed is not None else next_iterator)
        return delivered

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        dynamodb = dict(record["dynamodb"])
        dynamodb["ApproximateCreationDateTime"] = _epoch_s(dynamodb["ApproximateCreationDateTime"])
        return {
            "eventID": record["eventID"],
            "eventName": record["eventName"],
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion", REGION),
            "dynamodb": dynamodb,
            "eventSourceARN": self._arn,
        }


class EventsStreamPoller:
    """The projector's event source: every shard of the Kinesis events stream, batches of `batch_size`.
    Its position (what Lambda's mapping keeps for itself) is kept in the checkpoint table as `consumer`."""

    def __init__(self, kinesis: Any, stream_name: str, handler: Handler, positions: CheckpointStore,
                 batch_size: int = 100, consumer: str = "local-mapping:projector") -> None:
        self._kinesis = kinesis
        self._stream = stream_name
        self._handler = handler
        self._positions = positions
        self._consumer = consumer
        self._batch_size = batch_size
        self._iterators: dict[str, str | None] = {}
        self._drained: set[str] = set()  # closed shards read to their end
        self._arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]

    def _start(self, shard_id: str, after: str | None = None, at: str | None = None) -> str:
        request: dict[str, Any] = {"StreamName": self._stream, "ShardId": shard_id}
        if at is not None:
            request |= {"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": at}
        elif after is not None:
            request |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": after}
        else:
            request |= {"ShardIteratorType": "TRIM_HORIZON"}
        return self._kinesis.get_shard_iterator(**request)["ShardIterator"]

    def poll_once(self) -> int:
        """One batch per readable shard; the number of records delivered to the handler. As Lambda does
        after a reshard, a child shard is read only once its parents are drained (read to their end)."""
        delivered = 0
        shards = self._kinesis.list_shards(StreamName=self._stream)["Shards"]
        listed = {shard["ShardId"] for shard in shards}
        for shard in shards:
            shard_id = shard["ShardId"]
            parents = {shard.get("ParentShardId"), shard.get("AdjacentParentShardId")} & listed
            if shard_id in self._drained or not parents <= self._drained:
                continue
            if self._iterators.get(shard_id) is None:
                stored = self._positions.checkpoint(self._consumer, shard_id)
                self._iterators[shard_id] = self._start(shard_id, after=stored.sequence_number if stored else None)
            response = self._kinesis.get_records(ShardIterator=self._iterators[shard_id], Limit=self._batch_size)
            records = response["Records"]
            if not records:
                self._iterators[shard_id] = response.get("NextShardIterator")
                if self._iterators[shard_id] is None:  # a closed shard, read to its end
                    self._drained.add(shard_id)
                continue
            event = {"Records": [self._lambda_record(shard_id, r) for r in records]}
            result = self._handler(event, LocalLambdaContext("onward-projector"))
            delivered += len(records)
            failed = _failed_sequence(result)
            if failed is not None:
                self._iterators[shard_id] = self._start(shard_id, at=failed)
                done = [r for r in records if int(r["SequenceNumber"]) < int(failed)]
            else:
                self._iterators[shard_id] = response.get("NextShardIterator")
                done = records
            if done:
                self._positions.advance(self._consumer, Checkpoint(shard_id, done[-1]["SequenceNumber"],
                                                                   iso(system_clock())))
        return delivered

    def _lambda_record(self, shard_id: str, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": record["PartitionKey"],
                "sequenceNumber": record["SequenceNumber"],
                "data": base64.b64encode(record["Data"]).decode(),
                "approximateArrivalTimestamp": _epoch_s(record["ApproximateArrivalTimestamp"]),
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": f"{shard_id}:{record['SequenceNumber']}",
            "eventName": "aws:kinesis:record",
            "invokeIdentityArn": "arn:aws:iam::123456789012:role/onward-projector",
            "awsRegion": REGION,
            "eventSourceARN": self._arn,
        }

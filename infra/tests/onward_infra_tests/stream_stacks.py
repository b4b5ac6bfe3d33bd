"""A fresh stack's outbox table and its DynamoDB stream on the embedded endpoint, written and read straight
(`Outbox`), for the tests of the stream topology and of the pollers reading it."""

from __future__ import annotations

import itertools
from typing import Any

from onward.pipeline.checkpoints import CheckpointStore
from onward_infra.endpoint import EmbeddedEndpoint

_stacks = itertools.count()


class Outbox:
    """A fresh stack on `endpoint`: its outbox table, the table's stream, and clients."""

    def __init__(self, endpoint: EmbeddedEndpoint) -> None:
        self.endpoint = endpoint
        self.environment = endpoint.deploy(f"topology-{next(_stacks)}").environment
        self.table = self.environment["OUTBOX_TABLE"]
        self.db = endpoint.client("dynamodb")
        self.streams = endpoint.client("dynamodbstreams")
        self.arn = self.db.describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        self.positions = CheckpointStore(self.db, self.environment["CHECKPOINT_TABLE"])  # the mapping's own

    def put(self, job: str, version: int, **extra: Any) -> None:
        self.db.put_item(TableName=self.table, Item=event_item(job, version, **extra),
                         ConditionExpression="attribute_not_exists(job_id)")

    def describe(self, **request: Any) -> dict[str, Any]:
        return self.streams.describe_stream(StreamArn=self.arn, **request)["StreamDescription"]

    def shards(self) -> list[dict[str, Any]]:
        """Every shard, DescribeStream page after page."""
        found: list[dict[str, Any]] = []
        request: dict[str, Any] = {}
        while True:
            page = self.describe(**request)
            found += page["Shards"]
            if "LastEvaluatedShardId" not in page:
                return found
            request["ExclusiveStartShardId"] = page["LastEvaluatedShardId"]

    def iterator(self, shard_id: str, kind: str = "TRIM_HORIZON", sequence_number: str | None = None) -> str:
        request = {"StreamArn": self.arn, "ShardId": shard_id, "ShardIteratorType": kind}
        if sequence_number is not None:
            request["SequenceNumber"] = sequence_number
        return self.streams.get_shard_iterator(**request)["ShardIterator"]

    def read(self, shard_id: str, iterator: str | None = None,
             limit: int = 1000) -> tuple[list[dict[str, Any]], bool]:
        """A shard's records from `iterator` (its trim horizon) until a page comes back empty, and whether the
        shard ended (a page with no NextShardIterator)."""
        iterator = iterator or self.iterator(shard_id)
        records: list[dict[str, Any]] = []
        while True:
            page = self.streams.get_records(ShardIterator=iterator, Limit=limit)
            records += page["Records"]
            if "NextShardIterator" not in page:
                return records, True
            if not page["Records"]:
                return records, False
            iterator = page["NextShardIterator"]

    def by_shard(self) -> dict[str, list[dict[str, Any]]]:
        return {shard["ShardId"]: self.read(shard["ShardId"])[0] for shard in self.shards()}


def event_item(job: str, version: int, **extra: Any) -> dict[str, Any]:
    return {"job_id": {"S": job}, "version": {"N": str(version)}, "state": {"S": "queued"},
            "time_bucket": {"S": "2026-12-01T06"}, "occurred_at": {"S": "2026-12-01T06:00:00.000Z"}, **extra}


class NoRecovery:
    """The relay as far as the poller asks it: only to recover from a trimmed stream, which never happens
    here (each stack's poller starts with no stored position, at every shard's trim horizon)."""

    def recover(self) -> None:
        raise AssertionError("nothing is trimmed")

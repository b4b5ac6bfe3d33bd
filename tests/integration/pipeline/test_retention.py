"""The embedded endpoint honours retention as AWS does (infra/onward_infra/moto_fixes/retention.py): TTL deletes expired
items with a REMOVE stream record of the TTL service, DynamoDB stream records are trimmed after 24 h and
Kinesis records after the stream's RetentionPeriodHours, and the local pipeline lives with it.

The sweeps are run by hand "in the future" (`sweep_retention(at=...)`), on an endpoint of this module's own
with AWS's periods (scale 1): deterministic, no waiting. One test waits for the endpoint's own sweeper at a
tiny scale."""

from __future__ import annotations

import itertools
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.pipeline.heartbeats import HEARTBEAT_PARTITION
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.moto_fixes.retention import STATS_PATH, TTL_SERVICE_IDENTITY
from onward_infra.pipeline import LocalPipeline
from tests.integration.pipeline.test_relay import (
    assert_views_final,
    kinesis_records,
    lifecycle,
    mapping_position,
    stream_arn,
    stream_records,
    stream_shards,
)
from tests.support import ManualClock

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

HOUR_S = 3600
_stacks = itertools.count()


@pytest.fixture(scope="module")
def retention_endpoint() -> Iterator[EmbeddedEndpoint]:
    """An endpoint of this module's own with AWS's retention periods (the tests' shared one has none)."""
    with EmbeddedEndpoint(retention_scale=1.0) as running:
        yield running


@pytest.fixture(scope="module")
def fast_endpoint() -> Iterator[EmbeddedEndpoint]:
    """AWS's periods times 0.0001: 1 h is 0.36 s, 24 h is 8.6 s; its sweeper runs every 0.05 s."""
    with EmbeddedEndpoint(retention_scale=0.0001) as running:
        yield running


class Stack:
    """A deployment of template.yaml on an endpoint, its environment in os.environ (the handlers read it)."""

    def __init__(self, endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
        self.endpoint = endpoint
        self.environment = endpoint.deploy(f"retention-{next(_stacks)}").environment
        for name, value in self.environment.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
        self.settings = Settings.from_environment(self.environment)
        self.dynamodb = endpoint.client("dynamodb")
        self.clock = ManualClock(system_clock() - 60_000)  # behind the real clock: jobs' events are never
        # decided after now (Relay.recover reads the outbox up to the real now)
        self.store = JobStore(self.settings, client=self.dynamodb, clock=self.clock)

    def pipeline(self) -> LocalPipeline:
        clients = {name: self.endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
        return LocalPipeline.build(self.settings, clients)

    def outbox_items(self) -> list[dict[str, Any]]:
        return self.dynamodb.scan(TableName=self.settings.outbox_table, ConsistentRead=True)["Items"]


@pytest.fixture
def stack(retention_endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> Stack:
    return Stack(retention_endpoint, monkeypatch)


def _heartbeats(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item["job_id"]["S"].startswith(f"{HEARTBEAT_PARTITION}#")]


def _poll_until(pipeline: LocalPipeline, done: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll relay and projector (a failing shard waits out its backoff) until `done`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the pipeline did not get there"
        if not pipeline.relay_poller.poll_once() + pipeline.projector_poller.poll_once():
            time.sleep(0.1)


def test_ttl_deletes_expired_outbox_items_with_the_services_remove_records_which_the_relay_ignores(stack):
    """Without the sweeper the expired heartbeats (1 h TTL; 16 per beat, every 5 s) would stay in the outbox
    for ever, as in moto; without the CloudFormation fix the outbox table would not even have TTL enabled.
    Without the service identity the REMOVE records would look like a user's deletes; without the relay's
    INSERT filter they would be published as events. The job events (7 days) stay."""
    assert stack.dynamodb.describe_time_to_live(TableName=stack.settings.outbox_table)[
        "TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    pipeline = stack.pipeline()
    jobs = [lifecycle(stack.store, stack.clock) for _ in range(3)]
    beat = pipeline.heartbeats.emit()
    pipeline.drain()
    published = kinesis_records(stack.endpoint, stack.settings)
    before = stack.outbox_items()
    assert len(_heartbeats(before)) == beat.slots

    done = stack.endpoint.sweep_retention(at=time.time() + 2 * HOUR_S)

    assert done["ttl_deleted"] == beat.slots
    after = stack.outbox_items()
    assert _heartbeats(after) == [] and len(after) == len(before) - beat.slots == 9  # 3 jobs x v1..v3
    records = stream_records(stack.endpoint, stream_arn(stack.settings, stack.dynamodb))
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    assert len(removes) == beat.slots
    assert all(r["userIdentity"] == TTL_SERVICE_IDENTITY for r in removes)
    assert {r["dynamodb"]["Keys"]["job_id"]["S"] for r in removes} == {
        item["job_id"]["S"] for item in _heartbeats(before)}
    assert all("userIdentity" not in r for r in records if r["eventName"] != "REMOVE")

    assert pipeline.drain() == 0  # the REMOVEs are read and filtered: nothing delivered, nothing published
    assert kinesis_records(stack.endpoint, stack.settings) == published
    assert_views_final(stack.store, stack.settings, stack.dynamodb, jobs)


def test_ttl_follows_dynamodbs_rules_on_any_table_with_ttl_enabled(retention_endpoint):
    """DynamoDB deletes an item once the Number in its TTL attribute has passed, ignores any other type and
    values more than five years in the past, and deletes nothing of a table without TTL. Without the write
    hook (queries.mark_written) an item whose TTL was moved later by an update would be deleted at its old
    time; without the index maintenance a query of a GSI would still find the deleted item."""
    dynamodb = retention_endpoint.client("dynamodb")
    name = f"retention-ttl-{next(_stacks)}"
    other = f"{name}-no-ttl"
    for table in (name, other):
        dynamodb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                    {"AttributeName": "g", "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              GlobalSecondaryIndexes=[{"IndexName": "by_g", "Projection": {"ProjectionType": "ALL"},
                                                       "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
    dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
    now = int(time.time())
    items = {"expired": {"N": str(now - 10)}, "later": {"N": str(now + HOUR_S)},
             "moved": {"N": str(now + 60)}, "a-string": {"S": str(now - 10)},
             "six-years-ago": {"N": str(now - 6 * 365 * 24 * HOUR_S)}, "none": None}
    for table in (name, other):
        for key, ttl in items.items():
            dynamodb.put_item(TableName=table,
                              Item={"pk": {"S": key}, "g": {"S": "x"}, **({"ttl": ttl} if ttl else {})})
    dynamodb.query(TableName=name, IndexName="by_g", KeyConditionExpression="g = :g",
                   ExpressionAttributeValues={":g": {"S": "x"}})  # the index's partitions are built now
    dynamodb.update_item(TableName=name, Key={"pk": {"S": "moved"}}, UpdateExpression="SET #t = :t",
                         ExpressionAttributeNames={"#t": "ttl"},
                         ExpressionAttributeValues={":t": {"N": str(now + 2 * HOUR_S)}})

    def keys(table: str) -> set[str]:
        return {item["pk"]["S"] for item in dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]}

    def indexed() -> set[str]:
        return {item["pk"]["S"] for item in dynamodb.query(
            TableName=name, IndexName="by_g", KeyConditionExpression="g = :g",
            ExpressionAttributeValues={":g": {"S": "x"}})["Items"]}

    retention_endpoint.sweep_retention(at=time.time() + 1)  # after every write (`now` was truncated)
    assert keys(name) == indexed() == {"later", "moved", "a-string", "six-years-ago", "none"}
    retention_endpoint.sweep_retention(at=now + 90 * 60)
    assert keys(name) == indexed() == {"moved", "a-string", "six-years-ago", "none"}
    retention_endpoint.sweep_retention(at=now + 3 * HOUR_S)
    assert keys(name) == indexed() == {"a-string", "six-years-ago", "none"}
    assert keys(other) == set(items)


def test_a_trimmed_stream_gives_trimmed_data_access_and_the_relay_recovers_from_the_outbox(stack):
    """The relay was away for more than 24 h: the outbox stream was trimmed past jobs c and d, and the
    Kinesis stream past everything. Without trimming moto would keep every record for ever (and memory with
    it); without TrimmedDataAccessException the running relay poller would read on from the trim horizon
    and silently skip c and d; without Relay.recover they would never reach the view. The same poller, still
    holding its iterator, recovers: nothing is lost (checked on the view), and a job after it flows as usual."""
    pipeline = stack.pipeline()
    done_before = [lifecycle(stack.store, stack.clock) for _ in range(2)]
    pipeline.heartbeats.emit()  # the relay's watermark: recovery re-publishes from it (minus a margin)
    pipeline.drain()
    arn = stream_arn(stack.settings, stack.dynamodb)
    [shard_id] = stream_shards(stack.endpoint, arn)  # this endpoint's streams have one shard
    position = mapping_position(stack.settings, stack.dynamodb, shard_id)
    assert position is not None
    missed = [lifecycle(stack.store, stack.clock) for _ in range(2)]  # committed while the relay is away

    done = stack.endpoint.sweep_retention(at=time.time() + 25 * HOUR_S)

    assert done["dynamodb_stream_records_trimmed"] > 0 and done["kinesis_records_trimmed"] > 0
    streams = stack.endpoint.client("dynamodbstreams")
    with pytest.raises(ClientError) as trimmed:
        streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                                   SequenceNumber=position.sequence_number)
    assert trimmed.value.response["Error"]["Code"] == "TrimmedDataAccessException"
    assert stream_records(stack.endpoint, arn) == []  # TRIM_HORIZON: the oldest record kept (none)
    assert kinesis_records(stack.endpoint, stack.settings) == []

    everything = done_before + missed

    def all_shown() -> bool:
        try:
            assert_views_final(stack.store, stack.settings, stack.dynamodb, everything)
        except AssertionError:
            return False
        return True

    _poll_until(pipeline, all_shown)
    later = lifecycle(stack.store, stack.clock)
    _poll_until(pipeline, lambda: bool(kinesis_records(stack.endpoint, stack.settings)) and all_shown())
    pipeline.drain()
    assert_views_final(stack.store, stack.settings, stack.dynamodb, [*everything, later])
    published = {r.event_id for r in kinesis_records(stack.endpoint, stack.settings)}
    assert {e.event_id for e in stack.store.events(later)} <= published
    assert {e.event_id for job in missed for e in stack.store.events(job)} <= published  # re-published


def test_kinesis_records_are_trimmed_after_the_streams_retention_and_reads_start_at_the_trim_horizon(stack):
    """Without trimming moto keeps every Kinesis record; with moto's numbering a shard emptied by the trim
    would number its next record 1 again (a consumer's AFTER_SEQUENCE_NUMBER checkpoint would then skip
    records). A position or an iterator older than the trim horizon reads from the oldest record kept, as on
    Kinesis; a stream whose RetentionPeriodHours was raised keeps its records for that long."""
    kinesis = stack.endpoint.client("kinesis")
    name = stack.settings.events_stream
    shard_id = next(shard["ShardId"] for shard in kinesis.list_shards(StreamName=name)["Shards"]
                    if shard["HashKeyRange"]["StartingHashKey"] == "0")
    first = [kinesis.put_record(StreamName=name, Data=f"old-{n}".encode(), PartitionKey="p",
                                ExplicitHashKey="0")["SequenceNumber"] for n in range(3)]
    held = kinesis.get_shard_iterator(StreamName=name, ShardId=shard_id,
                                      ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=first[0])

    def read(**position: str) -> list[bytes]:
        iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=shard_id, **position)["ShardIterator"]
        return [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]]

    stack.endpoint.sweep_retention(at=time.time() + 23 * HOUR_S)
    assert read(ShardIteratorType="TRIM_HORIZON") == [b"old-0", b"old-1", b"old-2"]
    assert stack.endpoint.sweep_retention(at=time.time() + 25 * HOUR_S)["kinesis_records_trimmed"] >= 3
    assert read(ShardIteratorType="TRIM_HORIZON") == []
    new = kinesis.put_record(StreamName=name, Data=b"new", PartitionKey="p", ExplicitHashKey="0")["SequenceNumber"]
    assert int(new) == int(first[-1]) + 1
    assert read(ShardIteratorType="TRIM_HORIZON") == [b"new"]
    assert read(ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=first[0]) == [b"new"]
    assert read(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=first[1]) == [b"new"]
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=held["ShardIterator"])["Records"]] == [b"new"]

    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=48)
    stack.endpoint.sweep_retention(at=time.time() + 30 * HOUR_S)
    assert read(ShardIteratorType="TRIM_HORIZON") == [b"new"]
    stack.endpoint.sweep_retention(at=time.time() + 49 * HOUR_S)
    assert read(ShardIteratorType="TRIM_HORIZON") == []
    stats = json.loads(urllib.request.urlopen(stack.endpoint.url + STATS_PATH, timeout=10).read())
    assert stats["kinesis_records_trimmed"] >= 4 and stats["scale"] == 1.0


def _untrimmed(endpoint, arn: str) -> bool:
    """Whether the outbox stream still holds records. The sweeper may trim a shard between the iterator the
    read takes at TRIM_HORIZON and its GetRecords (TrimmedDataAccessException): that read is still trimming."""
    try:
        return bool(stream_records(endpoint, arn))
    except ClientError as error:
        if error.response["Error"]["Code"] != "TrimmedDataAccessException":
            raise
        return True


def test_the_endpoints_own_sweeper_deletes_and_trims_at_a_drills_scale(fast_endpoint, monkeypatch):
    """Without the sweeper thread nothing would be deleted unless someone swept by hand: at scale 0.0001 a
    heartbeat (1 h TTL) goes within about a second, and the stream records (24 h: 8.6 s) soon after."""
    stack = Stack(fast_endpoint, monkeypatch)
    beat = stack.pipeline().heartbeats.emit()
    arn = stream_arn(stack.settings, stack.dynamodb)
    assert len(_heartbeats(stack.outbox_items())) == beat.slots
    deadline = time.monotonic() + 5
    while _heartbeats(stack.outbox_items()):
        assert time.monotonic() < deadline, "the heartbeats were not deleted"
        time.sleep(0.1)
    records = stream_records(fast_endpoint, arn)
    assert [r["eventName"] for r in records].count("REMOVE") == beat.slots
    deadline = time.monotonic() + 20
    while _untrimmed(fast_endpoint, arn):
        assert time.monotonic() < deadline, "the stream was not trimmed"
        time.sleep(0.25)
    assert fast_endpoint.retention is not None
    assert fast_endpoint.retention.counts["dynamodb_stream_records_trimmed"] >= 2 * beat.slots
    assert Deployment.from_environment().settings.outbox_table == stack.settings.outbox_table

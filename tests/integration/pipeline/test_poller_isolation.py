"""The local event-source pollers (infra/onward_infra/pollers/) isolate shards and park unreadable records one by one.

The pollers read GetRecords answers from their raw JSON; a stream record that cannot become a Lambda event
(here an outbox record whose NewImage the endpoint serves as a string, not a map: no SDK could parse it
either) must be parked, once, and every job behind it (any tenant) must reach the view. A shard that fails
(GetRecords, the handler, an expired iterator) must be retried from its last good position while the other
shards are still read.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, RELAY_CONSUMER, CheckpointStore
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.view import StatusViewReader
from onward_infra.moto_fixes.streams import table_stream
from onward_infra.pipeline import LocalPipeline
from onward_infra.pollers import EventsStreamPoller, OutboxStreamPoller, ShardBackoff
from tests.integration.pipeline.test_relay import kinesis_records, stream_shards

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # they read the streams

ECHO = NewJob(type="demo.echo")
NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)
EXPIRED = "ExpiredIteratorException"
CLIENTS = ("dynamodb", "dynamodbstreams", "kinesis")
MAPPING = "local-mapping:relay"  # OutboxStreamPoller's own position per shard, in the checkpoint table


class FakeMonotonic:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def fresh_pipeline(endpoint, settings) -> LocalPipeline:
    """A new relay and projector with new clients and no position in memory, as after a restart."""
    return LocalPipeline.build(settings, {name: endpoint.client(name) for name in CLIENTS})


def viewed_version(settings, dynamodb, job_id: str) -> int | None:
    view = StatusViewReader(dynamodb, settings.status_table).get(job_id)
    return None if view is None else view.version


def outbox_stream(settings, dynamodb) -> str:
    return dynamodb.describe_table(TableName=settings.outbox_table)["Table"]["LatestStreamArn"]


def put_poison_outbox_item(store, settings, dynamodb) -> str:
    """A copy of a real outbox item under a new job id, written directly, whose stream record the endpoint
    then serves with a NewImage that is not a map (a record that cannot become a Lambda event); its job id."""
    template_job = store.create("initech", ECHO).job.job_id
    item = dynamodb.get_item(TableName=settings.outbox_table, Key={"job_id": {"S": template_job},
                                                                   "version": {"N": "1"}})["Item"]
    poison_job = uuid.uuid4().hex
    item |= {"job_id": {"S": poison_job}, "event_id": {"S": f"{poison_job}:1"}}
    dynamodb.put_item(TableName=settings.outbox_table, Item=item)
    (stream_record,) = [record for record in table_stream(settings.outbox_table).items
                        if record.record["dynamodb"]["Keys"]["job_id"]["S"] == poison_job]
    stream_record.record["dynamodb"]["NewImage"] = "not an image"
    return poison_job


def count_parks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Every ParkedRecords.park call from now on, as (source, shard, sequence number)."""
    parks: list[tuple[str, str, str]] = []
    park = ParkedRecords.park

    def counted(self: ParkedRecords, source: str, shard_id: str, sequence_number: str, *rest: Any) -> None:
        parks.append((source, shard_id, sequence_number))
        park(self, source, shard_id, sequence_number, *rest)

    monkeypatch.setattr(ParkedRecords, "park", counted)
    return parks


def kinesis_shard_of(kinesis, stream: str, partition_key: str) -> str:
    """The open shard Kinesis routes `partition_key` to (MD5 of the key in the shard's hash range)."""
    hashed = int(hashlib.md5(partition_key.encode()).hexdigest(), 16)
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        hash_range = shard["HashKeyRange"]
        if int(hash_range["StartingHashKey"]) <= hashed <= int(hash_range["EndingHashKey"]):
            return shard["ShardId"]
    raise AssertionError("no shard for the key")


def every_job(by_shard: dict[str, list[str]]) -> list[str]:
    return [job_id for jobs in by_shard.values() for job_id in jobs]


def jobs_on_every_shard(store, kinesis, stream: str, per_shard: int = 2) -> dict[str, list[str]]:
    """Jobs of two tenants created until every events shard will carry `per_shard` of them; job ids by
    shard."""
    shards = [shard["ShardId"] for shard in kinesis.list_shards(StreamName=stream)["Shards"]]
    assert len(shards) >= 2, "the template's events stream has several shards"
    by_shard: dict[str, list[str]] = {shard: [] for shard in shards}
    tenants = iter(["acme", "globex"] * 100)
    while min(map(len, by_shard.values())) < per_shard:
        job_id = store.create(next(tenants), ECHO).job.job_id
        by_shard[kinesis_shard_of(kinesis, stream, job_id)].append(job_id)
    return by_shard


# --- a record botocore cannot parse, on the real embedded endpoint ------------------------------------------

def test_an_unparsable_outbox_record_is_parked_once_and_the_jobs_behind_it_reach_the_view(
        pipeline, store, settings, dynamodb, endpoint, monkeypatch):
    """Before: GetRecords raised AttributeError inside botocore on every poll of the outbox stream, so
    poll_once (and drain) raised forever and no job after the poison, of any tenant, reached the view."""
    parks = count_parks(monkeypatch)
    before = store.create("acme", ECHO).job.job_id
    poison = put_poison_outbox_item(store, settings, dynamodb)
    behind = [store.create(tenant, ECHO).job.job_id for tenant in ("acme", "globex", "acme", "globex")]

    pipeline.drain()

    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in [before, *behind])
    assert viewed_version(settings, dynamodb, poison) is None
    parked = ParkedRecords(dynamodb, settings.parked_table)
    (record,) = parked.parked_by(RELAY_CONSUMER)
    stream_arn = outbox_stream(settings, dynamodb)
    assert poison in json.loads(record.raw)["dynamodb"]["Keys"]["job_id"]["S"]
    assert record.raw_size == len(record.raw) and not record.raw_truncated
    assert stream_arn in record.reason and record.shard_id in record.reason
    assert record.sequence_number in record.reason and "NewImage is not a map" in record.reason
    checkpoints = CheckpointStore(dynamodb, settings.checkpoint_table)
    position = checkpoints.checkpoint(MAPPING, record.shard_id)
    # the mapping went on past it: to its shard's last record (the poison itself when none follows it there)
    assert int(position.sequence_number) >= int(record.sequence_number), "the mapping went on past it"
    its_shard = table_stream(settings.outbox_table)._shard(record.shard_id)  # the poller cannot read the poison
    assert int(position.sequence_number) == its_shard.sequence[-1]

    later = store.create("globex", ECHO).job.job_id
    pipeline.drain()  # polled again: the poison is behind the position, not re-parked
    fresh_pipeline(endpoint, settings).drain()  # restarted: from the mapping's stored position, past the poison
    assert viewed_version(settings, dynamodb, later) == 1
    assert parked.parked_by(RELAY_CONSUMER) == [record], "parked once, never again (same parked_at)"
    assert parks == [(RELAY_CONSUMER, record.shard_id, record.sequence_number)]


def test_an_unparsable_last_outbox_record_is_not_parked_again_by_later_polls(
        pipeline, store, settings, dynamodb, endpoint):
    """The poison as the newest record: no record behind it is handed to the relay, so only the mapping's
    position, moved onto the poison when it is parked (in memory, and stored), keeps it from being read and
    parked again on every poll, or by a restarted poller. Before: every poll raised."""
    first = store.create("acme", ECHO).job.job_id
    put_poison_outbox_item(store, settings, dynamodb)

    assert pipeline.relay_poller.poll_once() == 3  # the template job, `first` and the parked poison
    parked = ParkedRecords(dynamodb, settings.parked_table)
    (record,) = parked.parked_by(RELAY_CONSUMER)
    position = CheckpointStore(dynamodb, settings.checkpoint_table).checkpoint(MAPPING, record.shard_id)
    assert position.sequence_number == record.sequence_number
    for _ in range(3):
        assert pipeline.relay_poller.poll_once() == 0
    assert parked.parked_by(RELAY_CONSUMER) == [record]
    pipeline.drain()
    assert viewed_version(settings, dynamodb, first) == 1
    assert fresh_pipeline(endpoint, settings).relay_poller.poll_once() == 0, "restarted: after the poison"
    assert parked.parked_by(RELAY_CONSUMER) == [record]


def test_an_unparsable_kinesis_record_is_parked_and_its_shard_reads_on(
        pipeline, store, settings, dynamodb, endpoint):
    """moto's Kinesis always answers records botocore can parse, so this test breaks one record's answer
    itself (a `before-parse` hook making its Data a number) on the real endpoint. Before: the projector's
    poll_once raised on every poll and that shard (and every shard listed after it) froze."""
    kinesis = endpoint.client("kinesis")
    stream = settings.events_stream
    by_shard = jobs_on_every_shard(store, kinesis, stream, per_shard=3)
    pipeline.relay_poller.poll_once()
    victim_shard, victims = next(iter(by_shard.items()))
    poison_key = victims[1]  # the middle job of that shard: one before it, one after it

    def break_one_record(response_dict: dict[str, Any], **_: Any) -> None:
        answer = json.loads(response_dict["body"])
        for record in answer.get("Records", []):
            if record["PartitionKey"] == poison_key:
                record["Data"] = 12345
        response_dict["body"] = json.dumps(answer).encode()

    kinesis.meta.events.register_first("before-parse.kinesis.GetRecords", break_one_record)
    poller = EventsStreamPoller(kinesis, stream, projector_handler.handler,
                                CheckpointStore(dynamodb, settings.checkpoint_table),
                                parked=ParkedRecords(dynamodb, settings.parked_table))
    while poller.poll_once():
        pass

    unviewed = [job_id for job_id in every_job(by_shard) if viewed_version(settings, dynamodb, job_id) != 1]
    assert unviewed == [poison_key]
    (record,) = ParkedRecords(dynamodb, settings.parked_table).parked_by(PROJECTOR_CONSUMER)
    assert record.shard_id == victim_shard and json.loads(record.raw)["PartitionKey"] == poison_key
    assert stream in record.reason and record.sequence_number in record.reason
    assert not poller.failing_shards


# --- shard isolation ----------------------------------------------------------------------------------------

class FailingShardKinesis:
    """A Kinesis client whose GetRecords fails for one shard while `failing` is set (the embedded endpoint
    never fails one shard alone, so this wrapper does); every other call goes to the real client."""

    def __init__(self, real: Any, shard_id: str) -> None:
        self._real = real
        self._shard_id = shard_id
        self._iterators: set[str] = set()
        self.failing = True
        self.refused = 0

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        answer = self._real.get_shard_iterator(**request)
        if request["ShardId"] == self._shard_id:
            self._iterators.add(answer["ShardIterator"])
        return answer

    def get_records(self, **request: Any) -> dict[str, Any]:
        mine = request["ShardIterator"] in self._iterators
        if mine and self.failing:
            self.refused += 1
            raise ClientError({"Error": {"Code": "InternalFailure", "Message": "unavailable"}}, "GetRecords")
        answer = self._real.get_records(**request)
        if mine and answer.get("NextShardIterator"):
            self._iterators.add(answer["NextShardIterator"])
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def relayed(pipeline, store, endpoint, settings) -> dict[str, list[str]]:
    """Jobs of two tenants on every events shard, relayed to Kinesis (not projected yet); ids by shard."""
    by_shard = jobs_on_every_shard(store, endpoint.client("kinesis"), settings.events_stream)
    while pipeline.relay_poller.poll_once():
        pass
    return by_shard


def test_a_kinesis_shard_whose_get_records_fails_does_not_starve_the_other_shards(
        relayed, settings, dynamodb, endpoint):
    """The first listed shard's GetRecords fails (a fake wrapper, see FailingShardKinesis). Before: the
    loop over shards was inside one try, so poll_once raised at the first shard and the shards after it
    were never read: the view froze for every tenant. Now the other shards are projected in the same
    poll, the broken one is backed off (not retried on every poll) and, once it heals, resumes from its
    last good position: nothing lost, nothing skipped."""
    kinesis = endpoint.client("kinesis")
    broken_shard = kinesis.list_shards(StreamName=settings.events_stream)["Shards"][0]["ShardId"]
    failing = FailingShardKinesis(kinesis, broken_shard)
    clock = FakeMonotonic()
    poller = EventsStreamPoller(failing, settings.events_stream, projector_handler.handler,
                                CheckpointStore(dynamodb, settings.checkpoint_table),
                                backoff=ShardBackoff(first_s=5.0, max_s=60.0), monotonic=clock)

    while poller.poll_once():
        pass

    healthy = [job for shard, jobs in relayed.items() if shard != broken_shard for job in jobs]
    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in healthy)
    assert all(viewed_version(settings, dynamodb, job_id) is None for job_id in relayed[broken_shard])
    assert poller.failing_shards == {broken_shard}
    assert failing.refused == 1, "backed off: not retried before its delay"

    clock.now += 5.0
    poller.poll_once()
    assert failing.refused == 2, "retried after the delay, and backed off longer"
    clock.now += 5.0
    poller.poll_once()
    assert failing.refused == 2, "the second delay is 10 s"

    failing.failing = False
    clock.now += 5.0
    while poller.poll_once():
        pass
    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in every_job(relayed))
    assert not poller.failing_shards


def test_a_projector_that_raises_on_one_shard_is_retried_there_while_the_other_shards_go_on(
        relayed, settings, dynamodb, endpoint):
    """The handler raises for batches of one shard (as a bug or an outage would). Before: the exception
    left poll_once and no later shard was polled; the failed batch must also be redelivered whole."""
    kinesis = endpoint.client("kinesis")
    broken_shard = kinesis.list_shards(StreamName=settings.events_stream)["Shards"][0]["ShardId"]
    raising = {"on": True}

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if raising["on"] and event["Records"][0]["eventID"].startswith(broken_shard):
            raise RuntimeError("projector down for this shard")
        return projector_handler.handler(event, context)

    poller = EventsStreamPoller(kinesis, settings.events_stream, handler,
                                CheckpointStore(dynamodb, settings.checkpoint_table), backoff=NO_BACKOFF)
    assert poller.poll_once() > 0
    assert poller.failing_shards == {broken_shard}
    assert all(viewed_version(settings, dynamodb, job_id) == 1
               for shard, jobs in relayed.items() if shard != broken_shard for job_id in jobs)

    raising["on"] = False
    while poller.poll_once():
        pass
    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in every_job(relayed))


class ExpiringStreams:
    """A DynamoDB Streams client whose next `expire` GetRecords calls answer ExpiredIteratorException, as
    AWS does for an iterator older than 15 minutes (the embedded endpoint never expires one). It lists only
    `shard_id`, the shard under test, so that every GetRecords call is that shard's."""

    def __init__(self, real: Any, expire: int, shard_id: str) -> None:
        self._real = real
        self.expire = expire
        self.shard_id = shard_id

    def describe_stream(self, **request: Any) -> dict[str, Any]:
        answer = self._real.describe_stream(**request)
        shards = [shard for shard in answer["StreamDescription"]["Shards"] if shard["ShardId"] == self.shard_id]
        return {**answer, "StreamDescription": {**answer["StreamDescription"], "Shards": shards}}

    def get_records(self, **request: Any) -> dict[str, Any]:
        if self.expire:
            self.expire -= 1
            raise ClientError({"Error": {"Code": EXPIRED, "Message": "expired"}}, "GetRecords")
        return self._real.get_records(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_an_expired_outbox_iterator_is_recreated_from_the_last_good_position(
        stack_environment, store, settings, dynamodb, endpoint):
    """Before: ExpiredIteratorException left poll_once, and the dead iterator was kept, so every later
    poll failed the same way: the relay never moved again. A re-created iterator starts after the last
    record done (the relay skips nothing, so one started earlier would publish records twice), and a
    restarted pipeline resumes after the position this poller stored: each event reaches Kinesis once. The
    poller under test reads the first shard to hold 3 jobs; the restarted pipeline reads all."""
    arn = outbox_stream(settings, dynamodb)
    created: list[str] = []
    while True:  # jobs until one shard holds 3 of them: those are the first
        created.append(store.create("acme", ECHO).job.job_id)
        shard_id, records = max(stream_shards(endpoint, arn).items(), key=lambda item: len(item[1]))
        if len(records) == 3:
            break
    streams = ExpiringStreams(endpoint.client("dynamodbstreams"), expire=0, shard_id=shard_id)
    poller = OutboxStreamPoller(streams, outbox_stream(settings, dynamodb), relay_handler.handler,
                                Deployment(settings, clients={"dynamodb": dynamodb}).relay,
                                CheckpointStore(dynamodb, settings.checkpoint_table), batch_size=2,
                                backoff=NO_BACKOFF)
    assert poller.poll_once() == 2

    streams.expire = 1  # the iterator after the first batch has expired
    assert poller.poll_once() == 1, "re-created after the last record done, within the same poll"
    streams.expire = 2  # expired again, and the re-created one too: the shard fails, then resumes
    assert poller.poll_once() == 0 and poller.failing_shards
    second = [store.create("globex", ECHO).job.job_id for _ in range(2)]
    while poller.poll_once():
        pass
    assert not poller.failing_shards

    fresh_pipeline(endpoint, settings).drain()
    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in created + second)
    published = Counter(record.event_id for record in kinesis_records(endpoint, settings))
    assert published == {f"{job_id}:1": 1 for job_id in created + second}, "each event once"


def test_a_relay_handler_that_raises_is_retried_from_the_same_position_without_losing_records(
        stack_environment, store, settings, dynamodb, endpoint):
    """Before: the handler's exception left poll_once (killing the poll for every shard) and the caller
    had to know to call again; now the shard is backed off and redelivered from the batch's start, and the
    position is stored only once the handler answered, so a restarted pipeline publishes nothing twice.
    The handler raises for the first shard polled only: the other shards' records go through meanwhile."""
    jobs = [store.create(tenant, ECHO).job.job_id for tenant in ("acme", "globex", "acme")]
    arn = outbox_stream(settings, dynamodb)
    held = [len(records) for records in stream_shards(endpoint, arn).values() if records]
    calls = {"n": 0}

    def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("relay crashed before publishing")
        return relay_handler.handler(event, context)

    clock = FakeMonotonic()
    poller = OutboxStreamPoller(endpoint.client("dynamodbstreams"), arn, flaky,
                                Deployment(settings, clients={"dynamodb": dynamodb}).relay,
                                CheckpointStore(dynamodb, settings.checkpoint_table),
                                backoff=ShardBackoff(first_s=1.0), monotonic=clock)
    assert poller.poll_once() == len(jobs) - held[0] and len(poller.failing_shards) == 1
    assert poller.poll_once() == 0 and calls["n"] == len(held), "backed off"
    clock.now += 1.0
    assert poller.poll_once() == held[0] and not poller.failing_shards
    assert poller.poll_once() == 0  # caught up: the positions are written

    fresh_pipeline(endpoint, settings).drain()
    assert all(viewed_version(settings, dynamodb, job_id) == 1 for job_id in jobs)
    published = Counter(record.event_id for record in kinesis_records(endpoint, settings))
    assert published == {f"{job_id}:1": 1 for job_id in jobs}

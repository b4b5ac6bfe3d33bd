"""The relay over the embedded endpoint: the outbox table's real DynamoDB stream -> onward.entrypoints.relay.handler
(driven by onward_infra.pollers.OutboxStreamPoller, as Lambda's mapping would) -> the real Kinesis events stream, read
back with the Kinesis API. Crashes are injected at the relay's named fault points (onward.faults)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.models import ErrorSummary, NewJob, OutboxEvent
from onward.domain.projection import ProjectionOutcome
from onward.entrypoints import relay as relay_handler
from onward.faults import InjectedCrash, injected
from onward.pipeline.checkpoints import OUTBOX_STREAM, CheckpointStore
from onward.pipeline.heartbeats import SLOTS_PER_SHARD
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.relay.publisher import KinesisPublisher
from onward.pipeline.relay.relay import RECOVERY_MARGIN_MS, Relay, StreamRecord
from onward.store.dynamo.attributes import from_item
from onward.store.service import JobStore
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.pipeline import LocalPipeline
from onward_infra.pollers import OutboxStreamPoller
from tests.support import PartialFailures

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # they read the streams

ECHO = NewJob(type="demo.echo", params={"n": 1})
THROTTLED = "ProvisionedThroughputExceededException"
MAPPING = "local-mapping:relay"  # the local event source mapping's own positions, per outbox-stream shard


# --- helpers --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KinesisRecord:
    shard_id: str
    sequence_number: int  # moto's are small integers per shard: compare as integers
    partition_key: str
    payload: dict[str, Any]

    @property
    def event_id(self) -> str:
        return self.payload["event_id"]


def kinesis_records(endpoint, settings) -> list[KinesisRecord]:
    """Every event in the events stream, shard by shard, in sequence order (the heartbeats the relay passes
    on to every shard are left out: they are no events)."""
    kinesis = endpoint.client("kinesis")
    found: list[KinesisRecord] = []
    for shard in kinesis.list_shards(StreamName=settings.events_stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=settings.events_stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while True:
            response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            found += [KinesisRecord(shard["ShardId"], int(r["SequenceNumber"]), r["PartitionKey"], payload)
                      for r in response["Records"]
                      if (payload := json.loads(r["Data"])).get("kind") != "heartbeat"]
            if not response["Records"]:
                break
            iterator = response["NextShardIterator"]
    return sorted(found, key=lambda r: (r.shard_id, r.sequence_number))


def outbox_events(settings, dynamodb) -> list[OutboxEvent]:
    return list(OutboxReader(dynamodb, settings.outbox_table).all())


def event_counts(records: list[KinesisRecord]) -> Counter[str]:
    return Counter(r.event_id for r in records)


def outbox_counts(settings, dynamodb) -> Counter[str]:
    """Each outbox event once: what Kinesis must hold after a delivery without duplicates."""
    return Counter(e.event_id for e in outbox_events(settings, dynamodb))


def sequence(stream_record: dict[str, Any]) -> str:
    return stream_record["dynamodb"]["SequenceNumber"]


def stream_arn(settings, dynamodb) -> str:
    return dynamodb.describe_table(TableName=settings.outbox_table)["Table"]["LatestStreamArn"]


def stream_shards(endpoint, arn: str) -> dict[str, list[dict[str, Any]]]:
    """Every shard of the outbox stream, in DescribeStream's order (the order the poller reads them in), each
    with all its records in order, as the DynamoDB Streams API returns them."""
    streams = endpoint.client("dynamodbstreams")
    shards: list[dict[str, Any]] = []
    request: dict[str, Any] = {"StreamArn": arn}
    while True:
        description = streams.describe_stream(**request)["StreamDescription"]
        shards += description["Shards"]
        if not description.get("LastEvaluatedShardId"):
            break
        request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]
    found: dict[str, list[dict[str, Any]]] = {}
    for shard in shards:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records: list[dict[str, Any]] = []
        while iterator:
            response = streams.get_records(ShardIterator=iterator, Limit=1000)
            records += response["Records"]
            if not response["Records"]:
                break
            iterator = response.get("NextShardIterator")
        found[shard["ShardId"]] = records
    return found


def stream_records(endpoint, arn: str) -> list[dict[str, Any]]:
    """All the outbox stream's records, every shard's, in commit order (sequence numbers increase across the
    whole stream; those of sibling shards interleave)."""
    return sorted((r for records in stream_shards(endpoint, arn).values() for r in records),
                  key=lambda r: int(sequence(r)))


def job_of(stream_record: dict[str, Any]) -> str:
    return stream_record["dynamodb"]["NewImage"]["job_id"]["S"]


def event_of(stream_record: dict[str, Any]) -> str:
    return stream_record["dynamodb"]["NewImage"]["event_id"]["S"]


def jobs_until_the_first_shard_holds(store: JobStore, endpoint, arn: str, jobs: int,
                                     at_least: int = 0) -> tuple[list[str], str]:
    """Jobs created (v1 only) until the first shard the poller reads holds `jobs` of them (and at least
    `at_least` were created): their ids, and that shard's."""
    job_ids: list[str] = []
    while True:
        job_ids.append(store.create("acme", ECHO).job.job_id)
        first, records = next(iter(stream_shards(endpoint, arn).items()))
        if len(records) >= jobs and len(job_ids) >= at_least:
            return job_ids, first


def restart(settings, endpoint, batch_size: int = 100) -> LocalPipeline:
    """A fresh relay and projector, as after a crash: new clients, new pollers, no position in memory."""
    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    return LocalPipeline.build(settings, clients, batch_size=batch_size)


def relay_until_idle(poller: OutboxStreamPoller) -> None:
    while poller.poll_once():
        pass


def mapping_position(settings, dynamodb, shard_id: str):
    """Where the local event source mapping (OutboxStreamPoller) stands on one outbox-stream shard: the last
    record it saw the relay handler finish, and when it recorded that. The relay keeps no position of its own."""
    return CheckpointStore(dynamodb, settings.checkpoint_table).checkpoint(MAPPING, shard_id)


def committed_at(stream_record: dict[str, Any]) -> str:
    """The commit time the relay stamps on a record's event: its ApproximateCreationDateTime, as the poller
    hands it to the handler (epoch seconds) and the handler reads it (epoch milliseconds)."""
    return iso(int(stream_record["dynamodb"]["ApproximateCreationDateTime"].timestamp() * 1000))


def view(settings, dynamodb, job_id: str) -> dict[str, Any] | None:
    item = dynamodb.get_item(TableName=settings.status_table, Key={"job_id": {"S": job_id}},
                             ConsistentRead=True).get("Item")
    return None if item is None else from_item(item)


def assert_views_final(store: JobStore, settings, dynamodb, job_ids) -> None:
    for job_id in job_ids:
        job = store.get(job_id)
        shown = view(settings, dynamodb, job_id)
        assert shown is not None, f"{job_id} missing from the view"
        assert (shown["version"], shown["status"]) == (job.version, job.state.value), job_id


def assert_each_job_in_version_order(records: list[KinesisRecord]) -> None:
    """Per job: one Kinesis shard, and its versions in sequence order (first deliveries only: a
    redelivered duplicate may follow later)."""
    by_job: dict[str, list[KinesisRecord]] = {}
    for record in records:
        by_job.setdefault(record.payload["job_id"], []).append(record)
    for job_id, mine in by_job.items():
        assert len({r.shard_id for r in mine}) == 1, f"{job_id} spread over shards"
        firsts: list[int] = []
        for record in sorted(mine, key=lambda r: r.sequence_number):
            if record.payload["version"] not in firsts:
                firsts.append(record.payload["version"])
        assert firsts == sorted(firsts) == list(range(1, len(firsts) + 1)), (job_id, firsts)


def busy_history(store: JobStore, clock, jobs: int = 16) -> list[str]:
    """Jobs of two tenants with interleaved histories: cancelled at once, completed, failed then retried
    and completed, and a few left queued. Returns their ids."""
    ids = [store.create("acme" if n % 2 else "globex", ECHO).job.job_id for n in range(jobs)]
    clock.advance(1)
    store.cancel(ids[0])
    claims = 0
    while True:
        lease = store.claim("w1", 30)
        if lease is None:
            clock.advance(600)  # past any retry backoff
            lease = store.claim("w1", 30)
            if lease is None:
                break
        claims += 1
        clock.advance(1)
        if claims % 4 == 0 and lease.attempt == 1:
            store.fail(lease, ErrorSummary.of("ConnectionError", "flaky upstream"))
        else:
            store.complete(lease, {"claim": claims})
        clock.advance(1)
    ids += [store.create("acme", ECHO).job.job_id for _ in range(2)]  # never claimed: v1 only
    return ids


def lifecycle(store: JobStore, clock, tenant: str = "acme") -> str:
    """One job created, claimed and completed (v1..v3), the clock moving a second per step. Only this
    job is due while it runs, so the claim takes it."""
    job_id = store.create(tenant, ECHO).job.job_id
    clock.advance(1)
    lease = store.claim("w1", 30)
    assert lease is not None and lease.job_id == job_id
    clock.advance(1)
    store.complete(lease, {"job": job_id})
    clock.advance(1)
    return job_id


class CountingProjector:
    """Stands in for the deployment's status_projector: the real projector, plus a count of every outcome
    the handler's batches tallied."""

    def __init__(self, real) -> None:
        self._real = real
        self.outcomes: Counter[ProjectionOutcome] = Counter()

    def project_batch(self, *args: Any) -> Any:
        return self._real.project_batch(*args)

    def finish_batch(self, shard_id: str, tally) -> None:
        self.outcomes.update(tally.outcomes)
        self._real.finish_batch(shard_id, tally)


class RecordingRelay(Relay):
    """The real relay, keeping each batch's RelayOutcome (and its publisher, for the stats)."""

    outcomes: list
    publisher: KinesisPublisher

    def relay(self, records):
        outcome = super().relay(records)
        self.outcomes.append(outcome)
        return outcome


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def own_relay(settings, endpoint, kinesis, sleeps: Sleeps) -> RecordingRelay:
    """A relay wired like the deployment's, but on a Kinesis client the test holds, with a recorded sleep."""
    deployment = Deployment(settings, clients={"dynamodb": endpoint.client("dynamodb"), "kinesis": kinesis})
    publisher = KinesisPublisher(kinesis, settings.events_stream, sleep=sleeps)
    relay = RecordingRelay(publisher, deployment.checkpoint_store, deployment.parked_records,
                           deployment.outbox_reader)
    relay.outcomes, relay.publisher = [], publisher
    return relay


# --- delivery -------------------------------------------------------------------------------------------

def test_every_event_reaches_kinesis_once_in_version_order_keyed_by_job_id(store, clock, settings, dynamodb,
                                                                          endpoint, stack_environment):
    """The relay skips nothing by a position of its own, so each event goes out once only because the event
    source hands each record over once: without the mapping resuming each 16-record batch right after the
    last, records would be repeated or skipped. Without partition key = job_id a job's events would spread
    over the two Kinesis shards and lose their order; without one event per job per PutRecords call, a
    job's later event could be accepted before a retried earlier one. Without the relay's stamp, an event
    would reach Kinesis without `committed_at`, its stream record's ApproximateCreationDateTime."""
    job_ids = busy_history(store, clock)

    restart(settings, endpoint, batch_size=16).drain()

    events = outbox_events(settings, dynamodb)
    records = kinesis_records(endpoint, settings)
    assert len(events) > 40 and len({r.shard_id for r in records}) == 2
    assert Counter(r.event_id for r in records) == Counter(e.event_id for e in events)  # each exactly once
    assert all(r.partition_key == r.payload["job_id"] for r in records)
    published = {r.event_id: OutboxEvent.model_validate(r.payload) for r in records}
    seen = stream_records(endpoint, stream_arn(settings, dynamodb))
    commits = {r["dynamodb"]["NewImage"]["event_id"]["S"]: committed_at(r) for r in seen}
    assert all(published[e.event_id] == e.model_copy(update={"committed_at": commits[e.event_id]})
               for e in events)  # the event contract, field for field, plus the commit time the relay stamps
    assert_each_job_in_version_order(records)
    assert_views_final(store, settings, dynamodb, job_ids)


def test_the_mapping_position_advances_to_the_last_record_and_a_new_poller_resumes_after_it(
        store, clock, settings, dynamodb, endpoint, stack_environment, monkeypatch):
    """The relay skips nothing by a position of its own: only the event source mapping's position per shard
    (the last record done, and when that was recorded) keeps a restarted poller from starting again at the
    trim horizon, where the relay would publish everything twice. An event source that does redeliver from
    an older position (a Lambda mapping re-created) has every record published again, and without the
    projector's version guard those copies would be re-applied and move the view back to v1: here each is
    counted a duplicate (the version shown) or stale (an older one), none applied."""
    first = [lifecycle(store, clock) for _ in range(5)]
    before = iso(system_clock())
    relay_until_idle(restart(settings, endpoint).relay_poller)
    after = iso(system_clock())

    arn = stream_arn(settings, dynamodb)
    shards = stream_shards(endpoint, arn)
    position = {shard_id: mapping_position(settings, dynamodb, shard_id) for shard_id in shards}
    assert {s: p and p.sequence_number for s, p in position.items()} == {
        s: sequence(records[-1]) if records else None for s, records in shards.items()}  # each shard's, to its last
    assert sum(p is not None for p in position.values()) >= 2  # several shards hold the 15 records
    assert all(before <= p.event_time <= after for p in position.values() if p)  # when it was recorded

    second = [lifecycle(store, clock) for _ in range(3)]
    fresh = restart(settings, endpoint)  # a new poller: starts AFTER the stored position of each shard
    fresh.drain()

    records = kinesis_records(endpoint, settings)
    assert event_counts(records) == outbox_counts(settings, dynamodb)  # the first 15 not published again
    shards = stream_shards(endpoint, arn)
    moved = {shard_id: mapping_position(settings, dynamodb, shard_id) for shard_id in shards}
    assert {s: p and p.sequence_number for s, p in moved.items()} == {
        s: sequence(records[-1]) if records else None for s, records in shards.items()}
    grown = [s for s in shards if moved[s] != position[s]]
    assert grown and all(moved[s].sequence_number != (position[s] and position[s].sequence_number)
                         for s in grown)  # the shards the second jobs went to moved on
    assert all(moved[s].event_time >= position[s].event_time for s in shards if position[s])
    assert_views_final(store, settings, dynamodb, first + second)
    seen = stream_records(endpoint, arn)

    # A mapping re-created (a position of its own, none yet): the whole stream delivered again from its start.
    handlers_deployment = Deployment.from_environment()  # what the handlers use: this test's environment
    counting = CountingProjector(handlers_deployment.status_projector)
    monkeypatch.setattr(handlers_deployment, "status_projector", counting)
    recreated = restart(settings, endpoint)
    recreated.relay_poller = OutboxStreamPoller(endpoint.client("dynamodbstreams"), arn, relay_handler.handler,
                                                handlers_deployment.relay, handlers_deployment.checkpoint_store,
                                                consumer="local-mapping:relay-recreated")
    recreated.drain()

    assert len(seen) == 24
    assert {shard_id: mapping_position(settings, dynamodb, shard_id) for shard_id in shards} == moved
    again = kinesis_records(endpoint, settings)
    assert event_counts(again) == dict.fromkeys(outbox_counts(settings, dynamodb), 2)
    assert counting.outcomes == {ProjectionOutcome.DUPLICATE: 8, ProjectionOutcome.STALE: 16}  # v3s; v1s, v2s
    assert dynamodb.scan(TableName=settings.conflicts_table, Select="COUNT")["Count"] == 0
    assert_views_final(store, settings, dynamodb, first + second)


# --- crashes --------------------------------------------------------------------------------------------

def test_a_crash_before_put_records_loses_nothing(store, clock, settings, dynamodb, endpoint,
                                                  stack_environment):
    """The mapping's position is recorded only once the handler has answered for the batch: had it moved
    when the batch was read, the crashed batch would be skipped on restart (the relay has no position of its
    own to fall back on) and those jobs would never reach the view."""
    job_ids = busy_history(store, clock, jobs=8)
    crashed = restart(settings, endpoint)
    with injected("relay.before_put_records") as fired, pytest.raises(InjectedCrash):
        crashed.relay_poller.poll_once()
    assert fired == ["relay.before_put_records"]
    shard_ids = stream_shards(endpoint, stream_arn(settings, dynamodb))
    assert kinesis_records(endpoint, settings) == []
    assert all(mapping_position(settings, dynamodb, shard_id) is None for shard_id in shard_ids)

    restart(settings, endpoint).drain()

    records = kinesis_records(endpoint, settings)
    assert event_counts(records) == outbox_counts(settings, dynamodb)
    assert_each_job_in_version_order(records)
    assert_views_final(store, settings, dynamodb, job_ids)


def test_a_crash_after_put_records_republishes_that_batch_and_the_projector_counts_duplicates(
        store, settings, dynamodb, endpoint, stack_environment, monkeypatch):
    """PutRecords succeeded but the relay died before answering, so the mapping never recorded its position
    past the batch: on restart the batch is delivered again and the relay (which skips nothing) publishes it
    again. Without the projector's version guard the second copies would be re-applied (or, after a newer
    version, move the view backwards); with it they are counted duplicates (the version the view shows) or
    stale (an older one), and the view ends final. The stream has several shards, each polled in batches
    of 10: the crash hits the second batch of the first shard read, which holds 7 jobs or more."""
    arn = stream_arn(settings, dynamodb)
    job_ids, first = jobs_until_the_first_shard_holds(store, endpoint, arn, 7, at_least=20)  # every v1
    for _ in job_ids:
        store.complete(store.claim("w1", 30), {"ok": True})  # then v2, v3 of each
    shards = stream_shards(endpoint, arn)
    total = sum(len(records) for records in shards.values())
    assert total == 3 * len(job_ids) and len(shards[first]) >= 21
    crashed = restart(settings, endpoint, batch_size=10)
    # batch 1 of every shard: published, and the mapping's position recorded
    assert crashed.relay_poller.poll_once() == sum(min(10, len(records)) for records in shards.values())
    with injected("relay.after_put_records"), pytest.raises(InjectedCrash):
        crashed.relay_poller.poll_once()  # batch 2 of the first shard: published, then the relay dies
    for shard_id, records in shards.items():
        position = mapping_position(settings, dynamodb, shard_id)
        assert (position and position.sequence_number) == (sequence(records[:10][-1]) if records else None)
    crashed_batch = [event_of(r) for r in shards[first][10:20]]
    firsts = {event_of(r) for records in shards.values() for r in records[:10]}
    assert {r.event_id for r in kinesis_records(endpoint, settings)} == firsts | set(crashed_batch)

    # When the second copies arrive, the view shows the newest version of each job published before them.
    shown = {job_of(r): int(r["dynamodb"]["NewImage"]["version"]["N"]) for r in shards[first][:20]}
    again = Counter(ProjectionOutcome.DUPLICATE if int(event_id.rsplit(":", 1)[1]) == shown[job] else
                    ProjectionOutcome.STALE for job, event_id in ((e.rsplit(":", 1)[0], e) for e in crashed_batch))
    assert again[ProjectionOutcome.DUPLICATE] >= 1

    handlers_deployment = Deployment.from_environment()  # what the handlers use: this test's environment
    counting = CountingProjector(handlers_deployment.status_projector)
    monkeypatch.setattr(handlers_deployment, "status_projector", counting)
    restart(settings, endpoint, batch_size=10).drain()

    records = kinesis_records(endpoint, settings)
    counts = Counter(r.event_id for r in records)
    assert len(records) == total + 10
    assert {event_id for event_id, n in counts.items() if n == 2} == set(crashed_batch)
    assert set(counts.values()) == {1, 2} and set(counts) == set(outbox_counts(settings, dynamodb))
    assert +counting.outcomes == +(Counter({ProjectionOutcome.APPLIED: total}) + again)
    assert dynamodb.scan(TableName=settings.conflicts_table, Select="COUNT")["Count"] == 0
    assert_each_job_in_version_order(records)
    assert_views_final(store, settings, dynamodb, job_ids)


# --- Kinesis refusing entries ---------------------------------------------------------------------------

def test_entries_kinesis_refuses_are_retried_alone_counted_and_kept_in_job_order(
        store, settings, dynamodb, endpoint, stack_environment, monkeypatch):
    """Without retrying the failed entries the throttled events would be lost (or, retried with the whole
    request, the accepted ones duplicated); without holding a job's next event until its earlier one is
    accepted, v2 of a throttled job would land in Kinesis before its v1. The first shard read holds 6 jobs;
    the relay's first PutRecords call is that shard's v1s."""
    arn = stream_arn(settings, dynamodb)
    job_ids, first = jobs_until_the_first_shard_holds(store, endpoint, arn, 6)
    for _ in job_ids:
        store.complete(store.claim("w1", 30), {"ok": True})
    others = sum(1 for shard_id, records in stream_shards(endpoint, arn).items() if records and shard_id != first)
    kinesis = endpoint.client("kinesis")
    failures = PartialFailures(kinesis, [{0: THROTTLED, 3: THROTTLED, 5: THROTTLED}, {1: "InternalFailure"}])
    sleeps = Sleeps()
    relay = own_relay(settings, endpoint, kinesis, sleeps)
    monkeypatch.setattr(Deployment.from_environment(), "relay", relay)  # the handler's

    restart(settings, endpoint).drain()

    # The first shard's batch of 18 records: v1s (6 entries, 3 refused), the 3 again (1 refused), that 1,
    # then v2s, v3s; every other shard's batch: its v1s, v2s, v3s, none refused.
    assert failures.calls == 5 + 3 * others
    assert sum(o.retried_entries for o in relay.outcomes) == 4 == relay.publisher.stats.retried_entries
    assert sum(o.requests for o in relay.outcomes) == 5 + 3 * others
    assert relay.publisher.stats.error_codes == {THROTTLED: 3, "InternalFailure": 1}
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] / 2
    assert sum(o.published for o in relay.outcomes) == 3 * len(job_ids)
    records = kinesis_records(endpoint, settings)
    assert event_counts(records) == outbox_counts(settings, dynamodb)
    assert_each_job_in_version_order(records)
    assert_views_final(store, settings, dynamodb, job_ids)


def test_an_entry_that_keeps_failing_is_reported_so_the_event_source_resumes_there(
        store, settings, dynamodb, endpoint, stack_environment, monkeypatch):
    """The handler's partial batch response names the first record not published, and the mapping's
    position stops before it: without that, Lambda (and the poller) would move past an event Kinesis never
    took, and nothing else (the relay keeps no position) would ever publish it. The records before it are
    not delivered again; those after it are, and their second copies are absorbed by the projector. The
    first shard read holds 4 jobs: its batch is the relay's first PutRecords call; the other shards' are not
    refused."""
    arn = stream_arn(settings, dynamodb)
    job_ids, first = jobs_until_the_first_shard_holds(store, endpoint, arn, 4)
    kinesis = endpoint.client("kinesis")
    PartialFailures(kinesis, [{2: "KMSAccessDeniedException"}])  # not retriable: the publish stops
    relay = own_relay(settings, endpoint, kinesis, Sleeps())
    monkeypatch.setattr(Deployment.from_environment(), "relay", relay)  # the handler's
    shards = stream_shards(endpoint, arn)
    seen = shards[first]
    responses: list[dict[str, Any]] = []

    def answering(event: dict[str, Any], context: Any) -> dict[str, Any]:
        responses.append(relay_handler.handler(event, context))
        return responses[-1]

    poller = OutboxStreamPoller(endpoint.client("dynamodbstreams"), arn, answering, relay,
                                CheckpointStore(dynamodb, settings.checkpoint_table))
    assert poller.poll_once() == len(job_ids)  # one batch of every shard

    others = [records for shard_id, records in shards.items() if records and shard_id != first]
    assert responses == [{"batchItemFailures": [{"itemIdentifier": sequence(seen[2])}]}] + [
        {"batchItemFailures": []}] * len(others)
    assert mapping_position(settings, dynamodb, first).sequence_number == sequence(seen[1])
    poller.write_positions()  # the other shards' positions: written at most once a second, or at a stop
    assert relay.outcomes[0].first_unpublished == sequence(seen[2]) and relay.outcomes[0].published == 3
    for shard_id, records in shards.items():
        if shard_id != first:
            position = mapping_position(settings, dynamodb, shard_id)
            assert (position and position.sequence_number) == (sequence(records[-1]) if records else None)

    restart(settings, endpoint).drain()  # Kinesis takes it now: a new poller resumes after the position
    records = kinesis_records(endpoint, settings)
    # the first shard's 4th job's v1 was accepted in the refused request and is delivered again from the
    # failed record on; every other event once
    assert event_counts(records) == {**dict.fromkeys((f"{job_id}:1" for job_id in job_ids), 1),
                                     event_of(seen[3]): 2}
    assert_views_final(store, settings, dynamodb, job_ids)


# --- trimmed stream -------------------------------------------------------------------------------------

class TrimmedStreams:
    """The outbox stream's client as after a long relay outage: everything up to now was trimmed, on every
    shard. Reading after the mapping's stored position on a shard fails (once per shard) with
    TrimmedDataAccessException, and the trim horizon is the stream's current end."""

    def __init__(self, real) -> None:
        self._real = real
        self.refused: dict[str, str] = {}  # shard id -> the sequence number refused

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        if request["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER" and request["ShardId"] not in self.refused:
            self.refused[request["ShardId"]] = request["SequenceNumber"]
            error = {"Code": "TrimmedDataAccessException",
                     "Message": "the requested sequence number is beyond the trim horizon"}
            raise ClientError({"Error": error}, "GetShardIterator")
        if request["ShardIteratorType"] == "TRIM_HORIZON":
            request = {**request, "ShardIteratorType": "LATEST"}
        return self._real.get_shard_iterator(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_trimmed_stream_is_recovered_from_the_outbox_since_the_relay_watermark_minus_a_margin(
        store, clock, settings, dynamodb, endpoint, stack_environment):
    """The mapping's stored position is beyond the trim horizon. Without Relay.recover the events committed
    while the relay was away (job c) would be silently skipped: the trimmed stream no longer holds them.
    Recovery starts at the relay's watermark (a beat's commit time, once the relay passed all its slots on)
    minus a margin; without the watermark it would re-publish the whole outbox (job a twice too). The outbox
    is read by the writers' decision times, not by commit times: without the margin, job c (committed after
    the beat by a writer whose clock lags, so decided "before" it) would be missed; with it, job b (relayed
    before the beat, within the margin) is re-published too, and job a (older) is not. Every shard with a
    stored position was trimmed, and the mapping recovers on each: job b's and job c's events are
    re-published once per such shard, job a's never."""
    now = system_clock()
    clock.now = now - 60 * 60_000
    job_a = lifecycle(store, clock)
    clock.now = now - 2 * 60_000
    job_b = lifecycle(store, clock)
    before = restart(settings, endpoint)
    beat = before.heartbeats.emit()  # so that the relay's watermark exists
    relay_until_idle(before.relay_poller)
    arn = stream_arn(settings, dynamodb)
    shards = stream_shards(endpoint, arn)
    seen = stream_records(endpoint, arn)
    beats = [r for r in seen if r["dynamodb"]["NewImage"].get("kind") == {"S": "heartbeat"}]
    assert len(beats) == beat.slots == SLOTS_PER_SHARD * len(shards)  # 16 per open shard
    watermark = Deployment.from_environment().relay.watermark()
    assert watermark is not None and watermark.newest_event_at == min(
        *(committed_at(r) for r in beats), beat.vouches_until)  # no later than the beat's listing
    assert epoch_ms(store.events(job_b)[0].occurred_at) > epoch_ms(watermark.newest_event_at) - RECOVERY_MARGIN_MS
    assert epoch_ms(store.events(job_a)[-1].occurred_at) < epoch_ms(watermark.newest_event_at) - RECOVERY_MARGIN_MS
    positions = {shard_id: mapping_position(settings, dynamodb, shard_id).sequence_number
                 for shard_id, records in shards.items() if records}
    assert positions == {shard_id: sequence(records[-1]) for shard_id, records in shards.items() if records}
    assert all(mapping_position(settings, dynamodb, shard_id) is None
               for shard_id, records in shards.items() if not records)
    clock.now = epoch_ms(watermark.newest_event_at) - 3 * 60_000  # a writer whose clock is 3 minutes behind
    job_c = lifecycle(store, clock)  # committed after the beat while the relay was away, then trimmed
    assert store.events(job_c)[-1].occurred_at < watermark.newest_event_at

    pipeline = restart(settings, endpoint)
    streams = TrimmedStreams(endpoint.client("dynamodbstreams"))
    handlers_deployment = Deployment.from_environment()
    recovering = Relay(handlers_deployment.events_publisher, handlers_deployment.checkpoint_store,
                       handlers_deployment.parked_records, handlers_deployment.outbox_reader)  # as LocalPipeline's
    pipeline.relay_poller = OutboxStreamPoller(streams, arn, relay_handler.handler, recovering,
                                               handlers_deployment.checkpoint_store)
    pipeline.drain()
    assert streams.refused == positions  # every shard with a position: each recovered from the outbox
    recoveries = len(positions)
    clock.now = system_clock()
    job_d = lifecycle(store, clock)  # after the recovery: read from the stream again
    pipeline.drain()

    counts = Counter(r.event_id for r in kinesis_records(endpoint, settings))
    copies = {job: {counts[e.event_id] for e in store.events(job)} for job in (job_a, job_b, job_c, job_d)}
    assert copies == {job_a: {1}, job_b: {1 + recoveries}, job_c: {recoveries}, job_d: {1}}
    assert set(counts) == {e.event_id for e in outbox_events(settings, dynamodb)}  # nothing lost
    assert_each_job_in_version_order(kinesis_records(endpoint, settings))
    assert_views_final(store, settings, dynamodb, [job_a, job_b, job_c, job_d])


# --- the Lambda handler ---------------------------------------------------------------------------------

_KEEP: Any = object()


def lambda_record(record: dict[str, Any], arn: str, *, event_name: str | None = None,
                  new_image: Any = _KEEP, old_image: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DynamoDB-stream record as Lambda delivers it (the shape OutboxStreamPoller builds), optionally
    with another event name or images (new_image=None: no NewImage, as in a REMOVE)."""
    dynamodb = {**record["dynamodb"],
                "ApproximateCreationDateTime": record["dynamodb"]["ApproximateCreationDateTime"].timestamp()}
    if new_image is None:
        del dynamodb["NewImage"]
    elif new_image is not _KEEP:
        dynamodb["NewImage"] = new_image
    if old_image is not None:
        dynamodb |= {"OldImage": old_image, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return {"eventID": record["eventID"], "eventName": event_name or record["eventName"],
            "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": dynamodb, "eventSourceARN": arn}


def test_the_handler_publishes_inserts_ignores_other_records_and_parks_a_bad_image(
        store, settings, dynamodb, endpoint, stack_environment):
    """Without the INSERT filter a MODIFY/REMOVE (a TTL expiry) would be published as an event; without
    parking, one invalid image would fail the batch forever and block every record behind it. Lambda's
    event names no shard, so the parked record is keyed by the outbox stream; each published event carries
    its own record's ApproximateCreationDateTime as `committed_at`."""
    job_ids = [store.create("acme", ECHO).job.job_id for _ in range(6)]
    arn = stream_arn(settings, dynamodb)
    seen = stream_records(endpoint, arn)  # commit order: job n's v1 is seen[n], whichever shard holds it
    broken = {**seen[3]["dynamodb"]["NewImage"], "version": {"S": "three"}}
    event = {"Records": [
        lambda_record(seen[0], arn),
        lambda_record(seen[1], arn, event_name="MODIFY"),
        lambda_record(seen[2], arn, event_name="REMOVE", new_image=None,
                      old_image=seen[2]["dynamodb"]["NewImage"]),
        lambda_record(seen[3], arn, new_image=broken),
        lambda_record(seen[4], arn),
        lambda_record(seen[5], arn),
    ]}

    assert relay_handler.handler(event, LocalLambdaContext("onward-relay")) == {"batchItemFailures": []}

    published = {r.event_id: r.payload["committed_at"] for r in kinesis_records(endpoint, settings)}
    assert published == {f"{job_ids[n]}:1": committed_at(seen[n]) for n in (0, 4, 5)}
    (parked,) = ParkedRecords(dynamodb, settings.parked_table).parked_by("relay")
    assert (parked.shard_id, parked.sequence_number) == (OUTBOX_STREAM, sequence(seen[3]))
    assert parked.reason.startswith("invalid outbox image") and b"three" in parked.raw
    nothing = relay_handler.handler({"Records": []}, LocalLambdaContext("onward-relay"))
    assert nothing == {"batchItemFailures": []}


def test_an_event_too_large_for_a_kinesis_record_is_parked_not_retried_forever(store, settings, dynamodb,
                                                                                stack_environment):
    """Kinesis refuses records over 1 MiB. Without the size check the relay would fail that batch on
    every redelivery and block the shard behind it; it is parked with its bytes (keyed by the outbox
    stream: the relay is never told the shard) and the batch reports no failure, so the shard moves on."""
    job = store.create("acme", NewJob(type="demo.echo")).job
    (event,) = store.events(job.job_id)
    huge = event.model_copy(update={"error": ErrorSummary(error_type="E", message="x" * 1_100_000)})
    image = dict(_image_of(huge))
    relay = Deployment(settings, clients={"dynamodb": dynamodb}).relay
    outcome = relay.relay([StreamRecord("7", "INSERT", image, system_clock())])
    assert (outcome.parked, outcome.published, outcome.first_unpublished) == (1, 0, None)
    (parked,) = ParkedRecords(dynamodb, settings.parked_table).parked_by("relay")
    assert (parked.shard_id, parked.sequence_number) == (OUTBOX_STREAM, "7")
    assert "1 MiB" in parked.reason and parked.raw_size > 1_000_000
    assert parked.raw_truncated and parked.raw == _encoded(huge)[: len(parked.raw)]


def _encoded(event: OutboxEvent) -> bytes:
    from onward.pipeline.relay.publisher import encode

    return encode(event)


def _image_of(event: OutboxEvent) -> dict[str, Any]:
    from onward.store.dynamo.attributes import to_item

    return to_item(event.model_dump(mode="json", by_alias=True))

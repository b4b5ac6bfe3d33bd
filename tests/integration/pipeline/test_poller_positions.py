"""How often the local event-source pollers (infra/onward_infra/pollers/) write their own position per shard.

A position written after every batch was 0.5-0.7 UpdateItem per job; Lambda's mappings keep theirs for
free. A shard's position is now written at most once per POSITION_EVERY_S while its records keep flowing,
and exactly when the shard is caught up (a poll delivers nothing), before it is read again from a position
(a partial batch failure), and when the platform stops. A crash in between redelivers what followed the
stored position, which the relay and the projector absorb (versions).
"""

from __future__ import annotations

import base64
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.projection import ProjectionOutcome
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.faults import InjectedCrash
from onward.pipeline.checkpoints import Checkpoint, CheckpointStore
from onward.pipeline.relay.relay import Relay
from onward.runtime.demo_jobs import registry
from onward_infra.pipeline import LocalPipeline
from onward_infra.platform import LocalPlatform, PlatformOptions
from onward_infra.pollers import POSITION_EVERY_S, EventsStreamPoller, OutboxStreamPoller, ShardBackoff
from tests.integration.pipeline.test_relay import (
    CountingProjector,
    assert_views_final,
    kinesis_records,
    lifecycle,
    sequence,
    stream_arn,
    stream_shards,
    view,
)
from tests.support import CallCounting

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # they read the streams

RELAY_MAPPING = "local-mapping:relay"
PROJECTOR_MAPPING = "local-mapping:projector"
NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)
CLIENTS = ("dynamodb", "dynamodbstreams", "kinesis")


class FakeMonotonic:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class PositionWrite:
    consumer: str
    shard_id: str
    sequence_number: str
    at: float  # the fake monotonic clock when it was written


class CountingPositions(CheckpointStore):
    """The real checkpoint store, keeping every position write (one conditional UpdateItem each)."""

    def __init__(self, client: Any, table: str, clock: FakeMonotonic) -> None:
        super().__init__(client, table)
        self._clock = clock
        self.writes: list[PositionWrite] = []

    def advance(self, consumer: str, checkpoint: Checkpoint) -> bool:
        self.writes.append(PositionWrite(consumer, checkpoint.shard_id, checkpoint.sequence_number, self._clock()))
        return super().advance(consumer, checkpoint)


class AnsweringHandler:
    """Stands in for the projector handler: keeps each batch's sequence numbers, and reports the record at
    `fail_at` (the first time it is delivered) as the batch's first failure."""

    def __init__(self, fail_at: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self._fail_at = fail_at

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        sequences = [record["kinesis"]["sequenceNumber"] for record in event["Records"]]
        self.batches.append(sequences)
        if self._fail_at in sequences:
            failed, self._fail_at = self._fail_at, None
            return {"batchItemFailures": [{"itemIdentifier": failed}]}
        return {"batchItemFailures": []}


def put_on_one_shard(endpoint, settings, count: int) -> tuple[str, list[str]]:
    """`count` records on the events stream under one partition key: their shard, and their sequence numbers."""
    kinesis = endpoint.client("kinesis")
    answer = kinesis.put_records(StreamName=settings.events_stream, Records=[
        {"Data": f"record {n}".encode(), "PartitionKey": "one-key"} for n in range(count)])
    (shard_id,) = {entry["ShardId"] for entry in answer["Records"]}
    return shard_id, [entry["SequenceNumber"] for entry in answer["Records"]]


def test_a_steady_flow_writes_a_shards_position_at_most_once_per_position_every_s(endpoint, settings, dynamodb):
    """18 batches of one record, one poll every 0.25 s: the position is written at most once per
    POSITION_EVERY_S while they flow (3 writes, each at least POSITION_EVERY_S after the previous one), then
    once more, exactly, by the round that finds nothing. Without the change every batch wrote it (18 writes
    during the flow), as the control poller reading the same records with `position_every_s=0` still does;
    a poller that never wrote while busy would leave none before the idle round."""
    shard_id, sequences = put_on_one_shard(endpoint, settings, 18)
    clock = FakeMonotonic()
    positions = CountingPositions(dynamodb, settings.checkpoint_table, clock)
    handler = AnsweringHandler()
    paced = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, handler, positions,
                               batch_size=1, backoff=NO_BACKOFF, monotonic=clock)
    every_batch = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, AnsweringHandler(),
                                     positions, batch_size=1, consumer="local-mapping:every-batch",
                                     backoff=NO_BACKOFF, monotonic=clock, position_every_s=0.0)

    for _ in sequences:
        assert paced.poll_once() == 1 and every_batch.poll_once() == 1
        clock.now += 0.25
    during_flow = [w for w in positions.writes if w.consumer == PROJECTOR_MAPPING]
    assert len(handler.batches) == 18
    assert len([w for w in positions.writes if w.consumer == "local-mapping:every-batch"]) == 18
    assert {w.shard_id for w in during_flow} == {shard_id}
    assert len(during_flow) == 3  # at 1.0, 2.25 and 3.5 s of a 4.25 s flow
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(during_flow)]
    assert all(gap >= POSITION_EVERY_S for gap in gaps), gaps
    stored = positions.checkpoint(PROJECTOR_MAPPING, shard_id)
    assert stored is not None and stored.sequence_number == during_flow[-1].sequence_number != sequences[-1]

    written = len(positions.writes)
    assert paced.poll_once() == 0  # caught up: the exact position at once
    assert [w.sequence_number for w in positions.writes[written:]] == [sequences[-1]]
    stored = positions.checkpoint(PROJECTOR_MAPPING, shard_id)
    assert stored is not None and stored.sequence_number == sequences[-1]
    writes = len(positions.writes)
    assert paced.poll_once() == 0 and len(positions.writes) == writes, "an unmoved position is not written again"


def test_a_partial_batch_failure_writes_the_position_before_the_failed_record_at_once(
        endpoint, settings, dynamodb):
    """The handler reports the third record of the first batch as failed, the clock standing still: the
    position is written at once, exactly before it (the next batch starts there, and a restart must resume
    there too). Without the write before the move, nothing would be stored until a second passed or the
    shard was caught up."""
    shard_id, sequences = put_on_one_shard(endpoint, settings, 5)
    clock = FakeMonotonic()
    positions = CountingPositions(dynamodb, settings.checkpoint_table, clock)
    handler = AnsweringHandler(fail_at=sequences[2])
    poller = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, handler, positions,
                                batch_size=10, backoff=NO_BACKOFF, monotonic=clock)

    assert poller.poll_once() == 5
    stored = positions.checkpoint(PROJECTOR_MAPPING, shard_id)
    assert stored is not None and stored.sequence_number == sequences[1]
    assert poller.poll_once() == 3 and handler.batches[-1] == sequences[2:]


def test_a_crash_leaving_a_poll_stores_what_was_done_before_it(endpoint, settings, dynamodb):
    """The handler crashes (InjectedCrash, not an Exception: the poll cannot absorb it) on the second batch,
    the clock standing still: the first batch's position is stored on the way out, and a new poller (as the
    soak's supervisor builds after a crash) redelivers only the crashed batch onwards. Without the write, a
    poller rebuilt after each crash would restart a second back every time (the soak's projector, crashing
    more often than that, fell behind and left Kinesis records unhandled)."""
    shard_id, sequences = put_on_one_shard(endpoint, settings, 6)
    monotonic = FakeMonotonic()
    positions = CheckpointStore(dynamodb, settings.checkpoint_table)

    def crashing(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event["Records"][0]["kinesis"]["sequenceNumber"] == sequences[2]:
            raise InjectedCrash("projector.mid_batch")
        return {"batchItemFailures": []}

    crashed = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, crashing, positions,
                                 batch_size=2, backoff=NO_BACKOFF, monotonic=monotonic)
    assert crashed.poll_once() == 2
    assert positions.checkpoint(PROJECTOR_MAPPING, shard_id) is None  # within POSITION_EVERY_S: not yet
    with pytest.raises(InjectedCrash):
        crashed.poll_once()
    stored = positions.checkpoint(PROJECTOR_MAPPING, shard_id)
    assert stored is not None and stored.sequence_number == sequences[1]

    handler = AnsweringHandler()
    restarted = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, handler, positions,
                                   batch_size=10, backoff=NO_BACKOFF, monotonic=monotonic)
    assert restarted.poll_once() == 4 and handler.batches == [sequences[2:]]


def test_a_platform_stop_writes_the_exact_positions_its_pollers_had_not_written(
        stack_environment, store, clock, settings, dynamodb, endpoint):
    """Both pollers deliver everything in one poll each (so within POSITION_EVERY_S: nothing written yet),
    then the platform stops as `onward up` does on Ctrl-C: every shard's position is then the last record
    delivered. Without the write at stop, a graceful stop would leave positions up to a second behind, and
    the next `onward up` would deliver those records again."""
    jobs = [lifecycle(store, clock) for _ in range(4)]
    platform = LocalPlatform(Deployment.from_environment(), registry, PlatformOptions(http_port=0))
    platform.gateway.start()  # the loops are not started: the test polls, so nothing else does
    checkpoints = CheckpointStore(dynamodb, settings.checkpoint_table)
    outbox = {shard_id: records for shard_id, records in stream_shards(endpoint, stream_arn(settings, dynamodb)).items()
              if records}

    assert platform.pipeline.relay_poller.poll_once() == 3 * len(jobs)
    events = kinesis_records(endpoint, settings)
    assert platform.pipeline.projector_poller.poll_once() == len(events) == 3 * len(jobs)
    assert all(checkpoints.checkpoint(RELAY_MAPPING, shard_id) is None for shard_id in outbox)
    assert all(checkpoints.checkpoint(PROJECTOR_MAPPING, event.shard_id) is None for event in events)
    platform.stop()

    relay_positions = {shard_id: getattr(checkpoints.checkpoint(RELAY_MAPPING, shard_id), "sequence_number", None)
                       for shard_id in outbox}
    assert relay_positions == {shard_id: sequence(records[-1]) for shard_id, records in outbox.items()}
    last_event = {record.shard_id: record.sequence_number for record in events}  # in sequence order
    projector_positions = {shard_id: getattr(checkpoints.checkpoint(PROJECTOR_MAPPING, shard_id),
                                             "sequence_number", None) for shard_id in last_event}
    assert projector_positions == {shard_id: str(number) for shard_id, number in last_event.items()}
    assert_views_final(store, settings, dynamodb, jobs)


def test_a_restart_after_a_crash_redelivers_what_followed_the_stored_positions_and_changes_no_view(
        stack_environment, store, clock, settings, dynamodb, endpoint, monkeypatch):
    """Jobs relayed and projected until caught up (exact positions), then one more job's three records
    relayed and projected in batches of one within POSITION_EVERY_S, and the process dies (no stop, no idle
    round): its positions are not stored. A restarted pipeline delivers exactly those records again: the
    relay re-publishes that job's three events, the projector reads its three events and their three
    copies, and absorbs all six (stale or duplicate, nothing applied): every view stays as it was. A poller
    that wrote its position ahead of the handlers would lose the records instead (nothing redelivered);
    one that never wrote would redeliver everything."""
    deployment = Deployment.from_environment()  # the handlers' components
    monotonic = FakeMonotonic()
    relay = Relay(deployment.events_publisher, deployment.checkpoint_store, deployment.parked_records,
                  deployment.outbox_reader)
    arn = stream_arn(settings, dynamodb)
    relay_poller = OutboxStreamPoller(endpoint.client("dynamodbstreams"), arn, relay_handler.handler, relay,
                                      deployment.checkpoint_store, batch_size=1, backoff=NO_BACKOFF,
                                      monotonic=monotonic)
    projector_poller = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream,
                                          projector_handler.handler, deployment.checkpoint_store, batch_size=1,
                                          backoff=NO_BACKOFF, monotonic=monotonic)
    earlier = [lifecycle(store, clock) for _ in range(3)]
    while relay_poller.poll_once() + projector_poller.poll_once():
        monotonic.now += 0.25
    last = lifecycle(store, clock)
    for _ in range(3):  # its three records, one batch each, the clock standing still
        assert relay_poller.poll_once() == 1
    for _ in range(3):
        assert projector_poller.poll_once() == 1
    jobs = [*earlier, last]
    views_before = {job_id: view(settings, dynamodb, job_id) for job_id in jobs}
    shown = views_before[last]
    assert shown is not None and shown["version"] == 3
    # the crash: the pollers are dropped without write_positions

    counting = CountingProjector(deployment.status_projector)
    monkeypatch.setattr(deployment, "status_projector", counting)
    LocalPipeline.build(settings, {name: endpoint.client(name) for name in CLIENTS}).drain()

    copies = Counter(record.event_id for record in kinesis_records(endpoint, settings))
    assert {event_id for event_id, n in copies.items() if n > 1} == {f"{last}:{v}" for v in (1, 2, 3)}
    assert set(copies.values()) == {1, 2}
    assert +counting.outcomes == Counter({ProjectionOutcome.STALE: 4, ProjectionOutcome.DUPLICATE: 2})
    assert {job_id: view(settings, dynamodb, job_id) for job_id in jobs} == views_before
    assert_views_final(store, settings, dynamodb, jobs)


class CrashingOnce(AnsweringHandler):
    """Keeps each batch, and dies (InjectedCrash: the invocation's process) on the first delivery of
    `crash_at`."""

    def __init__(self, crash_at: str) -> None:
        super().__init__()
        self._crash_at: str | None = crash_at

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = super().__call__(event, context)
        if self._crash_at in self.batches[-1]:
            self._crash_at = None
            raise InjectedCrash("the invocation died")
        return answer


def test_a_poller_polled_again_after_a_crash_delivers_the_crashed_batch_again(endpoint, settings, dynamodb):
    """A crash in the handler leaves the poll; the same poller, polled again (as Lambda's mapping outlives
    a crashed invocation, and as the soak keeps it), delivers the crashed batch again and then the rest:
    nothing skipped, nothing delivered out of order. (The poller re-opens the shard from its last good
    position; a Kinesis iterator can also be read again, so a poller keeping it would pass here too: what
    this guards is that a poller is fit to be polled again after a crash at all.)"""
    _, sequences = put_on_one_shard(endpoint, settings, 6)
    clock = FakeMonotonic()
    positions = CountingPositions(dynamodb, settings.checkpoint_table, clock)
    handler = CrashingOnce(crash_at=sequences[2])
    poller = EventsStreamPoller(endpoint.client("kinesis"), settings.events_stream, handler, positions,
                                batch_size=2, backoff=NO_BACKOFF, monotonic=clock)
    assert poller.poll_once() == 2
    with pytest.raises(InjectedCrash):
        poller.poll_once()
    while poller.poll_once():
        pass
    assert handler.batches == [sequences[0:2], sequences[2:4], sequences[2:4], sequences[4:6]]


def test_the_projector_poller_keeps_its_listing_while_polls_find_records(endpoint, settings, dynamodb):
    """As the outbox poller: one ListShards for the polls that keep finding records, one more once
    RELIST_EVERY_S passed, and one before a poll answers that it found nothing. Without the kept listing
    every poll listed the shards (about a third of the projector's requests in a burst; ListShards is
    throttled per stream on AWS)."""
    _, sequences = put_on_one_shard(endpoint, settings, 8)
    clock = FakeMonotonic()
    kinesis = CallCounting(endpoint.client("kinesis"), "list_shards")
    handler = AnsweringHandler()
    poller = EventsStreamPoller(kinesis, settings.events_stream, handler,
                                CountingPositions(dynamodb, settings.checkpoint_table, clock), batch_size=2,
                                backoff=NO_BACKOFF, monotonic=clock)
    assert all(poller.poll_once() > 0 for _ in range(3))
    assert kinesis.calls == 1
    clock.now += 3.0  # RELIST_EVERY_S
    assert poller.poll_once() > 0
    assert kinesis.calls == 2
    assert poller.poll_once() == 0
    assert kinesis.calls == 3, "an idle answer rests on a listing made in the same poll"
    assert [sequence for batch in handler.batches for sequence in batch] == sequences


def test_a_split_under_the_projector_poller_s_kept_listing_is_found_and_read_parents_first(
        endpoint, settings, dynamodb):
    """The events stream doubles its shards while the poller holds a listing from before and its clock
    stands still: the parent is read to its end, which makes the poller list again, and the children are
    read after it. Every record is delivered once, the parent's before its children's. Without relisting
    when a shard ends (or before an idle answer) the children would never be read."""
    kinesis_client = endpoint.client("kinesis")

    def put(texts: list[str]) -> None:
        kinesis_client.put_records(StreamName=settings.events_stream, Records=[
            {"Data": text.encode(), "PartitionKey": "one-key"} for text in texts])

    before, after = [f"before {n}" for n in range(6)], [f"after {n}" for n in range(4)]
    put(before)
    delivered: list[tuple[str, str]] = []  # (shard, data) in delivery order

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered.extend((record["eventID"].partition(":")[0], base64.b64decode(record["kinesis"]["data"]).decode())
                         for record in event["Records"])
        return {"batchItemFailures": []}

    clock = FakeMonotonic()
    kinesis = CallCounting(kinesis_client, "list_shards")
    poller = EventsStreamPoller(kinesis, settings.events_stream, handler,
                                CountingPositions(dynamodb, settings.checkpoint_table, clock), batch_size=2,
                                backoff=NO_BACKOFF, monotonic=clock)
    assert poller.poll_once() > 0
    summary = kinesis_client.describe_stream_summary(StreamName=settings.events_stream)["StreamDescriptionSummary"]
    kinesis_client.update_shard_count(StreamName=settings.events_stream, ScalingType="UNIFORM_SCALING",
                                      TargetShardCount=2 * summary["OpenShardCount"])
    put(after)
    while poller.poll_once() > 0:
        pass
    assert [data for _, data in delivered] == before + after, "each once, the parent's first"
    parent = delivered[0][0]
    children = {shard for shard, data in delivered if data.startswith("after")}
    listed = kinesis_client.list_shards(StreamName=settings.events_stream)["Shards"]
    shards = {shard["ShardId"]: shard for shard in listed}
    assert all(shards[child].get("ParentShardId") == parent for child in children)
    assert kinesis.calls >= 2

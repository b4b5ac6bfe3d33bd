"""Pipeline heartbeats (onward.pipeline.heartbeats) through the real path: outbox table -> its DynamoDB stream ->
onward.entrypoints.relay.handler -> every shard of the Kinesis stream -> onward.entrypoints.projector.handler ->
watermarks.

A beat is one outbox item per slot; the relay passes each slot's commit time (the stream record's
ApproximateCreationDateTime: DynamoDB's clock, never a test's ManualClock) to every Kinesis shard, and a
shard's watermark is its oldest slot's. So the watermarks here are compared with commit times read from the
outbox stream itself (`slot_commits`).

What breaks without which code:
- without the relay putting a heartbeat on EVERY shard (ExplicitHashKey per open shard), the shards that
  carry no job events have no watermark and the view's lag is unknown while idle.
- without the projector treating a heartbeat as a watermark-only record, it would be parked as unreadable
  (or written into the view as a job).
- without events leaving the watermarks alone, one job's event (one partition of the outbox) would vouch for
  every other partition: a drain with no beat would read as fresh.
- without the relay holding a heartbeat back until the batch's events are out, a heartbeat could vouch for
  events that never reached Kinesis (the watermark would claim a completeness the view does not have).
- without commit times (the relay's `through`), a watermark would carry the emitter's clock, which says
  nothing of what DynamoDB committed before it.
- without OutboxReader skipping heartbeats, replay, rebuild and audits would choke on them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.freshness import view_lag
from onward.domain.models import NewJob
from onward.faults import InjectedCrash, injected
from onward.operator.lag import LagProbe
from onward.pipeline.checkpoints import CheckpointStore
from onward.pipeline.heartbeat_writer import Beat, HeartbeatEmitter, OutboxStreamListing
from onward.pipeline.heartbeats import slot_count
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.shards import open_shards
from onward.pipeline.view import StatusViewReader
from onward_infra.pipeline import LocalPipeline

pytestmark = pytest.mark.integration


def emitter_of(settings, endpoint, clock=system_clock) -> HeartbeatEmitter:
    """A heartbeat emitter of the deployment's kind, on `clock` (its beats' versions and listings)."""
    db = endpoint.client("dynamodb")
    listing = OutboxStreamListing(db, endpoint.client("dynamodbstreams"), settings.outbox_table, clock)
    return HeartbeatEmitter(db, settings.outbox_table, listing, clock=clock, slack_ms=settings.beat_slack_ms)


def vouched(beat: Beat, committed: dict[int, int]) -> str:
    """What a beat confirms once every slot is through: its oldest slot's commit, or its bound if earlier."""
    return iso(min(*committed.values(), epoch_ms(beat.vouches_until)))


def projector_watermarks(settings, dynamodb):
    return CheckpointStore(dynamodb, settings.checkpoint_table).watermarks("projector")


def slot_commits_by_shard(endpoint, outbox_table: str, beat_at: int | None = None) -> dict[str, dict[int, int]]:
    """Per shard of the outbox table's stream, per heartbeat slot it carries, the commit time (epoch ms, the
    record's ApproximateCreationDateTime, as the relay reads it) of the slot's newest item; only the beat
    written at `beat_at` (its items' `version`) when given. Read from the stream itself, every shard."""
    db, streams = endpoint.client("dynamodb"), endpoint.client("dynamodbstreams")
    arn = db.describe_table(TableName=outbox_table)["Table"]["LatestStreamArn"]
    found: dict[str, dict[int, int]] = {}
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        slots = found.setdefault(shard["ShardId"], {})
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page["Records"]:
                image: dict[str, Any] = record["dynamodb"].get("NewImage", {})
                if record["eventName"] != "INSERT" or image.get("kind", {}).get("S") != "heartbeat":
                    continue
                if beat_at is not None and int(image["version"]["N"]) != beat_at:
                    continue
                slot = int(image["slot"]["N"])
                committed = int(float(record["dynamodb"]["ApproximateCreationDateTime"].timestamp()) * 1000)
                slots[slot] = max(slots.get(slot, 0), committed)
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return found


def outbox_shard_of(endpoint, outbox_table: str, job_id: str) -> str:
    """The outbox-stream shard holding a job's records (they all go to its partition key's shard)."""
    db, streams = endpoint.client("dynamodb"), endpoint.client("dynamodbstreams")
    arn = db.describe_table(TableName=outbox_table)["Table"]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            if any(record["dynamodb"]["Keys"]["job_id"]["S"] == job_id for record in page["Records"]):
                return shard["ShardId"]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    raise AssertionError(f"no record of {job_id} on the outbox stream")


def slot_commits(endpoint, outbox_table: str, beat_at: int | None = None) -> dict[int, int]:
    """Per heartbeat slot, its newest item's commit time, over every shard of the outbox stream."""
    merged: dict[int, int] = {}
    for slots in slot_commits_by_shard(endpoint, outbox_table, beat_at).values():
        for slot, at in slots.items():
            merged[slot] = max(merged.get(slot, 0), at)
    return merged


def test_a_heartbeat_moves_every_shards_watermark_and_touches_nothing_else(pipeline, settings, dynamodb, endpoint):
    shards = endpoint.client("kinesis").list_shards(StreamName=settings.events_stream)["Shards"]
    assert len(shards) >= 2  # the template's default: the heartbeat must reach shards with no job traffic
    beat = emitter_of(settings, endpoint).emit()
    assert beat.slots == slot_count(endpoint.stream_topology.shards)  # 16 per open outbox-stream shard, as listed
    pipeline.drain()

    committed = slot_commits(endpoint, settings.outbox_table)
    assert sorted(committed) == list(range(beat.slots))  # one item per slot
    assert beat.vouches_until <= beat.occurred_at and epoch_ms(beat.occurred_at) <= min(committed.values())
    marks = projector_watermarks(settings, dynamodb)
    assert sorted(mark.shard_id for mark in marks) == sorted(shard["ShardId"] for shard in shards)
    # every shard is confirmed through the oldest slot's commit (DynamoDB's time, not the emitter's), but no
    # later than the listing the beat was sized from
    assert all((mark.newest_event_at, mark.slots) == (vouched(beat, committed), beat.slots) for mark in marks)
    relay = CheckpointStore(dynamodb, settings.checkpoint_table).watermark("relay", "outbox-stream")
    assert relay is not None and relay.newest_event_at == vouched(beat, committed)
    assert view_lag(marks, min(committed.values()) + 500, stale_after_s=1).stale is False
    assert list(StatusViewReader(dynamodb, settings.status_table).all()) == []
    parked = ParkedRecords(dynamodb, settings.parked_table)
    assert parked.parked_by("relay") == [] and parked.parked_by("projector") == []
    assert list(OutboxReader(dynamodb, settings.outbox_table).all()) == []


def test_an_idle_system_stays_fresh_only_while_heartbeats_flow(pipeline, settings, dynamodb, store, endpoint):
    """Commit times are DynamoDB's (the wall clock here), so the lag is measured at system_clock()."""
    shards = endpoint.client("kinesis").list_shards(StreamName=settings.events_stream)["Shards"]
    store.create("acme", NewJob(type="demo.echo"))
    pipeline.drain()
    assert projector_watermarks(settings, dynamodb) == []  # one partition's event vouches for nothing
    assert view_lag([], system_clock(), stale_after_s=30).view_lag_s is None

    first = pipeline.heartbeats.emit()
    pipeline.drain()
    marks = projector_watermarks(settings, dynamodb)
    assert len(marks) == len(shards)  # the beat also reached the shard that had no job event
    assert view_lag(marks, system_clock(), stale_after_s=30).stale is False
    silent = view_lag(marks, system_clock() + 60_000, stale_after_s=30)
    assert silent.stale  # a minute with no commit and no heartbeat: the bound has grown past the threshold

    time.sleep(0.005)  # the next beat commits in a later millisecond
    second = pipeline.heartbeats.emit()
    pipeline.drain()
    marks = projector_watermarks(settings, dynamodb)
    confirmed = vouched(second, slot_commits(endpoint, settings.outbox_table, epoch_ms(second.occurred_at)))
    assert confirmed > vouched(first, slot_commits(endpoint, settings.outbox_table, epoch_ms(first.occurred_at)))
    assert all(mark.newest_event_at == confirmed for mark in marks)  # every shard moved on with the beat
    assert view_lag(marks, epoch_ms(confirmed) + 1_000, stale_after_s=30).stale is False


def shard_payloads(endpoint, settings) -> dict[str, list[dict]]:
    """Every record of the events stream, per shard in sequence order, decoded."""
    kinesis = endpoint.client("kinesis")
    found: dict[str, list[dict]] = {}
    for shard in kinesis.list_shards(StreamName=settings.events_stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=settings.events_stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = kinesis.get_records(ShardIterator=iterator, Limit=10_000)["Records"]
        found[shard["ShardId"]] = [json.loads(record["Data"]) for record in records]
    return found


def test_a_heartbeat_is_held_back_until_the_events_before_it_are_published(pipeline, settings, dynamodb, store,
                                                                           clock, endpoint):
    created = store.create("acme", NewJob(type="demo.echo")).job
    clock.advance(0.01)
    beat = emitter_of(settings, endpoint, clock).emit()
    with injected("relay.before_put_records"), pytest.raises(InjectedCrash):
        pipeline.relay_poller.poll_once()  # the relay dies before publishing: nothing went out
    pipeline.projector_poller.poll_once()
    assert projector_watermarks(settings, dynamodb) == []

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    LocalPipeline.build(settings, clients).drain()  # restarted: the event first, then the heartbeat
    shards = shard_payloads(endpoint, settings)
    # The beat's slots are spread over the outbox stream's shards; the relay passes on each outbox shard's
    # part (its slots, with their commit times) to every Kinesis shard, after that shard's earlier events.
    by_outbox_shard = slot_commits_by_shard(endpoint, settings.outbox_table, epoch_ms(beat.occurred_at))
    committed = slot_commits(endpoint, settings.outbox_table, epoch_ms(beat.occurred_at))
    parts = [{"kind": "heartbeat", "slots": beat.slots, "through": {str(slot): at for slot, at in slots.items()}}
             for slots in by_outbox_shard.values() if slots]
    assert len(parts) >= 2 and sorted(slot for slots in by_outbox_shard.values() for slot in slots) == list(
        range(beat.slots))  # every slot once, on several outbox shards
    for records in shards.values():  # every slot, with its commit time, on every Kinesis shard
        beats = [record for record in records if record.get("kind") == "heartbeat"]
        assert sorted(beats, key=json.dumps) == sorted(parts, key=json.dumps)
    [with_event] = [records for records in shards.values() if len(records) == len(parts) + 1]
    event_shard = outbox_shard_of(endpoint, settings.outbox_table, created.job_id)
    its_part = next(part for part in parts if part["through"] == {
        str(slot): at for slot, at in by_outbox_shard[event_shard].items()})
    [event] = [record for record in with_event if record.get("kind") != "heartbeat"]
    assert event["event_id"] == f"{created.job_id}:1"
    # the event went out before its heartbeat: the part of the beat committed after it on its outbox shard
    assert with_event.index(event) < with_event.index(its_part)
    assert epoch_ms(event["committed_at"]) <= min(committed.values())  # committed before the beat
    marks = projector_watermarks(settings, dynamodb)
    assert len(marks) == len(shards)
    assert all(mark.newest_event_at == iso(min(committed.values())) for mark in marks)
    assert StatusViewReader(dynamodb, settings.status_table).get(created.job_id).version == created.version


@pytest.mark.own_stack  # it reads and reshards the streams
def test_after_a_reshard_children_are_read_after_their_parents_and_the_drained_parents_retire(
        settings, stack_environment, dynamodb, store, clock, endpoint):
    """Without the parents in the children's heartbeats (and view_lag leaving named parents out), the
    closed parents' watermarks stay at the last beat they carried and the view reads as delayed forever
    after a reshard. Without the poller reading parents to their end first, a job's newer event (on a child)
    could be projected before its older one (on the parent), which the version guard would have to absorb."""
    from onward.entrypoints import projector as projector_handler

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    pipeline = LocalPipeline.build(settings, clients, batch_size=2)  # a parent takes several batches to drain
    kinesis = clients["kinesis"]
    stream = settings.events_stream
    jobs = [store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(8)]
    before = emitter_of(settings, endpoint, clock).emit()
    while pipeline.relay_poller.poll_once():  # every version 1 and a beat published to the parents, none projected
        pass
    parents = {shard["ShardId"] for shard in kinesis.list_shards(StreamName=stream)["Shards"]}
    kinesis.update_shard_count(StreamName=stream, TargetShardCount=2 * len(parents), ScalingType="UNIFORM_SCALING")
    children = [shard for shard in kinesis.list_shards(StreamName=stream)["Shards"] if shard["ShardId"] not in parents]
    assert len(children) == 2 * len(parents) and {child["ParentShardId"] for child in children} == parents

    clock.advance(60)
    for job_id in jobs:
        store.cancel(job_id)  # version 2 of each job goes to a child shard; version 1 waits on a parent
    after = emitter_of(settings, endpoint, clock).emit()
    while pipeline.relay_poller.poll_once():  # every version 2 and the heartbeat on the children
        pass
    stale_before = projector_handler.totals.snapshot()["stale"]
    pipeline.drain()

    assert projector_handler.totals.snapshot()["stale"] == stale_before  # every event came in version order
    view = StatusViewReader(dynamodb, settings.status_table)
    assert all(view.get(job_id).version == store.get(job_id).version == 2 for job_id in jobs)
    marks = projector_watermarks(settings, dynamodb)
    assert {mark.shard_id: mark.parents for mark in marks if mark.parents} == {
        child["ShardId"]: (child["ParentShardId"],) for child in children}
    old = vouched(before, slot_commits(endpoint, settings.outbox_table, epoch_ms(before.occurred_at)))
    new = vouched(after, slot_commits(endpoint, settings.outbox_table, epoch_ms(after.occurred_at)))
    assert old < new
    assert {mark.shard_id: mark.newest_event_at for mark in marks} == {
        **dict.fromkeys(parents, old), **{child["ShardId"]: new for child in children}}
    now = system_clock()
    lag = view_lag(marks, now, stale_after_s=30)
    assert (lag.watermark, lag.stale, lag.shards) == (new, False, len(children))  # the parents' no longer count
    assert view_lag(marks, now, stale_after_s=30, shards=open_shards(kinesis, stream)) == lag  # nor when listed
    assert view_lag([mark for mark in marks if mark.shard_id in parents], now, stale_after_s=30).watermark == old
    probe = LagProbe(CheckpointStore(dynamodb, settings.checkpoint_table),
                     OutboxReader(dynamodb, settings.outbox_table), kinesis, stream, 86_400, clock=clock)
    assert set(probe.snapshot().watermarks) == {child["ShardId"] for child in children}  # `onward lag` agrees

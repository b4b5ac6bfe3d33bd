"""Pipeline heartbeats (onward.heartbeat) through the real path: outbox table -> its DynamoDB stream ->
handlers.relay.handler -> every shard of the Kinesis stream -> handlers.projector.handler -> watermarks.

What breaks without which code:
- without the relay putting a heartbeat on EVERY shard (ExplicitHashKey per open shard), the shards that
  carry no job events keep an old watermark and the whole view reads as delayed while idle.
- without the projector treating a heartbeat as a watermark-only record, it would be parked as unreadable
  (or written into the view as a job).
- without the relay holding a heartbeat back until the batch's events are out, a heartbeat could vouch for
  events that never reached Kinesis (the watermark would claim a completeness the view does not have).
- without OutboxReader skipping heartbeats, replay, rebuild and audits would choke on them.
"""

from __future__ import annotations

import json

import pytest

from infra.pipeline import LocalPipeline
from onward.checkpoints import CheckpointStore
from onward.clock import epoch_ms
from onward.faults import InjectedCrash, injected
from onward.freshness import view_lag
from onward.heartbeat import HeartbeatEmitter
from onward.lag import LagProbe
from onward.models import NewJob
from onward.outbox import OutboxReader
from onward.parking import ParkedRecords
from onward.view import StatusViewReader

pytestmark = pytest.mark.integration


def projector_watermarks(settings, dynamodb):
    return CheckpointStore(dynamodb, settings.checkpoint_table).watermarks("projector")


def test_a_heartbeat_moves_every_shards_watermark_and_touches_nothing_else(pipeline, settings, dynamodb, endpoint):
    shards = endpoint.client("kinesis").list_shards(StreamName=settings.events_stream)["Shards"]
    assert len(shards) >= 2  # the template's default: the heartbeat must reach shards with no job traffic
    beat = HeartbeatEmitter(dynamodb, settings.outbox_table).emit()
    assert beat is not None
    pipeline.drain()

    marks = projector_watermarks(settings, dynamodb)
    assert sorted(mark.shard_id for mark in marks) == sorted(shard["ShardId"] for shard in shards)
    assert all(mark.newest_event_at == beat.occurred_at for mark in marks)
    assert view_lag(marks, epoch_ms(beat.occurred_at) + 500, stale_after_s=1).stale is False
    assert list(StatusViewReader(dynamodb, settings.status_table).all()) == []
    parked = ParkedRecords(dynamodb, settings.parked_table)
    assert parked.list("relay") == [] and parked.list("projector") == []
    assert list(OutboxReader(dynamodb, settings.outbox_table).all()) == []


def test_an_idle_system_stays_fresh_only_while_heartbeats_flow(pipeline, settings, dynamodb, store, clock):
    store.create("acme", NewJob(type="demo.echo"))
    pipeline.drain()
    assert view_lag(projector_watermarks(settings, dynamodb), clock(), stale_after_s=30).stale is False
    silent = view_lag(projector_watermarks(settings, dynamodb), clock() + 60_000, stale_after_s=30)
    assert silent.stale  # a minute with no commit and no heartbeat: the bound has grown past the threshold

    HeartbeatEmitter(dynamodb, settings.outbox_table, clock=lambda: clock() + 60_000).emit()
    pipeline.drain()
    marks = projector_watermarks(settings, dynamodb)
    assert view_lag(marks, clock() + 61_000, stale_after_s=30).stale is False
    assert len(marks) == silent.shards + 1  # the heartbeat also reached the shard that had no job event


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
    beat = HeartbeatEmitter(dynamodb, settings.outbox_table, clock=clock).emit()
    with injected("relay.before_put_records"), pytest.raises(InjectedCrash):
        pipeline.relay_poller.poll_once()  # the relay dies before publishing: nothing went out
    pipeline.projector_poller.poll_once()
    assert projector_watermarks(settings, dynamodb) == []

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    LocalPipeline.build(settings, clients).drain()  # restarted: the event first, then the heartbeat
    shards = shard_payloads(endpoint, settings)
    assert all(records[-1] == {"kind": "heartbeat", "occurred_at": beat.occurred_at} for records in shards.values())
    [with_event] = [records for records in shards.values() if len(records) == 2]
    assert with_event[0]["event_id"] == f"{created.job_id}:1"  # the event went out before its heartbeat
    marks = projector_watermarks(settings, dynamodb)
    assert len(marks) == len(shards) and all(mark.newest_event_at == beat.occurred_at for mark in marks)
    assert StatusViewReader(dynamodb, settings.status_table).get(created.job_id).version == created.version


def test_after_a_reshard_children_are_read_after_their_parents_and_the_drained_parents_retire(
        settings, stack_environment, dynamodb, store, clock, endpoint):
    """Without the parents in the children's heartbeats (and view_lag leaving named parents out), the
    closed parents' watermarks stay at their last event and the view reads as delayed forever after a
    reshard. Without the poller reading parents to their end first, a job's newer event (on a child) could
    be projected before its older one (on the parent), which the version guard would have to absorb."""
    from handlers import projector as projector_handler

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    pipeline = LocalPipeline.build(settings, clients, batch_size=2)  # a parent takes several batches to drain
    kinesis = clients["kinesis"]
    stream = settings.events_stream
    jobs = [store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(8)]
    while pipeline.relay_poller.poll_once():  # every version 1 published to the parents, none projected yet
        pass
    parents = {shard["ShardId"] for shard in kinesis.list_shards(StreamName=stream)["Shards"]}
    kinesis.update_shard_count(StreamName=stream, TargetShardCount=2 * len(parents), ScalingType="UNIFORM_SCALING")
    children = [shard for shard in kinesis.list_shards(StreamName=stream)["Shards"] if shard["ShardId"] not in parents]
    assert len(children) == 2 * len(parents) and {child["ParentShardId"] for child in children} == parents

    clock.advance(60)
    for job_id in jobs:
        store.cancel(job_id)  # version 2 of each job goes to a child shard; version 1 waits on a parent
    HeartbeatEmitter(dynamodb, settings.outbox_table, clock=clock).emit()
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
    lag = view_lag(marks, clock() + 1_000, stale_after_s=30)
    assert (lag.stale, lag.shards) == (False, len(children))  # the parents' old watermarks no longer count
    assert view_lag([mark for mark in marks if mark.shard_id in parents], clock() + 1_000, stale_after_s=30).stale
    probe = LagProbe(dynamodb, kinesis, settings.checkpoint_table, settings.outbox_table, stream, 86_400, clock=clock)
    assert set(probe.snapshot().watermarks) == {child["ShardId"] for child in children}  # `onward lag` agrees

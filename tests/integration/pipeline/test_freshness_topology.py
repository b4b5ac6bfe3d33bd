"""Freshness over a sharded outbox stream: "freshness cannot vouch for a shard it has not seen".

Each test deploys template.yaml on an endpoint whose DynamoDB streams have OUTBOX_SHARDS open shards (one per
partition of the outbox table, as on AWS; the session's endpoint has one), and runs the real path: outbox
stream -> onward.entrypoints.relay.handler -> Kinesis (two shards) -> onward.entrypoints.projector.handler ->
watermarks, the
API answering from them. Beats are written by the deployment's HeartbeatEmitter (K = 16 slots per open
outbox-stream shard, listed for each beat). Commit times are DynamoDB's (the wall clock here), so lags are
measured at system_clock(), and expected watermarks are read from the outbox stream itself (`slot_commits`),
each no later than its beat's `vouches_until` (`vouched`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.freshness import view_lag
from onward.domain.models import NewJob, ViewLag
from onward.domain.states import JobState
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, SLOT_PREFIX, CheckpointStore
from onward.pipeline.heartbeats import slot_count
from onward.pipeline.shards import Shard, open_shards
from onward.pipeline.view import StatusViewReader
from onward.settings import Settings
from onward.store.service import CancelStatus, JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.pipeline import LocalPipeline
from onward_infra.pollers import EventsStreamPoller, OutboxStreamPoller
from tests.integration.api_support import http_call, serve_api
from tests.integration.pipeline.test_heartbeat import slot_commits, slot_commits_by_shard, vouched

pytestmark = pytest.mark.integration

OUTBOX_SHARDS = 4
TOKENS = {"acme": "acme-secret"}
OPERATOR = "operator-secret"
_stacks = itertools.count()


# --- the stack and its pipeline ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sharded() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint(stream_shards=OUTBOX_SHARDS) as running:
        yield running


@pytest.fixture
def settings(sharded: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A fresh stack on the sharded endpoint, its environment in os.environ (the handlers read it there)."""
    return fresh_stack(sharded, f"freshness-topology-{next(_stacks)}", monkeypatch)


def fresh_stack(endpoint: EmbeddedEndpoint, name: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A stack of its own on `endpoint` (its own outbox table: its splits are its own), its environment in
    os.environ as Lambda gives it to the handlers."""
    environment = endpoint.deploy(name).environment
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    return Settings.from_environment(environment)


@pytest.fixture
def deployment(settings: Settings) -> Deployment:
    deployment = Deployment.from_environment()
    assert deployment.settings.outbox_table == settings.outbox_table
    return deployment


class StuckStreams:
    """The outbox stream as the relay's event source reads it, with the shard `stuck` stuck: GetRecords on it
    answers nothing and leaves the iterator where it was, as a mapping wedged on one shard delivers nothing
    from it. Every other shard reads as usual."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._shard_of: dict[str, str] = {}
        self.stuck: str | None = None

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._real.get_shard_iterator(**request)
        self._shard_of[answer["ShardIterator"]] = request["ShardId"]
        return answer

    def get_records(self, **request: Any) -> dict[str, Any]:
        shard_id = self._shard_of[request["ShardIterator"]]
        if shard_id == self.stuck:
            return {"Records": [], "NextShardIterator": request["ShardIterator"]}
        answer: dict[str, Any] = self._real.get_records(**request)
        if "NextShardIterator" in answer:
            self._shard_of[answer["NextShardIterator"]] = shard_id
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class HiddenShard:
    """The events stream with one shard left out of ListShards: a projector that never runs on it."""

    def __init__(self, real: Any, hidden: str) -> None:
        self._real = real
        self._hidden = hidden

    def list_shards(self, **request: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._real.list_shards(**request)
        return {**answer, "Shards": [shard for shard in answer["Shards"] if shard["ShardId"] != self._hidden]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def relay_poller(deployment: Deployment, streams: Any = None) -> OutboxStreamPoller:
    arn = deployment.client("dynamodb").describe_table(
        TableName=deployment.settings.outbox_table)["Table"]["LatestStreamArn"]
    return OutboxStreamPoller(streams or deployment.client("dynamodbstreams"), arn, relay_handler.handler,
                              deployment.relay, deployment.checkpoint_store, parked=deployment.parked_records)


def projector_poller(deployment: Deployment, kinesis: Any = None) -> EventsStreamPoller:
    return EventsStreamPoller(kinesis or deployment.client("kinesis"), deployment.settings.require("events_stream"),
                              projector_handler.handler, deployment.checkpoint_store,
                              parked=deployment.parked_records)


def pipeline_of(deployment: Deployment, *, streams: Any = None, kinesis: Any = None) -> LocalPipeline:
    """The local pipeline, its relay reading the outbox stream through `streams` and its projector the events
    stream through `kinesis` (the deployment's clients when None)."""
    return LocalPipeline(relay_poller(deployment, streams), projector_poller(deployment, kinesis),
                         deployment.heartbeat_emitter)


def events_shards(deployment: Deployment) -> list[Shard]:
    return open_shards(deployment.client("kinesis"), deployment.settings.require("events_stream"))


def lag_now(deployment: Deployment, stale_after_s: float | None = None) -> ViewLag:
    """The view's lag as the API measures it: every open shard of the events stream counts."""
    threshold = deployment.settings.stale_after_s if stale_after_s is None else stale_after_s
    return view_lag(deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER), system_clock(), threshold,
                    shards=events_shards(deployment))


def outbox_shard_of(endpoint: EmbeddedEndpoint, outbox_table: str, job_id: str) -> str:
    """The outbox-stream shard that carries the job's records (its key's partition)."""
    db, streams = endpoint.client("dynamodb"), endpoint.client("dynamodbstreams")
    arn = db.describe_table(TableName=outbox_table)["Table"]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        if any(record["dynamodb"]["Keys"]["job_id"]["S"] == job_id for record in records):
            return str(shard["ShardId"])
    raise AssertionError(f"job {job_id} is on no shard of the outbox stream")


def view_health(url: str) -> dict[str, Any]:
    answer = http_call(url, "GET", "/view", token=TOKENS["acme"])
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.body
    return body


def job_freshness(url: str, job_id: str) -> dict[str, Any]:
    answer = http_call(url, "GET", f"/jobs/{job_id}", token=TOKENS["acme"])
    assert answer.status == 200 and answer.body["visible"], answer.body
    freshness: dict[str, Any] = answer.body["freshness"]
    return freshness


# --- (a) a relay stuck on one outbox-stream shard ------------------------------------------------------------

STUCK_STALE_S = 0.5  # a threshold the test can outwait: beats every 0.2 s, four of them


def test_a_relay_stuck_on_one_outbox_shard_makes_the_view_stale_while_beats_flow_through_the_others(
        settings: Settings, deployment: Deployment, sharded: EmbeddedEndpoint) -> None:
    """The relay reads the outbox stream shard by shard, and Lambda's events do not say which. A beat puts
    K = 16 slots per open stream shard into the outbox, so every partition holds some slot, and a watermark is
    its oldest slot's. With the relay stuck on one shard, that shard's slots stay at the last beat relayed
    before, and so do the relay's and every Kinesis shard's watermark, while later beats flow through the
    other three shards: the lag grows with every beat, and the view turns stale, the job committed in the
    stuck partition missing from it and not vouched for. Once the shard is relayed, the next beat confirms
    it all. Without the slots (one heartbeat item, in one partition, as before), a beat through any other
    partition would have moved every watermark and the view would read fresh with the job missing; with
    fewer slots than partitions, the stuck one could hold none."""
    streams = StuckStreams(deployment.client("dynamodbstreams"))
    pipeline = pipeline_of(deployment, streams=streams)
    first = pipeline.heartbeats.emit()
    assert first.slots == slot_count(OUTBOX_SHARDS) == 64
    pipeline.drain()
    by_shard = slot_commits_by_shard(sharded, settings.outbox_table, epoch_ms(first.occurred_at))
    assert len(by_shard) == OUTBOX_SHARDS and all(by_shard.values())  # every partition holds some slot
    assert lag_now(deployment).stale is False

    stuck_shard, stuck_slots = next(iter(by_shard.items()))
    held = vouched(first, stuck_slots)  # what the stuck slots were last relayed through
    streams.stuck = stuck_shard
    store = JobStore(settings, client=sharded.client("dynamodb"))
    for _ in range(64):  # job ids are random: create until one is committed in the stuck partition
        job = store.create("acme", NewJob(type="demo.echo")).job
        if outbox_shard_of(sharded, settings.outbox_table, job.job_id) == stuck_shard:
            break
    else:
        raise AssertionError("no job landed in the stuck partition")

    lags: list[ViewLag] = []
    for _ in range(4):
        time.sleep(0.2)
        beat = pipeline.heartbeats.emit()
        pipeline.drain()
        lags.append(lag_now(deployment, STUCK_STALE_S))
    assert all(lag.watermark == held for lag in lags)  # held by the stuck slots, beat after beat
    growing = [lag.view_lag_s for lag in lags]
    assert None not in growing and growing == sorted(set(growing)), growing  # strictly growing
    assert lags[-1].stale and lags[-1].view_lag_s > STUCK_STALE_S
    relay = deployment.checkpoint_store.watermark("relay", "outbox-stream")
    assert relay is not None and relay.newest_event_at == held
    latest = slot_commits(sharded, settings.outbox_table, epoch_ms(beat.occurred_at))
    for shard in events_shards(deployment):  # every Kinesis shard: the other slots moved on with the last beat
        item = deployment.client("dynamodb").get_item(
            TableName=settings.checkpoint_table, ConsistentRead=True,
            Key={"consumer": {"S": PROJECTOR_CONSUMER}, "shard_id": {"S": shard.shard_id}})["Item"]
        through = {slot: int(item[f"{SLOT_PREFIX}{slot}"]["N"]) for slot in range(first.slots)}
        assert through == {slot: min(stuck_slots[slot], epoch_ms(first.vouches_until)) if slot in stuck_slots
                           else min(latest[slot], epoch_ms(beat.vouches_until)) for slot in range(first.slots)}
    view = StatusViewReader(deployment.client("dynamodb"), settings.status_table)
    assert view.get(job.job_id) is None and iso(job.updated_at) > held  # missing, and not vouched for

    streams.stuck = None  # the shard is relayed again: its backlog, then the next beat
    recovery = pipeline.heartbeats.emit()
    pipeline.drain()
    confirmed = vouched(recovery, slot_commits(sharded, settings.outbox_table, epoch_ms(recovery.occurred_at)))
    lag = lag_now(deployment)
    assert (lag.watermark, lag.stale) == (confirmed, False) and confirmed > held
    assert deployment.checkpoint_store.watermark("relay", "outbox-stream").newest_event_at == confirmed
    shown = view.get(job.job_id)
    assert shown is not None and shown.as_of < confirmed  # now projected, and vouched for


# --- (b) a projector that never ran on one Kinesis shard -----------------------------------------------------

def test_a_kinesis_shard_never_projected_makes_the_lag_unknown_though_the_others_are_fresh(
        settings: Settings, deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard the projector never ran on has no watermark, and one never heard of cannot bound the lag from
    the watermarks alone: they say the view is fresh while the jobs hashed to that shard are missing. The
    API lists the events stream's open shards (ShardCatalog) and view_lag counts every one: with no
    watermark and no parent, the lag is unknown and the view stale. Without `shards` (onward/api/core.py
    `view_lag_now` passing the open shards, view_lag counting them), /view would answer fresh here."""
    shards = events_shards(deployment)
    assert len(shards) == 2 and not any(shard.parents for shard in shards)
    never = shards[-1]
    half = pipeline_of(deployment, kinesis=HiddenShard(deployment.client("kinesis"), never.shard_id))
    store = JobStore(settings, client=deployment.client("dynamodb"))
    for _ in range(64):  # create until one job's events go to the shard never projected
        job = store.create("acme", NewJob(type="demo.echo")).job
        if never.holds(job.job_id):
            break
    else:
        raise AssertionError("no job hashed to the hidden shard")
    half.drain(beat=True)

    marks = deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER)
    assert [mark.shard_id for mark in marks] == [shards[0].shard_id]  # the other shard is confirmed
    assert view_lag(marks, system_clock(), 30).stale is False  # what the watermarks alone would say
    lag = lag_now(deployment)
    assert (lag.view_lag_s, lag.watermark, lag.stale, lag.shards) == (None, None, True, 2)
    view = StatusViewReader(deployment.client("dynamodb"), settings.status_table)
    assert view.get(job.job_id) is None  # its event waits on the shard never projected

    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        unknown = view_health(url)
        assert (unknown["view_lag_s"], unknown["stale"], unknown["shards"]) == (None, True, 2)
        whole = LocalPipeline(half.relay_poller, projector_poller(deployment), deployment.heartbeat_emitter)
        whole.drain(beat=True)  # the projector runs on every shard
        known = view_health(url)
        assert known["stale"] is False and known["view_lag_s"] is not None and known["shards"] == 2
        assert job_freshness(url, job.job_id)["as_of"] < known["watermark"]


# --- (c) decided before a beat, committed after it -----------------------------------------------------------

def test_a_transition_decided_before_a_beat_but_committed_after_it_is_not_vouched_for_until_the_next_beat(
        settings: Settings, deployment: Deployment, sharded: EmbeddedEndpoint,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer decides a transition (its occurred_at), stalls, and commits it after a beat was committed
    and projected. The beat vouches only for what DynamoDB had committed before it, so the transition is
    shown as of its commit time (as_of = committed_at, set by the relay from the stream record), after the
    watermark, until the next beat. Without commit times (the relay setting committed_at, StatusView.as_of
    and the API's freshness.as_of reading it) it would be shown as of its decision time, before the
    watermark: covered by a beat that passed before it was committed."""
    pipeline = pipeline_of(deployment)
    store_client = sharded.client("dynamodb")
    store = JobStore(settings, client=store_client)  # decides on the wall clock, commits through store_client
    job = store.create("acme", NewJob(type="demo.echo")).job
    pipeline.drain(beat=True)

    beats: list[str] = []

    def beat_before_the_commit(**_: Any) -> None:  # decided; the writer stalls; a beat passes and is projected
        if beats:
            return
        time.sleep(0.005)
        beats.append(pipeline.heartbeats.emit().vouches_until)
        pipeline.drain()
        time.sleep(0.005)

    store_client.meta.events.register("before-call.dynamodb.TransactWriteItems", beat_before_the_commit)
    try:
        assert store.cancel(job.job_id).status is CancelStatus.CANCELLED
    finally:
        store_client.meta.events.unregister("before-call.dynamodb.TransactWriteItems", beat_before_the_commit)
    assert len(beats) == 1
    pipeline.drain()  # the transition is projected; no beat after it yet

    view = StatusViewReader(deployment.client("dynamodb"), settings.status_table)
    shown = view.get(job.job_id)
    assert shown is not None and (shown.status, shown.version) == (JobState.CANCELLED, 2)
    lag = lag_now(deployment)
    assert lag.stale is False and lag.watermark is not None  # the view as a whole is fresh...
    assert shown.occurred_at < beats[0] <= lag.watermark  # ...decided before the beat (its listing)...
    assert shown.as_of == shown.committed_at and lag.watermark < shown.as_of  # ...committed after it: not vouched

    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        fresh = job_freshness(url, job.job_id)
        assert fresh["as_of"] == shown.committed_at and fresh["watermark"] == lag.watermark < fresh["as_of"]
        pipeline.drain(beat=True)  # the next beat
        fresh = job_freshness(url, job.job_id)
        assert fresh["as_of"] == shown.committed_at < fresh["watermark"]  # now vouched for
        assert fresh["stale"] is False


# --- (d) an idle system --------------------------------------------------------------------------------------

def test_an_idle_system_reads_fresh_while_beats_flow(settings: Settings, deployment: Deployment,
                                                      sharded: EmbeddedEndpoint,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No job at all: only beats move the watermarks. Each beat fills all 64 slots (16 per outbox shard)
    through every partition, the relay passes them to both Kinesis shards, and every shard's watermark
    moves to the beat's oldest slot's commit: /view reads fresh, beat after beat, and would turn stale
    only once beats stop. Without beats the lag is unknown (events move no watermark, and there are
    none); without the heartbeat on every Kinesis shard one shard would have no watermark and the lag
    would be unknown; with a slot of the beat not passed on (every partition's, through every shard),
    each watermark would wait for it and stay None."""
    shards = events_shards(deployment)
    pipeline = pipeline_of(deployment)
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        before = view_health(url)
        assert (before["view_lag_s"], before["stale"]) == (None, True)  # nothing vouched for yet

        previous = ""
        for _ in range(3):
            time.sleep(0.01)
            beat = pipeline.heartbeats.emit()
            pipeline.drain()
            assert beat.slots == slot_count(OUTBOX_SHARDS)
            committed = slot_commits(sharded, settings.outbox_table, epoch_ms(beat.occurred_at))
            assert sorted(committed) == list(range(beat.slots))
            marks = CheckpointStore(deployment.client("dynamodb"), settings.checkpoint_table).watermarks(
                PROJECTOR_CONSUMER)
            assert sorted(mark.shard_id for mark in marks) == sorted(shard.shard_id for shard in shards)
            assert all((mark.newest_event_at, mark.slots) == (vouched(beat, committed), beat.slots)
                       for mark in marks)
            health = view_health(url)
            assert (health["stale"], health["shards"], health["watermark"]) == (
                False, len(shards), vouched(beat, committed))
            assert 0 <= health["view_lag_s"] < settings.stale_after_s
            assert health["watermark"] > previous  # each beat moved it on
            previous = health["watermark"]

    silent = view_lag(marks, epoch_ms(previous) + int((settings.stale_after_s + 1) * 1000),
                      settings.stale_after_s, shards=shards)
    assert silent.stale  # once beats stop, the bound outgrows the threshold

"""Freshness while the outbox stream's shards multiply (issue 32, item 1): "a beat vouches for no shard it did
not cover".

The outbox stream has one shard per partition of the outbox table, and a beat puts K slots into the outbox,
K sized from a listing of the stream's open shards (onward.pipeline.heartbeats.plan_beat). Here every shard of a
4-shard stream splits three times (4 -> 32 open shards), as partitions do under load, and the relay is stuck
on one of the new shards while jobs are committed in it. Each test reproduces one way a beat can miss that
shard, and asserts what the view may then say: never that it holds every commit before a time after jobs it
does not have (`stale: false` with a watermark past them).

The shards a beat misses are found by hash (onward_infra.moto_fixes.streams: a key's partition is the MD5 of
its value), so the tests know them before anything is written; the pipeline and the view are the real ones
(tests/integration/pipeline/test_freshness_topology.py's harness).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto.dynamodb.models.dynamo_type import DynamoType

from onward.bootstrap import Deployment
from onward.domain.clock import iso
from onward.domain.models import Job, NewJob
from onward.pipeline.heartbeats import HEARTBEAT_PARTITION, slot_count
from onward.pipeline.view import StatusViewReader
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.moto_fixes.streams import partition_hash, table_stream
from tests.integration.pipeline.test_freshness_topology import (
    OUTBOX_SHARDS,
    StuckStreams,
    fresh_stack,
    lag_now,
    pipeline_of,
)

pytestmark = pytest.mark.integration

SPLITS = 3  # every shard, three times: 4 -> 32 open shards
MISSING_JOBS = 6
_stacks = itertools.count()


@pytest.fixture(scope="module")
def sharded() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint(stream_shards=OUTBOX_SHARDS) as running:
        yield running


@pytest.fixture
def settings(sharded: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return fresh_stack(sharded, f"freshness-reshard-{next(_stacks)}", monkeypatch)


@pytest.fixture
def deployment(settings: Settings) -> Deployment:
    return Deployment.from_environment()


def open_shard_holding(outbox_table: str, key: str) -> str:
    """The open outbox-stream shard that a commit of partition key `key` goes to now."""
    hashed = partition_hash(DynamoType({"S": key}))
    stream = table_stream(outbox_table)
    return next(shard.shard_id for shard in stream.shards.values() if shard.is_open and shard.holds(hashed))


def open_shards_without_a_slot(outbox_table: str, slots: int) -> list[str]:
    """The open shards that no slot of a beat of `slots` slots would be committed in."""
    holding = {open_shard_holding(outbox_table, f"{HEARTBEAT_PARTITION}#{slot}") for slot in range(slots)}
    return [shard for shard in table_stream(outbox_table).open_shards() if shard not in holding]


def split_every_shard(endpoint: EmbeddedEndpoint, outbox_table: str) -> None:
    for _ in range(SPLITS):
        endpoint.split_stream_shards(outbox_table)
    assert len(table_stream(outbox_table).open_shards()) == OUTBOX_SHARDS * 2**SPLITS


def commit_jobs_in(store: JobStore, outbox_table: str, shard: str) -> list[Job]:
    """Create jobs until MISSING_JOBS of them were committed in `shard` (ids are random)."""
    found: list[Job] = []
    for _ in range(200 * MISSING_JOBS):
        job = store.create("acme", NewJob(type="demo.echo")).job
        if open_shard_holding(outbox_table, job.job_id) == shard:
            found.append(job)
            if len(found) == MISSING_JOBS:
                return found
    raise AssertionError(f"only {len(found)} jobs landed in {shard}")


def assert_not_vouched(deployment: Deployment, missing: list[Job]) -> None:
    """The jobs are missing from the view, and the view does not claim to hold every commit before a time
    after any of them (each was committed after it was decided, `updated_at`, on this host's clock)."""
    view = StatusViewReader(deployment.client("dynamodb"), deployment.settings.require("status_table"))
    assert [view.get(job.job_id) for job in missing] == [None] * len(missing)
    lag = lag_now(deployment)
    first_decided = iso(min(job.updated_at for job in missing))
    assert lag.watermark is None or lag.watermark < first_decided, (
        f"stale: {lag.stale}, watermark {lag.watermark}: vouches for jobs decided from {first_decided} on, "
        f"missing from the view")


def assert_recovers(deployment: Deployment, streams: StuckStreams, missing: list[Job]) -> None:
    """Once the shard is relayed, the next beat confirms it all: the jobs are shown, and vouched for."""
    streams.stuck = None
    pipeline_of(deployment, streams=streams).drain(beat=True)
    lag = lag_now(deployment)
    assert lag.stale is False and lag.watermark is not None
    view = StatusViewReader(deployment.client("dynamodb"), deployment.settings.require("status_table"))
    shown = [view.get(job.job_id) for job in missing]
    assert all(status is not None and status.as_of < lag.watermark for status in shown)


class BeforeFirstBatchWrite:
    """A DynamoDB client that runs `action` once, just before its first BatchWriteItem is sent."""

    def __init__(self, real: Any, action: Callable[[], None]) -> None:
        self._real = real
        self._action: Callable[[], None] | None = action

    def batch_write_item(self, **request: Any) -> Any:
        if self._action is not None:
            action, self._action = self._action, None
            action()
        return self._real.batch_write_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_after_every_outbox_shard_splits_three_times_the_next_beat_vouches_for_no_stuck_shard(
        settings: Settings, deployment: Deployment, sharded: EmbeddedEndpoint) -> None:
    """The attack of issue 32: a beat (64 slots, 4 open shards) is relayed and the view reads fresh; every
    shard splits three times (32 open); the relay is stuck on one of the new shards that a 64-slot beat holds
    no slot in, and six jobs are committed there; the next beat is relayed. Before the fix the emitter kept
    the count of open shards for 60 s, so that beat still had 64 slots, none in the stuck shard: every slot
    was relayed, the watermark moved past the six jobs and the view answered `stale: false` without them.
    Sized from a listing taken for the beat, it has 16 slots per open shard (512), some in the stuck shard:
    they are held back with it, and so is every watermark."""
    table = settings.outbox_table
    streams = StuckStreams(deployment.client("dynamodbstreams"))
    pipeline = pipeline_of(deployment, streams=streams)
    assert pipeline.heartbeats.emit().slots == slot_count(OUTBOX_SHARDS)
    pipeline.drain()
    assert lag_now(deployment).stale is False

    split_every_shard(sharded, table)
    uncovered = open_shards_without_a_slot(table, slot_count(OUTBOX_SHARDS))
    assert uncovered  # the shards a beat sized from the count before the splits leaves out (4 of 32)
    streams.stuck = uncovered[0]
    missing = commit_jobs_in(JobStore(settings, client=sharded.client("dynamodb")), table, uncovered[0])

    beat = pipeline.heartbeats.emit()
    pipeline.drain()
    assert_not_vouched(deployment, missing)
    assert beat.slots == slot_count(OUTBOX_SHARDS * 2**SPLITS) == 512
    assert_recovers(deployment, streams, missing)


def test_a_beat_whose_shards_split_between_its_listing_and_its_commit_vouches_no_later_than_its_listing(
        settings: Settings, deployment: Deployment, sharded: EmbeddedEndpoint) -> None:
    """However fresh, a listing is older than the beat it sizes: here every shard splits three times after
    the emitter listed 4 open shards and before its 64 slots are written, and six jobs are committed in a
    new shard that holds none of them, the relay stuck there. Every slot of that beat is relayed. Before the
    fix the beat vouched through its slots' commit times, after the six jobs: the view read fresh without
    them. A beat now vouches no later than its listing (`vouches_until`): a shard opened after the listing
    holds only commits after it, so what the beat did not cover it does not vouch for."""
    table = settings.outbox_table
    streams = StuckStreams(deployment.client("dynamodbstreams"))
    pipeline = pipeline_of(deployment, streams=streams)
    pipeline.heartbeats.emit()
    pipeline.drain()
    assert lag_now(deployment).stale is False

    missing: list[Job] = []

    def split_then_commit_in_a_shard_without_a_slot() -> None:
        split_every_shard(sharded, table)
        uncovered = open_shards_without_a_slot(table, slot_count(OUTBOX_SHARDS))
        assert uncovered
        streams.stuck = uncovered[0]
        missing.extend(commit_jobs_in(JobStore(settings, client=sharded.client("dynamodb")), table, uncovered[0]))

    listed_before_the_splits = Deployment(settings, clients={
        "dynamodb": BeforeFirstBatchWrite(sharded.client("dynamodb"), split_then_commit_in_a_shard_without_a_slot),
        "dynamodbstreams": sharded.client("dynamodbstreams")})
    beat = listed_before_the_splits.heartbeat_emitter.emit()
    pipeline.drain()
    assert beat.slots == slot_count(OUTBOX_SHARDS) and len(missing) == MISSING_JOBS
    assert_not_vouched(deployment, missing)

    pipeline.heartbeats.emit()  # the next beat, listed after the splits: it covers the stuck shard
    pipeline.drain()
    assert_not_vouched(deployment, missing)
    assert_recovers(deployment, streams, missing)

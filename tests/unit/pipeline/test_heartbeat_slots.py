"""Heartbeat slots (onward.pipeline.heartbeats), the watermarks they make (onward.pipeline.checkpoints) and the view's
lag over
the events stream's open shards (onward.domain.freshness.view_lag with `shards`): pure, or over a fake table.

What breaks without which code:
- without `slot_count` scaling K with the outbox stream's open shards, a stream of many shards would have
  partitions that hold no slot: a relay stuck there would never hold a watermark back.
- without the emitter listing the shards for every beat (it kept a count for 60 s), a beat right after the
  shards multiplied was sized for the old count (issue 32); without `vouches_until` in every item (and an
  item without it vouching for nothing), a beat would vouch past shards opened after its listing.
- without int slot keys surviving JSON, the projector would record attributes `t"0"` or refuse the record.
- without a legacy heartbeat vouching for nothing, a relay still sending the old single-item heartbeat (one
  partition's commit) would move every watermark past partitions it never saw.
- without the minimum over the slots (and None while one is missing), a watermark would vouch for the
  partitions whose slots arrived, not for the one that is stuck.
- without `shards` in view_lag, a Kinesis shard the projector never ran on has no watermark and is simply
  not counted: the view reads fresh while one shard's events are missing from it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from onward.domain.clock import iso
from onward.domain.freshness import view_lag
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, SLOTS_PER_UPDATE, CheckpointStore, Watermark, _watermark
from onward.pipeline.heartbeat_writer import HeartbeatEmitter, OutboxStreamListing, ShardListing
from onward.pipeline.heartbeats import (
    AWS_BEAT_SLACK_MS,
    MAX_SLOTS,
    MIN_SLOTS,
    SLOTS_PER_SHARD,
    BeatPlan,
    Heartbeat,
    decode_heartbeat,
    encode_heartbeat,
    heartbeat_items,
    heartbeat_part,
    merge_through,
    plan_beat,
    slot_count,
)
from onward.pipeline.projector.projector import BatchTally, ShardRecord, StatusProjector
from onward.pipeline.relay.publisher import PublishStats
from onward.pipeline.relay.relay import Relay, StreamRecord
from onward.pipeline.shards import Shard
from tests.support import ManualClock

NOW = 1_800_000_000_000
MAX_HASH = 2**128 - 1


# --- K ----------------------------------------------------------------------------------------------------

def test_slot_count_is_sixteen_per_open_stream_shard_within_its_bounds() -> None:
    assert (MIN_SLOTS, SLOTS_PER_SHARD, MAX_SLOTS) == (16, 16, 2048)
    assert slot_count(0) == slot_count(1) == MIN_SLOTS  # a stream always has a shard; never fewer than 16
    assert [slot_count(n) for n in (2, 4, 7)] == [32, 64, 112]
    assert slot_count(MAX_SLOTS // SLOTS_PER_SHARD) == MAX_SLOTS
    assert slot_count(MAX_SLOTS // SLOTS_PER_SHARD + 1) == slot_count(10_000) == MAX_SLOTS


def test_a_beat_is_planned_from_one_listing_k_by_its_shards_vouching_up_to_its_slack_before_it() -> None:
    assert plan_beat(32, NOW, AWS_BEAT_SLACK_MS) == BeatPlan(512, NOW - AWS_BEAT_SLACK_MS)
    assert plan_beat(4, NOW, 0) == BeatPlan(64, NOW)
    assert AWS_BEAT_SLACK_MS >= 1000  # AWS's commit stamps are whole seconds, rounded down
    with pytest.raises(ValueError, match="at least 0 ms"):
        plan_beat(4, NOW, -1)


def test_a_beat_is_one_outbox_item_per_slot_each_in_a_partition_of_its_own() -> None:
    items = heartbeat_items(NOW, plan_beat(4, NOW - 20, 1_000))
    assert [item["job_id"]["S"] for item in items] == [f"HEARTBEAT#{slot}" for slot in range(64)]
    assert {item["version"]["N"] for item in items} == {str(NOW)}
    assert all("time_bucket" not in item for item in items)  # replay windows (the by_time index) never see them
    assert [heartbeat_part(item) for item in items][5].slot == 5
    assert {(heartbeat_part(item).slots, heartbeat_part(item).vouches_until) for item in items} == {
        (64, NOW - 1_020)}


def test_a_slot_outside_its_beat_is_refused_and_an_older_item_fills_no_slot() -> None:
    item = heartbeat_items(NOW, BeatPlan(16, NOW))[3]
    with pytest.raises(ValueError, match="heartbeat slot 16 of 16"):
        heartbeat_part({**item, "slot": {"N": "16"}})
    with pytest.raises(ValueError, match=f"heartbeat slot 3 of {MAX_SLOTS + 1}"):
        heartbeat_part({**item, "slots": {"N": str(MAX_SLOTS + 1)}})
    legacy = {"job_id": {"S": "HEARTBEAT"}, "version": {"N": str(NOW)}, "kind": {"S": "heartbeat"},
              "occurred_at": {"S": iso(NOW)}}
    assert heartbeat_part(legacy) is None  # the relay passes on no slot for it
    # a slot of a beat sized from a count of unknown age (the emitter before issue 32) vouches for nothing
    assert heartbeat_part({name: value for name, value in item.items() if name != "vouches_until"}) is None


class FakeOutbox:
    """DescribeTable, DescribeStream (pages of `page` shards; `open_now` of them open) and BatchWriteItem, as
    the emitter uses them, counted; `reshard` changes the open count between calls."""

    def __init__(self, open_now: int, closed: int = 0, page: int = 100) -> None:
        self.open_now, self.closed, self.page = open_now, closed, page
        self.calls: dict[str, int] = {"describe_table": 0, "describe_stream": 0, "batch_write_item": 0}
        self.written: list[dict[str, Any]] = []

    def describe_table(self, **_: Any) -> dict[str, Any]:
        self.calls["describe_table"] += 1
        return {"Table": {"LatestStreamArn": "arn:stream"}}

    def describe_stream(self, **request: Any) -> dict[str, Any]:
        self.calls["describe_stream"] += 1
        shards = [{"ShardId": f"s{n:04d}", "SequenceNumberRange": {"StartingSequenceNumber": "1", **(
            {"EndingSequenceNumber": "2"} if n < self.closed else {})}} for n in range(self.closed + self.open_now)]
        start = int(request.get("ExclusiveStartShardId", "s-001")[1:]) + 1
        page = shards[start:start + self.page]
        more = {"LastEvaluatedShardId": page[-1]["ShardId"]} if start + self.page < len(shards) else {}
        return {"StreamDescription": {"Shards": page, **more}}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls["batch_write_item"] += 1
        [(_, requests)] = RequestItems.items()
        self.written += [request["PutRequest"]["Item"] for request in requests]
        return {}


def test_every_beat_lists_the_shards_and_is_sized_and_bounded_by_that_listing() -> None:
    """The count the emitter sized beats from was kept for 60 s: a beat right after every shard split three
    times still had 64 slots for 32 shards. Each beat now lists the shards first (DescribeTable, then
    DescribeStream page by page: 2 pages for 32 open and 150 closed shards), has 16 slots per open shard
    and vouches up to its listing's start less the slack."""
    outbox = FakeOutbox(open_now=4)
    clock = ManualClock(NOW)
    emitter = HeartbeatEmitter(outbox, "outbox", OutboxStreamListing(outbox, outbox, "outbox", clock), clock=clock,
                               slack_ms=AWS_BEAT_SLACK_MS)
    first = emitter.emit()
    assert (first.slots, first.vouches_until) == (64, iso(NOW - AWS_BEAT_SLACK_MS))

    outbox.open_now, outbox.closed = 32, 150  # every shard split three times (28 closed), and older ones
    clock.advance(0.5)
    calls_before = dict(outbox.calls)
    second = emitter.emit()
    assert (second.slots, second.vouches_until) == (512, iso(NOW + 500 - AWS_BEAT_SLACK_MS))
    assert {name: outbox.calls[name] - calls_before[name] for name in outbox.calls} == {
        "describe_table": 1, "describe_stream": 2, "batch_write_item": 512 // 25 + 1}
    newest = [item for item in outbox.written if item["version"]["N"] == str(NOW + 500)]
    assert sorted(heartbeat_part(item).slot for item in newest) == list(range(512))


def test_a_beat_vouches_no_later_than_the_start_of_the_listing_it_was_sized_from() -> None:
    """Whatever the listing's age, the beat's bound is when that listing began, never when it was written."""
    outbox = FakeOutbox(open_now=1)
    listed = ShardListing(listed_at=NOW - 60_000, open_shards=4)
    beat = HeartbeatEmitter(outbox, "outbox", lambda: listed, clock=ManualClock(NOW), slack_ms=0).emit()
    assert (beat.slots, beat.vouches_until, beat.occurred_at) == (64, iso(NOW - 60_000), iso(NOW))
    assert {item["vouches_until"]["N"] for item in outbox.written} == {str(NOW - 60_000)}


# --- on the events stream ---------------------------------------------------------------------------------

def test_a_heartbeat_survives_encoding_with_int_slot_keys() -> None:
    sent = Heartbeat(slots=64, through={0: NOW, 17: NOW + 5, 63: NOW - 2})
    wire = json.loads(encode_heartbeat(sent))
    assert wire == {"kind": "heartbeat", "slots": 64, "through": {"0": NOW, "17": NOW + 5, "63": NOW - 2}}
    received = decode_heartbeat(wire)
    assert received == sent
    assert received is not None and all(isinstance(slot, int) for slot in received.through)
    with_parents = sent.model_copy(update={"parents": ("shardId-000000000000",)})
    assert json.loads(encode_heartbeat(with_parents))["parents"] == ["shardId-000000000000"]
    assert decode_heartbeat(json.loads(encode_heartbeat(with_parents))) == with_parents


def test_a_job_event_is_no_heartbeat_and_a_malformed_heartbeat_is_refused() -> None:
    assert decode_heartbeat({"schema": 1, "job_id": "x", "version": 1}) is None
    with pytest.raises(ValidationError):
        decode_heartbeat({"kind": "heartbeat", "slots": 4, "through": {"a": NOW}})
    with pytest.raises(ValidationError):
        decode_heartbeat({"kind": "heartbeat", "slots": 4, "through": {"0": "soon"}})


def test_a_field_a_newer_relay_adds_to_a_heartbeat_is_ignored() -> None:
    """A projector not yet upgraded reads the heartbeats of an upgraded relay: without ignoring the field it
    would park every heartbeat, and the view's watermark would stop (every status shown as stale)."""
    beat = decode_heartbeat({"kind": "heartbeat", "slots": 4, "through": {"0": NOW}, "vouches": "all"})
    assert beat == Heartbeat(slots=4, through={0: NOW})


class RecordingCheckpoints:
    def __init__(self) -> None:
        self.recorded: list[tuple[Any, ...]] = []

    def record_slots(self, *args: Any, **kwargs: Any) -> None:
        self.recorded.append((*args, kwargs))


def _projector(checkpoints: RecordingCheckpoints) -> StatusProjector:
    # No table is touched for heartbeats: the client and the parked records must stay unused.
    return StatusProjector(client=None, status_table="status", conflicts_table="conflicts",
                           checkpoints=checkpoints, parked=None)  # type: ignore[arg-type]


def test_a_legacy_heartbeat_decodes_and_vouches_for_nothing() -> None:
    """The format before slots said only when it was written, by one item in one partition of the outbox.
    It is still read (not parked), and records nothing: no slot was heard from."""
    legacy = {"kind": "heartbeat", "occurred_at": iso(NOW)}
    decoded = decode_heartbeat(legacy)
    assert decoded is not None and (decoded.slots, decoded.through) == (0, {})
    checkpoints = RecordingCheckpoints()
    projector = _projector(checkpoints)
    tally = BatchTally()
    projector.project_batch("shard-a", [ShardRecord("7", json.dumps(legacy).encode())], tally)
    projector.finish_batch("shard-a", tally)
    assert tally.heartbeats == 1 and checkpoints.recorded == []


def test_a_batch_records_each_slots_newest_commit_and_the_shards_parents() -> None:
    checkpoints = RecordingCheckpoints()
    projector = _projector(checkpoints)
    tally = BatchTally()
    for beat in (Heartbeat(slots=16, through={0: NOW, 1: NOW + 9}),
                 Heartbeat(slots=16, through={0: NOW + 4, 2: NOW + 1}, parents=("p",))):
        projector.project_batch("c", [ShardRecord("1", encode_heartbeat(beat))], tally)
    projector.finish_batch("c", tally)
    [(consumer, shard, through, slots, _, kwargs)] = checkpoints.recorded
    assert (consumer, shard, through, slots, kwargs) == (
        PROJECTOR_CONSUMER, "c", {0: NOW + 4, 1: NOW + 9, 2: NOW + 1}, 16, {"parents": ("p",)})


class HeartbeatsOnly:
    """The events stream as the relay publishes a batch of heartbeat slots to it."""

    def __init__(self) -> None:
        self.stats = PublishStats()
        self.heartbeats: list[Heartbeat] = []

    def publish(self, events: list[Any]) -> list[bool]:
        return [True] * len(events)

    def publish_heartbeat(self, heartbeat: Heartbeat) -> bool:
        self.heartbeats.append(heartbeat)
        return True


def test_the_relay_passes_on_each_slot_no_later_than_its_beat_vouches_for() -> None:
    """A slot's time is its item's commit time, capped at the item's `vouches_until`: the beat's listing less
    the slack. Without the cap, a beat listed before a split would vouch through its commit, for a shard
    that opened after the listing and holds none of its slots. An item without `vouches_until` fills none."""
    publisher, checkpoints = HeartbeatsOnly(), RecordingCheckpoints()
    relay = Relay(publisher, checkpoints, parked=None)  # type: ignore[arg-type]
    listed_long_ago, listed_just_now = heartbeat_items(NOW, BeatPlan(16, NOW - 60_000)), heartbeat_items(
        NOW + 10, BeatPlan(16, NOW + 5))
    older_format = {name: value for name, value in listed_just_now[2].items() if name != "vouches_until"}
    records = [StreamRecord(str(n), "INSERT", image, committed)
               for n, (image, committed) in enumerate([(listed_long_ago[0], NOW + 3), (listed_just_now[1], NOW + 12),
                                                       (older_format, NOW + 12)])]
    outcome = relay.relay(records)
    assert (outcome.heartbeats, outcome.ignored) == (2, 1)
    [sent] = publisher.heartbeats
    assert sent.through == {0: NOW - 60_000, 1: NOW + 5}


def test_merge_through_keeps_each_slots_newest() -> None:
    into = {0: 10, 1: 30}
    merge_through(into, {0: 20, 1: 5, 2: 7})
    assert into == {0: 20, 1: 30, 2: 7}


# --- watermarks -------------------------------------------------------------------------------------------

def _item(slots: int, marks: dict[int, int], shard: str = "s") -> dict[str, Any]:
    return {"consumer": {"S": "projector"}, "shard_id": {"S": shard}, "slots": {"N": str(slots)},
            "processed_at": {"S": iso(NOW)}, **{f"t{slot}": {"N": str(at)} for slot, at in marks.items()}}


def test_a_watermark_is_its_oldest_slot_and_none_while_a_slot_is_missing() -> None:
    assert _watermark(_item(3, {0: NOW, 1: NOW - 50, 2: NOW + 10})).newest_event_at == iso(NOW - 50)
    assert _watermark(_item(3, {0: NOW, 2: NOW + 10})).newest_event_at is None  # slot 1 not heard from
    assert _watermark(_item(0, {})).newest_event_at is None
    # K shrank (the stream merged shards): slots of an older, bigger beat no longer count
    shrunk = _watermark(_item(2, {0: NOW, 1: NOW + 1, 2: NOW - 10_000}))
    assert (shrunk.newest_event_at, shrunk.slots) == (iso(NOW), 2)


class FakeCheckpointTable:
    """The checkpoint table as CheckpointStore uses it for watermarks: UpdateItem with `SET a = :a, ...`,
    GetItem and Query by consumer."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.updates = 0

    def update_item(self, **request: Any) -> dict[str, Any]:
        self.updates += 1
        expression, values = request["UpdateExpression"], request["ExpressionAttributeValues"]
        assert len(expression) <= 4096 and expression.startswith("SET ")
        key = (request["Key"]["consumer"]["S"], request["Key"]["shard_id"]["S"])
        item = self.items.setdefault(key, dict(request["Key"]))
        for name, value in re.findall(r"(\w+) = (:\w+)", expression):
            item[name] = values[value]
        return {}

    def get_item(self, **request: Any) -> dict[str, Any]:
        item = self.items.get((request["Key"]["consumer"]["S"], request["Key"]["shard_id"]["S"]))
        return {} if item is None else {"Item": item}

    def query(self, **request: Any) -> dict[str, Any]:
        consumer = request["ExpressionAttributeValues"][":c"]["S"]
        return {"Items": [item for (owner, _), item in sorted(self.items.items()) if owner == consumer]}


def test_checkpoint_store_waits_for_every_slot_then_holds_at_the_oldest() -> None:
    table = FakeCheckpointTable()
    store = CheckpointStore(table, "checkpoints")
    slots = slot_count(4)
    heard = {slot: NOW + slot for slot in range(slots) if slot != 40}
    store.record_slots(PROJECTOR_CONSUMER, "a", heard, slots, iso(NOW))
    assert store.watermark(PROJECTOR_CONSUMER, "a") == Watermark("a", None, iso(NOW), (), slots)

    store.record_slots(PROJECTOR_CONSUMER, "a", {40: NOW + 500}, slots, iso(NOW + 1))  # the last one arrives
    assert store.watermark(PROJECTOR_CONSUMER, "a").newest_event_at == iso(NOW)  # slot 0's, the oldest

    newer = {slot: NOW + 1_000 for slot in range(slots) if slot != 40}  # a beat, its slot 40 held back
    store.record_slots(PROJECTOR_CONSUMER, "a", newer, slots, iso(NOW + 2), parents=("p",))
    mark = store.watermark(PROJECTOR_CONSUMER, "a")
    assert (mark.newest_event_at, mark.parents) == (iso(NOW + 500), ("p",))  # held by the stuck slot
    assert store.watermarks(PROJECTOR_CONSUMER) == [mark]


def test_checkpoint_store_records_the_biggest_beat_in_updates_of_at_most_150_slots() -> None:
    table = FakeCheckpointTable()
    store = CheckpointStore(table, "checkpoints")
    store.record_slots(PROJECTOR_CONSUMER, "a", {slot: NOW + slot for slot in range(MAX_SLOTS)}, MAX_SLOTS,
                       iso(NOW))
    assert table.updates == -(-MAX_SLOTS // SLOTS_PER_UPDATE)
    assert store.watermark(PROJECTOR_CONSUMER, "a").newest_event_at == iso(NOW)


# --- the view's lag over the open shards ------------------------------------------------------------------

def mark(shard: str, newest_s_ago: float | None, parents: tuple[str, ...] = ()) -> Watermark:
    newest = None if newest_s_ago is None else iso(NOW - int(newest_s_ago * 1000))
    return Watermark(shard, newest, iso(NOW), parents, 16)


def shard(shard_id: str, *parents: str) -> Shard:
    return Shard(shard_id, 0, MAX_HASH, tuple(parents))


def test_a_shard_never_projected_with_no_parents_makes_the_lag_unknown_and_stale() -> None:
    marks = [mark("a", 1)]
    assert view_lag(marks, NOW, stale_after_s=30).stale is False  # what it says knowing only the watermarks
    lag = view_lag(marks, NOW, stale_after_s=30, shards=[shard("a"), shard("b")])
    assert (lag.view_lag_s, lag.watermark, lag.stale, lag.shards) == (None, None, True, 2)
    assert view_lag([], NOW, stale_after_s=30, shards=[shard("a")]).view_lag_s is None


def test_a_watermark_still_waiting_on_a_slot_counts_as_unknown() -> None:
    lag = view_lag([mark("a", 1), mark("b", None)], NOW, stale_after_s=30)
    assert (lag.view_lag_s, lag.stale) == (None, True)
    assert view_lag([mark("a", 1), mark("b", None)], NOW, 30, shards=[shard("a"), shard("b")]).view_lag_s is None


def test_a_child_with_no_watermark_is_bounded_by_its_parents() -> None:
    """A child is read only after its parents are drained: until it has a watermark of its own, nothing
    after its parents' can be vouched for on it."""
    lag = view_lag([mark("p", 10), mark("q", 2)], NOW, stale_after_s=30,
                   shards=[shard("c1", "p"), shard("c2", "p"), shard("q")])
    assert (lag.view_lag_s, lag.watermark, lag.stale, lag.shards) == (10.0, iso(NOW - 10_000), False, 3)
    merged = [mark("a", 40), mark("b", 5)]
    assert view_lag(merged, NOW, 30, shards=[shard("m", "a", "b")]).view_lag_s == 40.0  # the older parent
    half_known = view_lag([mark("a", 5)], NOW, 30, shards=[shard("m", "a", "b")])  # b never projected
    assert (half_known.view_lag_s, half_known.stale) == (None, True)
    waiting = view_lag([mark("p", None)], NOW, 30, shards=[shard("c", "p")])  # the parent's is incomplete
    assert (waiting.view_lag_s, waiting.stale) == (None, True)


def test_a_closed_parent_retires_once_a_child_names_it() -> None:
    """A child's watermark names its parents only once it projected a heartbeat, which it did only after
    the parents were drained: their old watermarks stop bounding the view. Its sibling, not projected yet,
    is still bounded by the parent."""
    marks = [mark("p", 600), mark("c1", 2, parents=("p",)), mark("c2", 3, parents=("p",))]
    lag = view_lag(marks, NOW, stale_after_s=30, shards=[shard("c1", "p"), shard("c2", "p")])
    assert (lag.view_lag_s, lag.stale, lag.shards) == (3.0, False, 2)
    assert view_lag(marks, NOW, stale_after_s=30).view_lag_s == 3.0  # the same from the watermarks alone
    sibling_waits = view_lag(marks[:2], NOW, stale_after_s=30, shards=[shard("c1", "p"), shard("c2", "p")])
    assert (sibling_waits.view_lag_s, sibling_waits.stale, sibling_waits.shards) == (600.0, True, 2)

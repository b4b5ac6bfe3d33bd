"""The relay under arbitrary interleavings of a split stream's shards (hypothesis).

A DynamoDB stream shard splits: the parent is read to its end, then its children are read concurrently, each
batch by its own Lambda invocation, in any interleaving, with partial PutRecords failures and crashes before
and after PutRecords (Lambda then redelivers from the first record not done, or the whole batch). The events
never name their shard. Each job's items live in one partition, so its records are in the parent and then in
one child; each heartbeat slot likewise.

What must hold, and what breaks it:
- every committed event reaches Kinesis: the relay this replaced skipped records at or below a checkpoint it
  attributed to a shard by sequence ranges, and after a split one child's progress made it skip the other
  child's lower-numbered records (`test_every_event_is_published_in_job_order_and_never_vouched_early` finds
  that interleaving within a few examples when the relay skips by a shared position);
- a job's first publications come in version order (a job's records are one shard's, handed over in order);
- the relay's watermark never vouches for an event not yet published: every event committed before it is on
  Kinesis. Without the slots (one heartbeat key for the whole outbox), a heartbeat relayed through one child
  would vouch for the other child's unpublished events; without holding a batch's heartbeat back until its
  events are out, a partial PutRecords failure would let it vouch for the failed ones; without a slot's time
  capped at its beat's `vouches_until`, a beat listed before the split (slots in one child only) would vouch
  for the other child's unpublished events (issue 32).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onward.domain.clock import epoch_ms, iso
from onward.domain.models import OutboxEvent
from onward.faults import InjectedCrash, injected
from onward.pipeline.checkpoints import CheckpointStore
from onward.pipeline.heartbeats import BeatPlan, Heartbeat, heartbeat_items
from onward.pipeline.relay.publisher import PublishStats
from onward.pipeline.relay.relay import Relay, StreamRecord

BASE_MS = 1_800_000_000_000
SLOTS = 16


class FakeTable:
    """The checkpoint table as CheckpointStore uses it for watermarks: GetItem, and UpdateItem with SET."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}

    def update_item(self, *, Key: dict[str, Any], UpdateExpression: str,  # noqa: N803 - boto3's names
                    ExpressionAttributeValues: dict[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803
        item = self.items.setdefault((Key["consumer"]["S"], Key["shard_id"]["S"]), dict(Key))
        for assignment in UpdateExpression.removeprefix("SET ").split(", "):
            name, value = re.fullmatch(r"(\w+) = (:\w+)", assignment).groups()  # type: ignore[union-attr]
            item[name] = ExpressionAttributeValues[value]
        return {}

    def get_item(self, *, Key: dict[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803
        item = self.items.get((Key["consumer"]["S"], Key["shard_id"]["S"]))
        return {} if item is None else {"Item": item}


@dataclass
class FakePublisher:
    """Kinesis as the relay sees it: what was put, in order; an armed failure refuses one entry."""

    copies: list[OutboxEvent] = field(default_factory=list)
    heartbeats: list[Heartbeat] = field(default_factory=list)
    fail_at: int | None = None  # refuse the entry at this position of the next publish (and all after it)
    stats: PublishStats = field(default_factory=PublishStats)

    def publish(self, events: list[OutboxEvent]) -> list[bool]:
        accepted = len(events) if self.fail_at is None else min(self.fail_at, len(events))
        self.fail_at = None
        self.copies += events[:accepted]
        return [True] * accepted + [False] * (len(events) - accepted)

    def publish_heartbeat(self, heartbeat: Heartbeat) -> bool:
        self.heartbeats.append(heartbeat)
        return True


class NoParking:
    def park(self, *args: Any) -> None:
        raise AssertionError(f"nothing here is unreadable: {args}")


@dataclass(frozen=True)
class Committed:
    """One record of the stream, with what it carries."""

    record: StreamRecord
    event_id: str | None  # None: a heartbeat slot


def event_image(job_id: str, version: int, at: int) -> dict[str, Any]:
    return {
        "job_id": {"S": job_id}, "version": {"N": str(version)}, "event_id": {"S": f"{job_id}:{version}"},
        "tenant_id": {"S": "acme"}, "type": {"S": "demo.echo"}, "status": {"S": "queued"},
        "attempt": {"N": "0"}, "cancel_requested": {"BOOL": False}, "occurred_at": {"S": iso(at)},
        "schema": {"N": "1"}, "time_bucket": {"S": "2027-01-15T08"},
    }


@st.composite
def split_streams(draw: st.DrawFn) -> tuple[list[Committed], list[list[Committed]]]:
    """A parent shard's records, then its children's (2 or 3), as DynamoDB commits them: each job and each
    slot in one child; commit times and sequence numbers rise across all shards in commit order. A beat
    after the split was listed either after it (its slots in every child, vouching up to its own start) or
    before it (sized for the parent alone: its slots in any children, some maybe in none, vouching up to the
    split at most)."""
    children = draw(st.integers(2, 3))
    jobs = draw(st.integers(1, 6))
    home = {f"{n:032x}": draw(st.integers(0, children - 1)) for n in range(jobs)}
    everywhere = [slot % children for slot in range(SLOTS)]  # every child holds some slot
    parent: list[Committed] = []
    kids: list[list[Committed]] = [[] for _ in range(children)]
    versions = dict.fromkeys(home, 0)
    commits = draw(st.lists(st.one_of(st.sampled_from(sorted(home)), st.just("beat")), min_size=4, max_size=40))
    split_at = draw(st.integers(0, len(commits)))
    at = split = BASE_MS
    for position, what in enumerate(commits):
        if position == split_at:
            split = at  # every child's commit comes after this
        targets: list[tuple[int, dict[str, Any], str | None]] = []
        if what == "beat":
            slot_home, plan = everywhere, BeatPlan(SLOTS, at)
            if position >= split_at and draw(st.booleans()):  # listed before the split
                slot_home = draw(st.lists(st.integers(0, children - 1), min_size=SLOTS, max_size=SLOTS))
                plan = BeatPlan(SLOTS, draw(st.integers(BASE_MS, split)))
            targets = [(slot_home[slot], item, None) for slot, item in enumerate(heartbeat_items(at, plan))]
        else:
            versions[what] += 1
            targets = [(home[what], event_image(what, versions[what], at), f"{what}:{versions[what]}")]
        for child, image, event_id in targets:
            at += draw(st.integers(1, 3))
            record = StreamRecord(str(at), "INSERT", image, at)
            (parent if position < split_at else kids[child]).append(Committed(record, event_id))
    return parent, kids


@dataclass
class Mapping:
    """Lambda's mapping of one shard: the position it resumes from."""

    records: list[Committed]
    position: int = 0

    @property
    def done(self) -> bool:
        return self.position >= len(self.records)


def deliver(relay: Relay, publisher: FakePublisher, mapping: Mapping, size: int, fault: str) -> None:
    """One invocation with a batch from `mapping`; the mapping moves as Lambda's would."""
    batch = mapping.records[mapping.position:mapping.position + size]
    if fault.startswith("fail_entry_"):
        publisher.fail_at = int(fault.removeprefix("fail_entry_"))
    try:
        if fault in ("crash_before", "crash_after"):
            point = "relay.before_put_records" if fault == "crash_before" else "relay.after_put_records"
            with injected(point):
                relay.relay([c.record for c in batch])
            raise AssertionError("the fault point did not fire")
        outcome = relay.relay([c.record for c in batch])
    except InjectedCrash:
        return  # the whole batch is delivered again
    publisher.fail_at = None
    if outcome.first_unpublished is None:
        mapping.position += len(batch)
    else:
        mapping.position += [c.record.sequence_number for c in batch].index(outcome.first_unpublished)


def assert_never_vouched_early(relay: Relay, publisher: FakePublisher, everything: list[Committed]) -> None:
    watermark = relay.watermark()
    if watermark is None or watermark.newest_event_at is None:
        return
    through = epoch_ms(watermark.newest_event_at)
    published = {copy.event_id for copy in publisher.copies}
    early = [c.event_id for c in everything
             if c.event_id is not None and c.record.committed_at < through and c.event_id not in published]
    assert not early, f"the watermark {watermark.newest_event_at} vouches for unpublished {early}"


FAULTS = st.sampled_from(["none", "none", "none", "crash_before", "crash_after", "fail_entry_0", "fail_entry_1"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams=split_streams(), data=st.data())
def test_every_event_is_published_in_job_order_and_never_vouched_early(
        streams: tuple[list[Committed], list[list[Committed]]], data: st.DataObject) -> None:
    parent, kids = streams
    publisher = FakePublisher()
    relay = Relay(publisher, CheckpointStore(FakeTable(), "checkpoints"), NoParking(), outbox=None)  # type: ignore[arg-type]
    everything = parent + [c for kid in kids for c in kid]

    for mappings in ([Mapping(parent)], [Mapping(kid) for kid in kids]):  # children only after the parent
        for _ in range(500):
            open_ = [m for m in mappings if not m.done]
            if not open_:
                break
            mapping = data.draw(st.sampled_from(open_))
            deliver(relay, publisher, mapping, data.draw(st.integers(1, 6)), data.draw(FAULTS))
            assert_never_vouched_early(relay, publisher, everything)
        assert all(m.done for m in mappings), "a shard was not drained"

    published = [copy.event_id for copy in publisher.copies]
    assert {c.event_id for c in everything if c.event_id} <= set(published)  # nothing committed is lost
    firsts: dict[str, list[int]] = {}
    for copy in publisher.copies:
        mine = firsts.setdefault(copy.job_id, [])
        if copy.version not in mine:
            mine.append(copy.version)
    assert all(versions == list(range(1, len(versions) + 1)) for versions in firsts.values())
    assert all(copy.committed_at is not None for copy in publisher.copies)  # each carries its commit time
    if any(c.event_id is None for c in everything):
        assert publisher.heartbeats and relay.watermark() is not None

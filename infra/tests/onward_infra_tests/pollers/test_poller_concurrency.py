"""The local mappings polling a stream's shards at once (`concurrency` above 1, as Lambda runs one invocation per
shard at a time), on an in-memory Kinesis: a shard's records still reach the handler in order, each once per
delivery, its position never moves backwards, a parent's records all come before its children's, and a crash in
one shard's batch neither loses nor skips another shard's records.
"""

from __future__ import annotations

import base64
import random
import threading
import time
from typing import Any

import pytest

from onward.faults import InjectedCrash
from onward.pipeline.checkpoints import Checkpoint
from onward_infra.pollers import EventsStreamPoller, ShardBackoff

NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)
CONSUMER = "local-mapping:projector"


@pytest.fixture(autouse=True)
def metrics_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on this machine (`onward up`, the soak): shards polled at once need it."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


class MemoryKinesis:
    """The Kinesis calls EventsStreamPoller makes, over fixed shards of records (each a list of sequence numbers);
    a shard in `closed` is read to its end (no NextShardIterator once its records are all read)."""

    def __init__(self, shards: dict[str, list[int]], parents: dict[str, str] | None = None,
                 closed: frozenset[str] = frozenset()) -> None:
        self._shards = shards
        self._parents = parents or {}
        self._closed = closed
        self._lock = threading.Lock()
        self.reading: set[str] = set()  # shards with a GetRecords under way

    def describe_stream_summary(self, **request: Any) -> dict[str, Any]:
        arn = f"arn:aws:kinesis:us-east-1:123456789012:stream/{request['StreamName']}"
        return {"StreamDescriptionSummary": {"StreamARN": arn}}

    def list_shards(self, **request: Any) -> dict[str, Any]:
        shards = []
        for shard_id in self._shards:
            shard: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": "0"}}
            if shard_id in self._parents:
                shard["ParentShardId"] = self._parents[shard_id]
            shards.append(shard)
        return {"Shards": shards}

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        shard_id, kind = request["ShardId"], request["ShardIteratorType"]
        sequences = self._shards[shard_id]
        if kind == "TRIM_HORIZON":
            start = 0
        elif kind == "AT_SEQUENCE_NUMBER":
            start = sequences.index(int(request["StartingSequenceNumber"]))
        else:  # AFTER_SEQUENCE_NUMBER
            start = sequences.index(int(request["StartingSequenceNumber"])) + 1
        return {"ShardIterator": f"{shard_id}|{start}"}

    def get_records(self, **request: Any) -> dict[str, Any]:
        shard_id, _, start = request["ShardIterator"].partition("|")
        limit = request["Limit"]
        with self._lock:
            assert shard_id not in self.reading, f"two reads of {shard_id} at once"
            self.reading.add(shard_id)
        try:
            time.sleep(0.001)
            sequences = self._shards[shard_id][int(start):int(start) + limit]
            end = int(start) + len(sequences)
            answer: dict[str, Any] = {"Records": [
                {"SequenceNumber": str(sequence), "PartitionKey": shard_id, "ApproximateArrivalTimestamp": 1.0,
                 "Data": base64.b64encode(b"{}").decode()} for sequence in sequences]}
            if not (shard_id in self._closed and end >= len(self._shards[shard_id])) or sequences:
                answer["NextShardIterator"] = f"{shard_id}|{end}"
            return answer
        finally:
            with self._lock:
                self.reading.discard(shard_id)


class MemoryPositions:
    """The checkpoint store's positions, in memory: every write kept, and refused (as the real store's
    conditional update is) when it would move a position backwards."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stored: dict[str, int] = {}
        self.writes: list[tuple[str, int]] = []

    def checkpoint(self, consumer: str, shard_id: str) -> Checkpoint | None:
        with self._lock:
            stored = self.stored.get(shard_id)
        return None if stored is None else Checkpoint(shard_id, str(stored), "")

    def advance(self, consumer: str, checkpoint: Checkpoint) -> bool:
        with self._lock:
            self.writes.append((checkpoint.shard_id, int(checkpoint.sequence_number)))
            if self.stored.get(checkpoint.shard_id, -1) >= int(checkpoint.sequence_number):
                return False
            self.stored[checkpoint.shard_id] = int(checkpoint.sequence_number)
            return True


class RecordingHandler:
    """Keeps each delivered batch as (shard, sequence numbers), in the order the batches started."""

    def __init__(self, before: Any = None) -> None:
        self._lock = threading.Lock()
        self._before = before  # called with the batch's (shard, sequences) before it is recorded
        self.batches: list[tuple[str, list[int]]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = event["Records"]
        shard_id = records[0]["eventID"].split(":")[0]
        sequences = [int(record["kinesis"]["sequenceNumber"]) for record in records]
        if self._before is not None:
            self._before(shard_id, sequences)
        with self._lock:
            self.batches.append((shard_id, sequences))
        return {"batchItemFailures": []}

    def delivered(self, shard_id: str) -> list[int]:
        with self._lock:
            return [sequence for shard, batch in self.batches if shard == shard_id for sequence in batch]


def poller(kinesis: MemoryKinesis, handler: Any, positions: MemoryPositions, concurrency: int,
           batch_size: int = 3, position_every_s: float = 0.0) -> EventsStreamPoller:
    return EventsStreamPoller(kinesis, "events", handler, positions, batch_size=batch_size,  # type: ignore[arg-type]
                              backoff=NO_BACKOFF, position_every_s=position_every_s, concurrency=concurrency)


def poll_until_idle(target: EventsStreamPoller) -> None:
    for _ in range(1_000):
        if not target.poll_once():
            return
    raise AssertionError("still delivering")


def test_the_shards_of_a_poll_are_handled_at_once():
    """Four shards, concurrency 4: the four handlers of one poll meet at a barrier (each waits for the others).
    One shard after another, the first handler would wait alone and the barrier break."""
    meet = threading.Barrier(4, timeout=10)
    handler = RecordingHandler(before=lambda shard_id, sequences: meet.wait())
    kinesis = MemoryKinesis({f"shard-{n}": [10 * n + 1] for n in range(4)})
    target = poller(kinesis, handler, MemoryPositions(), concurrency=4)
    try:
        assert target.poll_once() == 4
    finally:
        target.close()
    assert sorted(shard for shard, _ in handler.batches) == [f"shard-{n}" for n in range(4)]


@pytest.mark.parametrize("seed", range(4))
def test_each_shard_in_order_once_and_its_position_never_backwards(seed: int):
    """Six shards of 20 records, batches of 3, handlers taking random times at concurrency 4: every shard's
    records reach the handler exactly once, in order, and its stored position only ever rises, ending at its
    last record. Without one cursor per shard polled by one thread at a time, a shard's batches could
    overlap or repeat (MemoryKinesis refuses two reads of a shard at once)."""
    rng = random.Random(seed)
    delays = {n: rng.uniform(0, 0.004) for n in range(200)}
    handler = RecordingHandler(before=lambda shard_id, sequences: time.sleep(delays[sequences[0] % 200]))
    shards = {f"shard-{n}": list(range(100 * n + 1, 100 * n + 21)) for n in range(6)}
    positions = MemoryPositions()
    target = poller(MemoryKinesis(shards), handler, positions, concurrency=4)
    try:
        poll_until_idle(target)
    finally:
        target.close()
    for shard_id, sequences in shards.items():
        assert handler.delivered(shard_id) == sequences
        written = [sequence for shard, sequence in positions.writes if shard == shard_id]
        assert written == sorted(written) and written[-1] == sequences[-1]


def test_a_crash_in_one_shards_batch_loses_and_skips_nothing_of_another():
    """The handler crashes (InjectedCrash, as the soak's faults) on shard-0's first batch while the other
    shards' first batches are handled at once. The poll raises the crash once every batch of it is over; the
    other shards' positions are stored (a new poller resumes after their batch), and polled again the same
    poller delivers shard-0's crashed batch again and every other shard's next records: nothing lost, nothing
    skipped, no batch of another shard delivered twice. Without waiting for the wave, or without keeping what
    the other shards did, their batches would be redelivered or their positions lost."""
    crashed: list[str] = []

    def crash_once(shard_id: str, sequences: list[int]) -> None:
        if shard_id == "shard-0" and not crashed:
            crashed.append(shard_id)
            raise InjectedCrash("projector.after_record")
        time.sleep(0.01)  # the others finish after the crash

    handler = RecordingHandler(before=crash_once)
    shards = {f"shard-{n}": list(range(100 * n + 1, 100 * n + 7)) for n in range(4)}
    positions = MemoryPositions()
    target = poller(MemoryKinesis(shards), handler, positions, concurrency=4, position_every_s=60.0)
    try:
        with pytest.raises(InjectedCrash):
            target.poll_once()
        assert sorted(shard for shard, _ in handler.batches) == ["shard-1", "shard-2", "shard-3"]
        assert {shard: positions.stored.get(shard) for shard in shards} == {
            "shard-0": None, "shard-1": 103, "shard-2": 203, "shard-3": 303}
        poll_until_idle(target)
    finally:
        target.close()
    for shard_id, sequences in shards.items():
        assert handler.delivered(shard_id) == sequences, shard_id
        assert positions.stored[shard_id] == sequences[-1]


def test_a_child_shard_is_read_after_its_parent_is_drained_in_the_same_poll():
    """A closed parent (2 records) and its child (2 records) beside another shard, concurrency 4: the poll
    that drains the parent reads the child in a further wave of the same poll, never before the parent's last
    record was handled, and the other shard once per poll. Reading the child with the parent (one wave) would
    deliver a job's later events before its earlier ones; without the further wave the poll would answer less
    than the child had; a further wave over every shard would read the other shard twice in one poll."""
    handler = RecordingHandler()
    kinesis = MemoryKinesis({"parent": [1, 2], "child": [3, 4], "other": list(range(11, 20))},
                            parents={"child": "parent"}, closed=frozenset({"parent"}))
    target = poller(kinesis, handler, MemoryPositions(), concurrency=4)
    try:
        assert target.poll_once() == 2 + 3  # the parent's batch (its end not yet seen), the other's first
        assert target.poll_once() == 2 + 3  # the parent read to its end (drained), then the child; the other's
    finally:
        target.close()
    assert [batch for batch in handler.batches if batch[0] != "other"] == [("parent", [1, 2]), ("child", [3, 4])]
    assert handler.delivered("other") == list(range(11, 17))


def test_concurrency_below_one_is_refused():
    with pytest.raises(ValueError, match="concurrency"):
        poller(MemoryKinesis({}), RecordingHandler(), MemoryPositions(), concurrency=0)


def test_shards_at_once_are_refused_while_the_handlers_metrics_are_enabled(monkeypatch: pytest.MonkeyPatch):
    """Powertools Metrics keep one metric set per process, flushed and cleared by each invocation: concurrent
    invocations would publish each other's values. Disabled (as on this machine), nothing is published."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)  # (it would disable them too)
    with pytest.raises(ValueError, match="POWERTOOLS_METRICS_DISABLED"):
        poller(MemoryKinesis({}), RecordingHandler(), MemoryPositions(), concurrency=2)
    poller(MemoryKinesis({}), RecordingHandler(), MemoryPositions(), concurrency=1)  # one at a time: as on Lambda

"""A read of a sharded index (the claim's head of `active`, the wake-up pass over `parked`) sends its
partitions' Queries at once (onward.store.dynamo.recorder.DynamoRecorder._query_partitions): a claim waits for the
slowest partition, not for the sum of them (32 partitions on AWS).

The client here answers a Query only once every partition's Query has arrived (a barrier): Queries sent one
after another would never get past the first, and the test would fail on the barrier's timeout."""

from __future__ import annotations

import threading
from typing import Any

from onward.store.dynamo.keys import active_shard_partition, parked_shard_partition, queue_key
from onward.store.dynamo.recorder import PARTITION_READER_THREAD, DynamoRecorder
from onward.store.ports import ActiveEntry
from onward.store.ports.index_shards import PARKED_SHARDS

SHARDS = 4


class MeetingClient:
    """Answers each Query with the items set for its partition, after every expected Query has arrived."""

    def __init__(self, items_by_partition: dict[str, list[dict[str, Any]]], parties: int) -> None:
        self._items = items_by_partition
        self._barrier = threading.Barrier(parties, timeout=5)
        self.threads: set[str] = set()

    def query(self, **request: Any) -> dict[str, Any]:
        self.threads.add(threading.current_thread().name)
        self._barrier.wait()  # BrokenBarrierError after 5 s if the Queries come one at a time
        partition = request["ExpressionAttributeValues"][":p"]["S"]
        return {"Items": self._items.get(partition, [])[:request["Limit"]]}


def _entry(tenant_id: str, shard: int, active_vt: float) -> dict[str, Any]:
    return {"pk": {"S": queue_key(tenant_id, shard).pk}, "active_vt": {"N": str(active_vt)}}


def test_the_active_heads_partitions_are_read_at_once_and_merged_in_key_order() -> None:
    client = MeetingClient({
        active_shard_partition(0): [_entry("acme", 0, 5.0), _entry("globex", 1, 9.0)],
        active_shard_partition(2): [_entry("initech", 0, 1.0)],
        active_shard_partition(3): [_entry("umbrella", 2, 7.0)],
    }, parties=SHARDS)
    recorder = DynamoRecorder(client, "jobs", "outbox", active_shards=SHARDS)
    head = recorder.active_head(limit_per_shard=4)
    assert head == [ActiveEntry("initech", 0, 1.0), ActiveEntry("acme", 0, 5.0), ActiveEntry("umbrella", 2, 7.0),
                    ActiveEntry("globex", 1, 9.0)]
    assert len(client.threads) == SHARDS  # one reader each, none of them the caller
    assert threading.current_thread().name not in client.threads
    assert all(name.startswith(PARTITION_READER_THREAD) for name in client.threads)  # the process's kept pool


def test_the_parked_partitions_are_read_at_once() -> None:
    client = MeetingClient({parked_shard_partition(1): [{"pk": {"S": queue_key("acme", 3).pk}}]},
                           parties=PARKED_SHARDS)
    recorder = DynamoRecorder(client, "jobs", "outbox", active_shards=SHARDS)
    assert recorder.parked_due(now=1_000, limit_per_shard=16) == [("acme", 3)]


def test_one_partition_is_read_by_the_caller_itself() -> None:
    client = MeetingClient({active_shard_partition(0): [_entry("acme", 0, 2.0)]}, parties=1)
    recorder = DynamoRecorder(client, "jobs", "outbox", active_shards=1)
    assert recorder.active_head(limit_per_shard=4) == [ActiveEntry("acme", 0, 2.0)]
    assert client.threads == {threading.current_thread().name}


def test_reads_share_the_process_s_kept_reader_threads() -> None:
    """Twenty head reads run on the same few threads, started once: a mutant starting a pool per read (as
    before) would start four threads per read, about eighty here."""
    client = MeetingClient({active_shard_partition(0): [_entry("acme", 0, 5.0)]}, parties=SHARDS)
    recorder = DynamoRecorder(client, "jobs", "outbox", active_shards=SHARDS)
    readers: set[threading.Thread] = set()  # the objects themselves: a new thread is a new object
    original = client.query

    def query(**request: Any) -> dict[str, Any]:
        readers.add(threading.current_thread())
        return original(**request)

    client.query = query  # type: ignore[method-assign]
    for _ in range(20):
        assert recorder.active_head(limit_per_shard=4) == [ActiveEntry("acme", 0, 5.0)]
    assert len(readers) <= 2 * SHARDS * 2  # the pool's threads, never one set per read

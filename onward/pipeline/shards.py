"""The events stream's shards as Onward needs them: which open shards there are, and which one Kinesis
puts a partition key on (the MD5 of the key, read as a 128-bit number, falls in the shard's hash range)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from onward.domain.clock import Clock, EpochMs, system_clock


@dataclass(frozen=True)
class Shard:
    shard_id: str
    starting_hash: int
    ending_hash: int
    parents: tuple[str, ...] = ()  # the shards this one was split or merged from (read before it)

    def holds(self, partition_key: str) -> bool:
        """Whether Kinesis puts a record with this partition key on this shard."""
        hashed = int.from_bytes(hashlib.md5(partition_key.encode()).digest(), "big")
        return self.starting_hash <= hashed <= self.ending_hash


def open_shards(kinesis: Any, stream: str) -> list[Shard]:
    """The stream's open shards (a closed one, after a reshard, has an EndingSequenceNumber)."""
    found: list[Shard] = []
    for page in kinesis.get_paginator("list_shards").paginate(StreamName=stream):
        found += [_shard(listed) for listed in page["Shards"]
                  if "EndingSequenceNumber" not in listed["SequenceNumberRange"]]
    return found


def _shard(listed: dict[str, Any]) -> Shard:
    hashes = listed["HashKeyRange"]
    parents = tuple(p for p in (listed.get("ParentShardId"), listed.get("AdjacentParentShardId")) if p)
    return Shard(listed["ShardId"], int(hashes["StartingHashKey"]), int(hashes["EndingHashKey"]), parents)


class ShardCatalog:
    """The events stream's open shards, listed at most once per `ttl_ms` (readers ask on every request;
    a reshard is seen within `ttl_ms`, and until then the closed parents still bound the view)."""

    def __init__(self, kinesis: Any, stream: str, clock: Clock = system_clock, ttl_ms: int = 30_000) -> None:
        self._kinesis = kinesis
        self._stream = stream
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._lock = threading.Lock()
        self._listed: tuple[EpochMs, list[Shard]] | None = None

    def open_shards(self) -> list[Shard]:
        with self._lock:
            if self._listed is None or self._clock() - self._listed[0] > self._ttl_ms:
                self._listed = (self._clock(), open_shards(self._kinesis, self._stream))
            return self._listed[1]

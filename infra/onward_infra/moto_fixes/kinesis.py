"""Kinesis. moto's shard finds its newest sequence number by listing every key on each PutRecord, and
GetRecords walks the shard from its first record: both cost O(records in the shard). moto numbers a
shard's records 1, 2, 3, ..., so here the newest is the last key and GetRecords looks the next ones up
directly (falling back to moto's walk should the numbers ever not be consecutive).

Resharding. moto moves a split or merged shard's records into its children, and keeps routing new records
to the closed parent (it looks shards up in creation order, closed ones included, with an exclusive end
hash); GetRecords on a closed shard never ends. As on Kinesis here: a closed shard keeps its records, only
open shards receive new ones, and GetRecords past the end of a closed shard answers NextShardIterator null,
which is how a consumer knows the parent is drained and its children may be read.

Retention. moto keeps every record. `trim_shard` (run by the endpoint's retention sweeper,
infra/onward_infra/moto_fixes/retention.py) drops the records older than the stream's retention, as Kinesis does: reads
at a trimmed position start at the oldest record kept (the trim horizon), and a shard's numbering goes on
after its trimmed records (moto would start again at 1 once a shard is empty).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from moto.kinesis.models import KinesisBackend, Record, Shard, Stream
from moto.kinesis.utils import decompose_shard_iterator
from moto.utilities.utils import md5_hash


def shard_max_sequence_number(self: Shard) -> int:
    return next(reversed(self.records)) if self.records else trimmed_through(self)


def trimmed_through(shard: Shard) -> int:
    """The newest sequence number trimmed from the shard (0: none was)."""
    through: int = shard.__dict__.get("_onward_trimmed_through", 0)
    return through


def shard_put_record(self: Shard, partition_key: str, data: str, explicit_hash_key: str) -> str:
    """moto's, numbered on from the newest record even when every record was trimmed."""
    sequence_number = shard_max_sequence_number(self) + 1
    self.records[sequence_number] = Record(partition_key, data, sequence_number, explicit_hash_key)
    return str(sequence_number)


def trim_shard(shard: Shard, before_epoch_s: float) -> int:
    """Drop the shard's records that arrived before `before_epoch_s`, oldest first; the number dropped."""
    trimmed = 0
    while shard.records:
        oldest = next(iter(shard.records))
        if shard.records[oldest].created_at >= before_epoch_s:
            break
        del shard.records[oldest]
        shard.__dict__["_onward_trimmed_through"] = oldest
        trimmed += 1
    return trimmed


def shard_min_sequence_number(self: Shard) -> int:
    return next(iter(self.records)) if self.records else 0


def shard_get_records(self: Shard, last_sequence_id: str, limit: int | None) -> tuple[list[Record], int, int]:
    """moto's answer (records after `last_sequence_id`, the last one returned, millis behind the newest),
    found by key instead of by walking the shard."""
    if not self.records:
        return [], int(last_sequence_id), 0
    first, newest = next(iter(self.records)), next(reversed(self.records))
    if newest - first + 1 != len(self.records):
        return _original_shard_get_records(self, last_sequence_id, limit)
    position = max(int(last_sequence_id), first - 1)
    results: list[Record] = []
    while position < newest and (limit is None or len(results) < limit):
        position += 1
        results.append(self.records[position])
    last = results[-1].sequence_number if results else int(last_sequence_id)
    behind = self.records[newest].created_at - results[-1].created_at if results else 0.0
    return results, last, int(behind * 1000)


def stream_shard_for_key(self: Stream, partition_key: str, explicit_hash_key: str) -> Shard | None:
    """The open shard whose (inclusive) hash range holds the key: moto's own checks, then the lookup."""
    probe = _original_shard_for_key(self, partition_key, explicit_hash_key)  # validates the arguments
    key = int(explicit_hash_key) if explicit_hash_key else int(md5_hash(partition_key.encode()).hexdigest(), 16)
    found = [shard for shard in self.shards.values()
             if shard.is_open and shard.starting_hash <= key <= shard.ending_hash]
    return found[0] if found else probe


def stream_split_shard(self: Stream, shard_to_split: str, new_starting_hash_key: str) -> None:
    """moto's split, with the parent's records left in the parent."""
    with _records_kept(self, shard_to_split):
        _original_split_shard(self, shard_to_split, new_starting_hash_key)


def stream_merge_shards(self: Stream, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:
    """moto's merge, with both parents' records left in the parents."""
    with _records_kept(self, shard_to_merge, adjacent_shard_to_merge):
        _original_merge_shards(self, shard_to_merge, adjacent_shard_to_merge)


@contextmanager
def _records_kept(stream: Stream, *shard_ids: str) -> Iterator[None]:
    """Hide the shards' records from moto while it reshards (so it moves none), then give them back."""
    shards = [stream.shards[shard_id] for shard_id in shard_ids if shard_id in stream.shards]
    kept = [shard.records for shard in shards]
    for shard in shards:
        shard.records = OrderedDict()
    try:
        yield
    finally:
        for shard, records in zip(shards, kept, strict=True):
            shard.records = records


def backend_get_records(self: KinesisBackend, stream_arn: str | None, shard_iterator: str,
                        limit: int | None) -> tuple[str | None, list[Record], int]:
    """moto's GetRecords; past the last record of a closed shard, NextShardIterator is null."""
    next_iterator, records, behind = _original_backend_get_records(self, stream_arn, shard_iterator, limit)
    stream_name, shard_id, last_sequence = decompose_shard_iterator(shard_iterator)
    shard = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name).get_shard(shard_id)
    if not shard.is_open and not records and int(last_sequence) >= shard.get_max_sequence_number():
        return None, records, behind
    return next_iterator, records, behind


_original_shard_get_records = Shard.get_records
_original_shard_for_key = Stream.get_shard_for_key
_original_split_shard = Stream.split_shard
_original_merge_shards = Stream.merge_shards
_original_backend_get_records = KinesisBackend.get_records

PATCHES = (
    (Shard, "get_records", shard_get_records),
    (Shard, "get_max_sequence_number", shard_max_sequence_number),
    (Shard, "put_record", shard_put_record),
    (Shard, "get_min_sequence_number", shard_min_sequence_number),
    (Stream, "get_shard_for_key", stream_shard_for_key),
    (Stream, "split_shard", stream_split_shard),
    (Stream, "merge_shards", stream_merge_shards),
    (KinesisBackend, "get_records", backend_get_records),
)

"""DynamoDB Streams with AWS's shard topology.

moto gives each table's stream ONE shard that never closes, numbers its records 1100000000017454423009,
...010, ... (consecutive), keeps every shard iterator it ever handed out, and answers AT/AFTER_SEQUENCE_NUMBER
for any number at all. On AWS a table's stream has one shard per partition, several open at once; each
record goes to the shard of its item's partition (by a hash of the partition key), so order is kept per
item and per partition key, not across them; sequence numbers increase across the whole stream, so those
of sibling shards interleave; and shards split as partitions do: the parent closes (DescribeStream shows
its EndingSequenceNumber, GetRecords past its last record answers no NextShardIterator), two children
open with ParentShardId set, each with half of the parent's key range, and new records go to them.

Here (`TableStream` replaces moto's `StreamShard` as `table.stream_shard` when a stream is enabled):
- a table's stream opens with `StreamTopology.shards` shards (1 unless the endpoint was configured
  otherwise), each owning an equal part of the 128-bit hash space of partition keys;
- sequence numbers are wide decimal strings (28 digits, like AWS's, beyond what a float or a 64-bit
  integer holds), increasing across the stream and not consecutive: compare them as integers;
- shards split on demand (`split_shards`, the endpoint's `split_stream_shards`) and, with
  `StreamTopology.split_every_s`, over time: each period the open shard with the widest key range splits
  (checked whenever the stream is written or read, which is the only time anyone could tell);
- DescribeStream lists every shard, oldest first, with its lineage, paginated with Limit (at most 100),
  ExclusiveStartShardId and LastEvaluatedShardId; GetShardIterator takes TRIM_HORIZON, LATEST,
  AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER, and refuses (ValidationException) a sequence number that
  is not one of the named shard's records; iterators carry their position (nothing is kept per iterator)
  and never expire; GetRecords answers up to Limit (at most 1000) records of its shard;
- records older than the retention are trimmed (`trim`, run by the endpoint's retention sweeper,
  infra/onward_infra/moto_fixes/retention.py): TRIM_HORIZON then starts at the oldest record kept, and an iterator or a
  sequence number at or before a trimmed record gets TrimmedDataAccessException, as on AWS.
- The records a transaction emitted are removed again from whichever shards they went to when
  transactions.py rolls it back (it truncates `items`, the stream's log in commit order).

The topology comes from the endpoint the table was created through (stream_topology.py's `topology_app`
sets it for each request), so endpoints with different topologies can share moto's backends in one process.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, SupportsIndex

from moto.core.exceptions import JsonRESTError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamRecord, StreamShard, Table
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

from onward_infra.moto_fixes.stream_topology import StreamTopology, current_topology

FIRST_SEQUENCE_NUMBER = 4_000_000_000_000_000_000_000_000_000  # 28 digits, as AWS's are
SEQUENCE_STEP = 1_000_003  # between consecutive records of a stream: AFTER s is not AT s + 1
HASH_SPACE = 2**128  # partition keys are hashed with MD5
MAX_DESCRIBE_LIMIT = 100
MAX_GET_RECORDS_LIMIT = 1000
ITERATOR_TYPES = frozenset({"TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"})
REGION = "us-east-1"


class StreamsValidationException(JsonRESTError):
    def __init__(self, message: str) -> None:
        super().__init__("ValidationException", message)


class TrimmedDataAccess(JsonRESTError):
    def __init__(self, shard_id: str) -> None:
        super().__init__("TrimmedDataAccessException",
                         f"The operation attempted to read past the oldest stream record in shard {shard_id}: "
                         "records older than the stream's retention were trimmed")


class StreamsResourceNotFound(JsonRESTError):
    def __init__(self, message: str) -> None:
        super().__init__("ResourceNotFoundException", message)


# --- a table's stream ---------------------------------------------------------------------------------

@dataclass
class _Shard:
    shard_id: str
    parent_id: str | None
    starting_hash: int
    ending_hash: int
    starting_sequence: int
    ending_sequence: int | None = None  # set when the shard closes
    sequence: list[int] = field(default_factory=list)  # its records' sequence numbers, ascending
    records: list[StreamRecord] = field(default_factory=list)
    trimmed_through: int | None = None  # the newest sequence number trimmed, once any was

    @property
    def is_open(self) -> bool:
        return self.ending_sequence is None

    def holds(self, hashed: int) -> bool:
        return self.starting_hash <= hashed <= self.ending_hash

    def to_json(self) -> dict[str, Any]:
        numbers = {"StartingSequenceNumber": str(self.starting_sequence)}
        if self.ending_sequence is not None:
            numbers["EndingSequenceNumber"] = str(self.ending_sequence)
        described: dict[str, Any] = {"ShardId": self.shard_id, "SequenceNumberRange": numbers}
        if self.parent_id is not None:
            described["ParentShardId"] = self.parent_id
        return described


class _CommitLog(list[StreamRecord]):
    """The stream's records in commit order (moto's `StreamShard.items`): transactions.py takes its length
    before a transaction and deletes what came after it to roll the transaction back; the deleted records
    leave their shards too."""

    def __init__(self, stream: TableStream) -> None:
        super().__init__()
        self.stream = stream

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        removed = self[index] if isinstance(index, slice) else [self[index]]
        super().__delitem__(index)
        self.stream.forget(removed)


def partition_hash(hash_key: DynamoType) -> int:
    """Where a partition key falls in the 128-bit hash space (its type and value, MD5)."""
    canonical = json.dumps(hash_key.to_json(), sort_keys=True, default=str)
    return int.from_bytes(hashlib.md5(canonical.encode()).digest(), "big")


class TableStream:
    """A table's DynamoDB stream as AWS shards it; stands in for moto's StreamShard (`add`, `items`)."""

    def __init__(self, account_id: str, table: Table, topology: StreamTopology) -> None:
        self.account_id = account_id
        self.table = table
        self.topology = topology
        self.created_on = utcnow()
        self.items: list[StreamRecord] = _CommitLog(self)
        self.shards: dict[str, _Shard] = {}  # in creation order, which is also the shard ids' order
        self._next_sequence = FIRST_SEQUENCE_NUMBER
        self._last_shard_ms = 0
        self._next_split_at = (None if topology.split_every_s is None
                               else time.monotonic() + topology.split_every_s)
        width = HASH_SPACE // topology.shards
        for number in range(topology.shards):
            last = HASH_SPACE - 1 if number == topology.shards - 1 else (number + 1) * width - 1
            self._open_shard(None, number * width, last)

    # moto's StreamShard interface (its update/put/delete and transactions.py call these)

    def add(self, old: Item | None, new: Item | None) -> None:
        """One stream record for an item's change, on the open shard of its partition key."""
        self.tick()
        specification = self.table.stream_specification
        assert specification is not None  # a table has a stream only once it has a stream specification
        view_type = specification["StreamViewType"]
        event_name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
        changed = old if old is not None else new
        assert changed is not None
        hashed = partition_hash(changed.hash_key)
        shard = next(shard for shard in self.shards.values() if shard.is_open and shard.holds(hashed))
        sequence = self._take_sequence()
        record = StreamRecord(self.table, view_type, event_name, old, new, sequence)
        record.shard_id = shard.shard_id  # type: ignore[attr-defined]  # ours, on moto's record: its shard
        shard.sequence.append(sequence)
        shard.records.append(record)
        list.append(self.items, record)

    def forget(self, removed: list[StreamRecord]) -> None:
        """Take rolled-back records out of their shards (they are the newest of each)."""
        for record in reversed(removed):
            shard = self.shards[record.shard_id]  # type: ignore[attr-defined]  # set by add(), not moto's
            position = len(shard.records) - 1
            if shard.records[position] is not record:
                position = next(i for i, kept in enumerate(shard.records) if kept is record)
            del shard.records[position]
            del shard.sequence[position]

    # the topology

    def tick(self) -> None:
        """A timed split, when one is due: the open shard with the widest key range (the oldest of equals)."""
        if self._next_split_at is None or time.monotonic() < self._next_split_at:
            return
        assert self.topology.split_every_s is not None
        widest = max((shard for shard in self.shards.values() if shard.is_open),
                     key=lambda shard: shard.ending_hash - shard.starting_hash)  # max keeps the first
        self.split(widest.shard_id)
        self._next_split_at = time.monotonic() + self.topology.split_every_s

    def resumed(self) -> None:
        """After a restore in another process (infra/onward_infra/snapshots.py): the timed splits go on from now (a
        monotonic instant of the process that saved the stream means nothing here)."""
        if self.topology.split_every_s is not None:
            self._next_split_at = time.monotonic() + self.topology.split_every_s

    def split(self, shard_id: str) -> tuple[str, str]:
        """Close an open shard and open two children, each with half its key range; their ids."""
        parent = self.shards.get(shard_id)
        if parent is None:
            raise StreamsResourceNotFound(f"Requested resource not found: Shard does not exist ({shard_id})")
        if not parent.is_open:
            raise StreamsValidationException(f"Shard {shard_id} is closed: only an open shard can split")
        if parent.starting_hash == parent.ending_hash:
            raise StreamsValidationException(f"Shard {shard_id} holds one hash value: it cannot split")
        parent.ending_sequence = parent.sequence[-1] if parent.sequence else parent.starting_sequence
        middle = (parent.starting_hash + parent.ending_hash) // 2
        first = self._open_shard(shard_id, parent.starting_hash, middle)
        second = self._open_shard(shard_id, middle + 1, parent.ending_hash)
        return first.shard_id, second.shard_id

    def open_shards(self) -> list[str]:
        return [shard.shard_id for shard in self.shards.values() if shard.is_open]

    def _open_shard(self, parent_id: str | None, starting_hash: int, ending_hash: int) -> _Shard:
        # AWS's shard ids: creation time in milliseconds, then 8 hex digits. Strictly increasing here, so
        # that the ids' order is the creation order (which DescribeStream's pagination relies on).
        self._last_shard_ms = max(int(time.time() * 1000), self._last_shard_ms + 1)
        suffix = hashlib.md5(f"{self.table.table_arn}/{self._last_shard_ms}".encode()).hexdigest()[:8]
        shard = _Shard(f"shardId-{self._last_shard_ms:020d}-{suffix}", parent_id, starting_hash, ending_hash,
                       self._next_sequence)
        self.shards[shard.shard_id] = shard
        return shard

    def _take_sequence(self) -> int:
        sequence = self._next_sequence
        self._next_sequence += SEQUENCE_STEP
        return sequence

    # the DynamoDB Streams API

    def describe(self, arn: str, limit: int | None, exclusive_start_shard_id: str | None) -> dict[str, Any]:
        self.tick()
        if limit is None:
            limit = MAX_DESCRIBE_LIMIT
        if not 1 <= limit <= MAX_DESCRIBE_LIMIT:
            raise StreamsValidationException(
                f"1 validation error detected: Value '{limit}' at 'limit' failed to satisfy constraint: "
                f"Member must have value less than or equal to {MAX_DESCRIBE_LIMIT}")
        listed = [shard for shard in self.shards.values()
                  if exclusive_start_shard_id is None or shard.shard_id > exclusive_start_shard_id]
        page = listed[:limit]
        table = self.table
        enabled = (table.stream_specification or {}).get("StreamEnabled")
        description: dict[str, Any] = {
            "StreamArn": arn,
            "StreamLabel": table.latest_stream_label,
            "StreamStatus": "ENABLED" if enabled else "DISABLED",
            "StreamViewType": self.view_type(),
            "CreationRequestDateTime": self.created_on,
            "TableName": table.name,
            "KeySchema": table.schema,
            "Shards": [shard.to_json() for shard in page],
        }
        if len(listed) > limit:
            description["LastEvaluatedShardId"] = page[-1].shard_id
        return description

    def view_type(self) -> str:
        specification = self.table.stream_specification or {}
        return specification.get("StreamViewType") or "NEW_IMAGE"

    def iterator(self, arn: str, shard_id: str, kind: str, sequence_number: str | None) -> str:
        self.tick()
        shard = self._shard(shard_id)
        if kind not in ITERATOR_TYPES:
            raise StreamsValidationException(
                f"1 validation error detected: Value '{kind}' at 'shardIteratorType' failed to satisfy "
                f"constraint: Member must satisfy enum value set: {sorted(ITERATOR_TYPES)}")
        if kind == "TRIM_HORIZON":
            start = shard.starting_sequence if shard.trimmed_through is None else shard.trimmed_through + 1
        elif kind == "LATEST":
            start = self._next_sequence
        else:
            number = _sequence_number(sequence_number, kind)
            if shard.trimmed_through is not None and number <= shard.trimmed_through:
                raise TrimmedDataAccess(shard_id)
            position = bisect.bisect_left(shard.sequence, number)
            if position == len(shard.sequence) or shard.sequence[position] != number:
                raise StreamsValidationException(
                    f"Invalid SequenceNumber {sequence_number} for shard {shard_id}: no record of this shard "
                    f"has it")
            start = number if kind == "AT_SEQUENCE_NUMBER" else number + 1
        return _encode_iterator(arn, shard_id, start)

    def records(self, shard_id: str, start: int, limit: int, arn: str) -> dict[str, Any]:
        self.tick()
        shard = self._shard(shard_id)
        if shard.trimmed_through is not None and start <= shard.trimmed_through:
            raise TrimmedDataAccess(shard_id)  # the iterator's next record was trimmed after it was handed out
        position = bisect.bisect_left(shard.sequence, start)
        taken = shard.records[position:position + limit]
        answer: dict[str, Any] = {"Records": [record.to_json() for record in taken]}
        if taken:
            last = shard.sequence[position + len(taken) - 1]
            answer["NextShardIterator"] = _encode_iterator(arn, shard_id, last + 1)
        elif shard.is_open:
            answer["NextShardIterator"] = _encode_iterator(arn, shard_id, start)
        # else: a closed shard read to its end; no NextShardIterator tells the reader its children are next
        return answer

    def trim(self, before: datetime) -> int:
        """Drop every record created before `before` (naive UTC, as moto stamps records), oldest first, from
        its shard and from the commit log; the number dropped. Runs between requests (never inside a
        transaction, whose rollback counts on the commit log's length)."""
        trimmed = 0
        for shard in self.shards.values():
            count = 0
            while count < len(shard.records) and _created(shard.records[count]) < before:
                count += 1
            if count:
                shard.trimmed_through = shard.sequence[count - 1]
                del shard.records[:count], shard.sequence[:count]
                trimmed += count
        log_count = 0
        while log_count < len(self.items) and _created(self.items[log_count]) < before:
            log_count += 1
        list.__delitem__(self.items, slice(0, log_count))  # not _CommitLog's: the shards were trimmed above
        return trimmed

    def _shard(self, shard_id: str) -> _Shard:
        shard = self.shards.get(shard_id)
        if shard is None:
            raise StreamsResourceNotFound(f"Requested resource not found: Shard does not exist ({shard_id})")
        return shard


def _created(record: StreamRecord) -> datetime:
    created: datetime = record.record["dynamodb"]["ApproximateCreationDateTime"]
    return created


def _sequence_number(value: str | None, kind: str) -> int:
    if value is None:
        raise StreamsValidationException(f"SequenceNumber is required for ShardIteratorType {kind}")
    if not str(value).isdigit():
        raise StreamsValidationException(f"Invalid SequenceNumber {value}: only decimal digits")
    return int(value)


# An iterator is the stream's ARN and, opaquely, the shard and the first sequence number it reads from.

def _encode_iterator(arn: str, shard_id: str, start: int) -> str:
    position = json.dumps([shard_id, str(start)], separators=(",", ":")).encode()
    return f"{arn}|1|{base64.urlsafe_b64encode(position).decode()}"


def _decode_iterator(iterator: str) -> tuple[str, str, int]:
    arn, _, token = iterator.rpartition("|1|")
    try:
        shard_id, start = json.loads(base64.urlsafe_b64decode(token.encode()))
        return arn, str(shard_id), int(start)
    except (ValueError, TypeError, binascii.Error):
        raise StreamsValidationException("Invalid ShardIterator") from None


# --- moto, patched ------------------------------------------------------------------------------------

def _backend(account_id: str = DEFAULT_ACCOUNT_ID, region: str = REGION) -> DynamoDBBackend:
    return dynamodb_backends[account_id][region]


def _table_of(backend: DynamoDBBackend, arn: str) -> Table:
    try:
        table_name = arn.split(":", 6)[5].split("/")[1]
    except IndexError:
        raise StreamsValidationException(f"Invalid StreamArn {arn}") from None
    return backend.get_table(table_name)


def set_stream_specification(self: Table, streams: dict[str, Any] | None) -> None:
    """moto's, then the stream it opened replaced by one with the current endpoint's topology."""
    _original_set_stream_specification(self, streams)
    if type(self.stream_shard) is StreamShard:
        stream = TableStream(self.account_id, self, current_topology())
        self.stream_shard = stream  # type: ignore[assignment]  # stands in for StreamShard (add, items): no subclass


def _stream(handler: DynamoDBStreamsHandler, arn: str) -> TableStream | None:
    backend = _backend(handler.current_account, handler.region)
    stream = _table_of(backend, arn).stream_shard
    return stream if isinstance(stream, TableStream) else None


def describe_stream(self: DynamoDBStreamsHandler) -> ActionResult:
    arn = self._get_param("StreamArn")
    stream = _stream(self, arn)
    if stream is None:  # a stream moto opened before our fixes were installed
        return _original_describe_stream(self)
    limit = self._get_param("Limit")
    description = stream.describe(arn, None if limit is None else int(limit),
                                  self._get_param("ExclusiveStartShardId"))
    return ActionResult({"StreamDescription": description})


def get_shard_iterator(self: DynamoDBStreamsHandler) -> ActionResult:
    arn = self._get_param("StreamArn")
    stream = _stream(self, arn)
    if stream is None:
        return _original_get_shard_iterator(self)
    iterator = stream.iterator(arn, self._get_param("ShardId"), self._get_param("ShardIteratorType"),
                               self._get_param("SequenceNumber"))
    return ActionResult({"ShardIterator": iterator})


def get_records(self: DynamoDBStreamsHandler) -> ActionResult:
    iterator = self._get_param("ShardIterator")
    if "|1|" not in str(iterator) or iterator in self.backend.shard_iterators:
        return _original_get_records(self)  # one of moto's own iterators
    arn, shard_id, start = _decode_iterator(iterator)
    stream = _stream(self, arn)
    if stream is None:
        raise StreamsValidationException("Invalid ShardIterator")
    limit = self._get_param("Limit")
    limit = MAX_GET_RECORDS_LIMIT if limit is None else int(limit)
    if not 1 <= limit <= MAX_GET_RECORDS_LIMIT:
        raise StreamsValidationException(
            f"1 validation error detected: Value '{limit}' at 'limit' failed to satisfy constraint: "
            f"Member must have value less than or equal to {MAX_GET_RECORDS_LIMIT}")
    return ActionResult(stream.records(shard_id, start, limit, arn))


def table_stream(table_name_or_arn: str, account_id: str = DEFAULT_ACCOUNT_ID,
                 region: str = REGION) -> TableStream:
    """The stream of a table (named, or by its table or stream ARN) on the in-process backend."""
    backend = _backend(account_id, region)
    if table_name_or_arn.startswith("arn:"):
        table = _table_of(backend, table_name_or_arn)
    else:
        table = backend.get_table(table_name_or_arn)
    stream = table.stream_shard
    if isinstance(stream, TableStream):
        return stream
    raise LookupError(f"table {table.name} has no stream sharded by onward_infra.moto_fixes.streams")


def split_shards(table_name_or_arn: str,
                 shard_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
    """Split the named open shards of a table's stream (every open shard when None): parent -> children.
    The caller holds the endpoint's request lock."""
    stream = table_stream(table_name_or_arn)
    chosen = stream.open_shards() if shard_ids is None else list(shard_ids)
    return {shard_id: stream.split(shard_id) for shard_id in chosen}


_original_set_stream_specification = Table.set_stream_specification
_original_describe_stream = DynamoDBStreamsHandler.describe_stream
_original_get_shard_iterator = DynamoDBStreamsHandler.get_shard_iterator
_original_get_records = DynamoDBStreamsHandler.get_records

PATCHES = (
    (Table, "set_stream_specification", set_stream_specification),
    (DynamoDBStreamsHandler, "describe_stream", describe_stream),
    (DynamoDBStreamsHandler, "get_shard_iterator", get_shard_iterator),
    (DynamoDBStreamsHandler, "get_records", get_records),
)

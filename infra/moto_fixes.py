"""Our fixes to moto's DynamoDB and Kinesis, for the embedded endpoint (tested against moto 5.2.5).

Transactions.

moto deep-copies every table a transaction touches to be able to roll back, and keeps the copies: a
transaction costs O(table size) and memory grows without bound. It also evaluates each condition after
the previous actions of the same transaction were applied, where DynamoDB evaluates them all against the
state before the transaction.

`transact_write_items` here costs O(items in the transaction):
1. every condition is evaluated against the state before the transaction; any failure cancels the whole
   transaction before anything is written (no rollback needed, CancellationReasons as DynamoDB sends them);
2. the items the transaction touches (only those) are copied, the actions are applied, and should an action
   still fail (a validation error while applying), those items and the tables' stream records are restored;
3. each table's stream receives exactly one record per item the committed transaction changed, with the
   image before the transaction and the image after it.

Queries. moto's Query starts from `Table.all_items()`, which sorts every item of the table (comparing
DynamoType objects) before filtering on the partition key: a claim's read of one tenant's ready queue cost
O(table log table). `query` here hands moto's own query only the items of the queried partition (a dict
lookup for the table's key; a cheap string comparison for an index's string partition key), so moto's
filtering, sorting, paging and projection run unchanged on the partition alone. For a global secondary
index with a string partition key, the items of each index partition are kept in a map, built once per
index and brought up to date at each query from the items written since (every write path marks what it
touches: moto's put, update and delete, and our transactions), so an index query costs O(partition + items
written since the last one) instead of O(table): a claim reading a tenant's ready queue no longer slows as
the table grows.

Kinesis. moto's shard finds its newest sequence number by listing every key on each PutRecord, and
GetRecords walks the shard from its first record: both cost O(records in the shard). moto numbers a
shard's records 1, 2, 3, ..., so here the newest is the last key and GetRecords looks the next ones up
directly (falling back to moto's walk should the numbers ever not be consecutive).

Resharding. moto moves a split or merged shard's records into its children, and keeps routing new records
to the closed parent (it looks shards up in creation order, closed ones included, with an exclusive end
hash); GetRecords on a closed shard never ends. As on Kinesis here: a closed shard keeps its records, only
open shards receive new ones, and GetRecords past the end of a closed shard answers NextShardIterator null,
which is how a consumer knows the parent is drained and its children may be read.

Routing. moto's server finds each request's service by listing its own package directory (one `isdir`
per moto module, about 150) on every request: that listing was about two thirds of the endpoint's CPU under
load. `install` lists it once.

Responses. moto writes every DynamoDB answer by walking botocore's output shapes member by member (about a
third of the endpoint's CPU once routing was fixed). The answers of the item operations are already plain
JSON in DynamoDB's wire format, so they are dumped directly (binary values base64, as the shapes say);
anything else (a timestamp, an error) still goes through moto's serializer.

Memory. moto's BaseModel appends every instance it builds to its class's `instances_tracked` (the
reason moto's table copies were kept): `install` stops that for items and stream records, else every
overwritten row, every copy taken before a write and every discarded stream record stays alive.
"""

from __future__ import annotations

import base64
import copy
import json
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from moto import backends as moto_backends
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodb.responses import DynamoResult
from moto.kinesis.models import KinesisBackend, Shard, Stream
from moto.kinesis.utils import decompose_shard_iterator
from moto.utilities.utils import md5_hash

MAX_TRANSACTION_ACTIONS = 100
_ACTION_KINDS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_NO_REASON: tuple[None, None, None] = (None, None, None)


@dataclass(frozen=True)
class _Action:
    kind: str
    table: Table
    key: dict[str, Any]
    hash_key: DynamoType
    range_key: DynamoType | None
    request: dict[str, Any]

    @property
    def identity(self) -> tuple[str, DynamoType, DynamoType | None]:
        return (self.table.name, self.hash_key, self.range_key)

    def current(self) -> Item | None:
        return self.table.get_item(self.hash_key, self.range_key)


def _parse(backend: DynamoDBBackend, entry: dict[str, Any]) -> _Action:
    if len(entry) != 1:
        raise TransactWriteSingleOpException()
    kind, request = next(iter(entry.items()))
    if kind not in _ACTION_KINDS:
        raise MockValidationException(f"Unsupported transaction action {kind}")
    table = backend.get_table(request["TableName"])
    if kind == "Put":
        key_names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        missing = [name for name in key_names if name not in request["Item"]]
        if missing:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {missing[0]} in the item"
            )
        key = {name: request["Item"][name] for name in key_names}
    else:
        key = request["Key"]
    hash_key, range_key = backend.get_keys_value(table, key)
    return _Action(kind, table, key, hash_key, range_key, request)


def _cancellation_reason(action: _Action) -> tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]:
    expression = action.request.get("ConditionExpression")
    if expression is None:
        return _NO_REASON
    current = action.current()
    condition = get_filter_expression(
        expression,
        action.request.get("ExpressionAttributeNames"),
        action.request.get("ExpressionAttributeValues"),
    )
    try:
        satisfied = condition.expr(current)
    except TypeError:
        # moto compares mismatched types (`txt > :number`) with Python's operators and raises, which the
        # server turns into an HTTP 500; DynamoDB only compares values of one type: the condition is false.
        satisfied = False
    if satisfied:
        return _NO_REASON
    old_image = None
    if action.request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
        old_image = current.to_json()["Attributes"]
    return ("ConditionalCheckFailed", ConditionalCheckFailed().message, old_image)


def _apply(backend: DynamoDBBackend, action: _Action) -> None:
    request = action.request
    if action.kind == "Put":
        backend.put_item(action.table.name, request["Item"])
    elif action.kind == "Update":
        backend.update_item(
            action.table.name,
            action.key,
            update_expression=request["UpdateExpression"],
            expression_attribute_names=request.get("ExpressionAttributeNames"),
            expression_attribute_values=request.get("ExpressionAttributeValues"),
        )
    elif action.kind == "Delete":
        backend.delete_item(action.table.name, action.key)


class _Touched:
    """The items one transaction writes, as they were before it, plus each stream's length."""

    def __init__(self, writes: list[_Action]) -> None:
        self._writes = writes
        self._before = [copy.deepcopy(action.current()) for action in writes]
        self._stream_lengths = {
            id(action.table): len(action.table.stream_shard.items)
            for action in writes
            if action.table.stream_shard is not None
        }

    def restore(self) -> None:
        for action, before in zip(self._writes, self._before):
            _store(action, before)
        self._truncate_streams()

    def rewrite_stream_records(self) -> None:
        """One record per changed item, before-image to after-image (moto's own calls may have emitted
        several, e.g. two INSERTs for an Update that creates an item)."""
        self._truncate_streams()
        for action, before in zip(self._writes, self._before):
            shard = action.table.stream_shard
            after = action.current()
            if shard is None or _attributes(before) == _attributes(after):
                continue
            shard.add(before, after)

    def _truncate_streams(self) -> None:
        for action in self._writes:
            shard = action.table.stream_shard
            if shard is not None:
                del shard.items[self._stream_lengths[id(action.table)] :]


def _attributes(item: Item | None) -> dict[str, Any] | None:
    return None if item is None else item.to_json()["Attributes"]


def _store(action: _Action, item: Item | None) -> None:
    _mark_written(action.table, (action.hash_key, action.range_key))
    items = action.table.items
    if action.range_key is None:
        if item is None:
            items.pop(action.hash_key, None)
        else:
            items[action.hash_key] = item
        return
    by_range = items[action.hash_key]
    if item is None:
        by_range.pop(action.range_key, None)
        if not by_range:
            items.pop(action.hash_key, None)
    else:
        by_range[action.range_key] = item


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """All-or-nothing TransactWriteItems in O(items in the transaction)."""
    if len(transact_items) > MAX_TRANSACTION_ACTIONS:
        raise TooManyTransactionsException()
    actions = [_parse(self, entry) for entry in transact_items]
    if len({action.identity for action in actions}) != len(actions):
        raise MultipleTransactionsException()

    reasons = [_cancellation_reason(action) for action in actions]
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    writes = [action for action in actions if action.kind != "ConditionCheck"]
    touched = _Touched(writes)
    for position, action in enumerate(actions):
        try:
            _apply(self, action)
        except MockValidationException:
            touched.restore()
            raise
        except Exception as error:  # noqa: BLE001 - reported per action, as DynamoDB does
            touched.restore()
            failed = [_NO_REASON] * len(actions)
            failed[position] = (type(error).__name__, str(error), None)
            raise TransactionCanceledException(failed) from error
    touched.rewrite_stream_records()


def _partition(table: Table, hash_key: DynamoType | None, index_name: str | None,
               hash_key_conditions: list[tuple[str, DynamoType]] | None) -> list[Item] | None:
    """The items a query can match, or None when only moto's full scan can tell."""
    if index_name is None and hash_key is not None:
        found = table.items.get(hash_key)
        if found is None:
            return []
        return list(found.values()) if table.range_key_attr else [found]  # type: ignore[union-attr]
    if index_name is not None and hash_key_conditions and len(hash_key_conditions) == 1:
        name, value = hash_key_conditions[0]
        index = next((i for i in table.global_indexes if i.name == index_name), None)
        if index is not None and value.type == "S" and [
                k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] == [name]:
            return _index_partitions(table, index_name, name).items(table, value.value)
    if index_name is not None and hash_key_conditions and all(v.type == "S" for _, v in hash_key_conditions):
        wanted = [(name, value.value) for name, value in hash_key_conditions]
        rows = table.items.values()
        candidates = [item for row in rows for item in (row.values() if table.range_key_attr else [row])]
        return [
            item for item in candidates
            if all((attr := item.attrs.get(name)) is not None and attr.type == "S" and attr.value == value
                   for name, value in wanted)
        ]
    return None


def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
    """moto's query, over the queried partition only instead of the whole sorted table."""
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    items = _partition(self, hash_key, index_name, kwargs.get("hash_key_conditions"))
    if items is None:
        return _original_query(self, hash_key, *args, **kwargs)
    self.all_items = lambda: items  # type: ignore[method-assign] - requests are serialized (endpoint.py)
    try:
        return _original_query(self, hash_key, *args, **kwargs)
    finally:
        del self.all_items


Identity = tuple[DynamoType, DynamoType | None]  # an item's (hash key, range key)
_generation = 0  # bumped by install/uninstall: a map built under another generation may have missed writes


def _lookup(table: Table, identity: Identity) -> Item | None:
    hash_key, range_key = identity
    found = table.items.get(hash_key)
    if found is None or range_key is None:
        return found  # type: ignore[return-value]
    return found.get(range_key)  # type: ignore[union-attr]


class _IndexPartitions:
    """index partition key value -> the identities of the items in that partition, for one index."""

    def __init__(self, table: Table, attribute: str) -> None:
        self.attribute = attribute
        self.generation = _generation
        self.pending: set[Identity] = set()
        self._members: dict[str, dict[Identity, None]] = {}
        self._partition_of: dict[Identity, str] = {}
        for hash_key, row in table.items.items():
            if table.range_key_attr is None:
                self._place((hash_key, None), row)  # type: ignore[arg-type]
            else:
                for range_key, item in row.items():  # type: ignore[union-attr]
                    self._place((hash_key, range_key), item)

    def _place(self, identity: Identity, item: Item | None) -> None:
        old = self._partition_of.pop(identity, None)
        if old is not None:
            members = self._members[old]
            members.pop(identity, None)
            if not members:
                del self._members[old]
        attribute = None if item is None else item.attrs.get(self.attribute)
        if attribute is not None and attribute.type == "S":
            self._members.setdefault(attribute.value, {})[identity] = None
            self._partition_of[identity] = attribute.value

    def items(self, table: Table, value: str) -> list[Item]:
        for identity in self.pending:
            self._place(identity, _lookup(table, identity))
        self.pending.clear()
        found = (_lookup(table, identity) for identity in self._members.get(value, {}))
        return [item for item in found if item is not None]


def _index_partitions(table: Table, index_name: str, attribute: str) -> _IndexPartitions:
    maps: dict[str, _IndexPartitions] = table.__dict__.setdefault("_onward_index_partitions", {})
    current = maps.get(index_name)
    if current is None or current.generation != _generation or current.attribute != attribute:
        current = maps[index_name] = _IndexPartitions(table, attribute)
    return current


def _mark_written(table: Table, identity: Identity) -> None:
    for partitions in table.__dict__.get("_onward_index_partitions", {}).values():
        partitions.pending.add(identity)


def _identity_of(table: Table, attributes: dict[str, Any]) -> Identity:
    range_key = DynamoType(attributes[table.range_key_attr]) if table.range_key_attr else None
    return DynamoType(attributes[table.hash_key_attr]), range_key


def table_put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return _original_table_put_item(self, item_attrs, *args, **kwargs)
    finally:
        if self.hash_key_attr in item_attrs and (self.range_key_attr is None or self.range_key_attr in item_attrs):
            _mark_written(self, _identity_of(self, item_attrs))


def table_delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Any:
    try:
        return _original_table_delete_item(self, hash_key, range_key)
    finally:
        _mark_written(self, (hash_key, range_key if self.range_key_attr else None))


def update_item(self: DynamoDBBackend, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """moto updates an item in place: mark it written whatever happens."""
    try:
        return _original_update_item(self, table_name, key, *args, **kwargs)
    finally:
        try:
            table = self.get_table(table_name)  # a name or an ARN
        except Exception:  # noqa: BLE001 - no such table: nothing was written
            table = None
        if table is not None and table.hash_key_attr in key:
            _mark_written(table, _identity_of(table, key))


def shard_max_sequence_number(self: Shard) -> int:
    return next(reversed(self.records)) if self.records else 0


def shard_min_sequence_number(self: Shard) -> int:
    return next(iter(self.records)) if self.records else 0


def shard_get_records(self: Shard, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
    """moto's answer (records after `last_sequence_id`, the last one returned, millis behind the newest),
    found by key instead of by walking the shard."""
    if not self.records:
        return [], int(last_sequence_id), 0
    first, newest = next(iter(self.records)), next(reversed(self.records))
    if newest - first + 1 != len(self.records):
        return _original_shard_get_records(self, last_sequence_id, limit)
    position = max(int(last_sequence_id), first - 1)
    results = []
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
    found = [shard for shard in self.shards.values() if shard.is_open and shard.starting_hash <= key <= shard.ending_hash]
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
                        limit: int | None) -> tuple[str | None, list[Any], int]:
    """moto's GetRecords; past the last record of a closed shard, NextShardIterator is null."""
    next_iterator, records, behind = _original_backend_get_records(self, stream_arn, shard_iterator, limit)
    stream_name, shard_id, last_sequence = decompose_shard_iterator(shard_iterator)
    shard = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name).get_shard(shard_id)
    if not shard.is_open and not records and int(last_sequence) >= shard.get_max_sequence_number():
        return None, records, behind
    return next_iterator, records, behind


# Item operations whose answers hold only strings, numbers, booleans, lists, maps and binary values.
PLAIN_JSON_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                                   "BatchWriteItem", "TransactWriteItems", "TransactGetItems"})


class _NotPlainJson(TypeError):
    pass


def _wire_value(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise _NotPlainJson(type(value).__name__)


def dynamo_result_execute(self: DynamoResult, context: Any) -> tuple[int, dict[str, str], str]:
    """moto's answer to an item operation, dumped directly; moto's serializer for anything else."""
    operation = context.operation_model
    if operation.name in PLAIN_JSON_OPERATIONS and not isinstance(self.result, Exception):
        try:
            body = json.dumps(self.result, default=_wire_value, separators=(",", ":"))
        except _NotPlainJson:
            pass
        else:
            version = operation.service_model.metadata.get("jsonVersion", "1.0")
            return 200, {"Content-Type": f"application/x-amz-json-{version}"}, body
    return _original_dynamo_result_execute(self, context)


_original_dynamo_result_execute = DynamoResult.execute_result
_original_shard_for_key = Stream.get_shard_for_key
_original_split_shard = Stream.split_shard
_original_merge_shards = Stream.merge_shards
_original_backend_get_records = KinesisBackend.get_records
_original_list_of_moto_modules = moto_backends.list_of_moto_modules
_MOTO_MODULES: tuple[str, ...] = ()


def list_of_moto_modules() -> tuple[str, ...]:
    """moto's module names, listed once: the package directory does not change while the server runs."""
    global _MOTO_MODULES
    if not _MOTO_MODULES:
        _MOTO_MODULES = tuple(_original_list_of_moto_modules())
    return _MOTO_MODULES


_original_shard_get_records = Shard.get_records
_original_shard_max = Shard.get_max_sequence_number
_original_shard_min = Shard.get_min_sequence_number
_original_transact_write_items = DynamoDBBackend.transact_write_items
_original_update_item = DynamoDBBackend.update_item
_original_query = Table.query
_original_table_put_item = Table.put_item
_original_table_delete_item = Table.delete_item


class _Untracked(list):  # type: ignore[type-arg]
    """Stands in for a moto model's `instances_tracked`: moto appends every instance of every model to it
    (for its /moto-api/data.json dashboard) and never lets go, so every Item ever built (each overwritten
    row, each copy taken before a write) and every stream record, even a discarded one, would stay in
    memory for the life of the endpoint."""

    def append(self, instance: object) -> None:
        """Keep nothing."""


_UNTRACKED_MODELS = (Item, StreamRecord)


def install() -> None:
    """Replace moto's transaction and query methods with ours and mark every write for the index maps
    (idempotent); stop moto retaining every item and stream record it ever built."""
    global _generation
    if Table.query is not query:
        _generation += 1
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]
    Table.put_item = table_put_item  # type: ignore[method-assign]
    Table.delete_item = table_delete_item  # type: ignore[method-assign]
    Shard.get_records = shard_get_records  # type: ignore[method-assign]
    Shard.get_max_sequence_number = shard_max_sequence_number  # type: ignore[method-assign]
    Shard.get_min_sequence_number = shard_min_sequence_number  # type: ignore[method-assign]
    moto_backends.list_of_moto_modules = list_of_moto_modules  # type: ignore[assignment]
    Stream.get_shard_for_key = stream_shard_for_key  # type: ignore[method-assign]
    Stream.split_shard = stream_split_shard  # type: ignore[method-assign]
    Stream.merge_shards = stream_merge_shards  # type: ignore[method-assign]
    KinesisBackend.get_records = backend_get_records  # type: ignore[method-assign,assignment]
    DynamoResult.execute_result = dynamo_result_execute  # type: ignore[method-assign,assignment]
    for model in _UNTRACKED_MODELS:
        if not isinstance(model.instances_tracked, _Untracked):  # type: ignore[attr-defined]
            model.instances_tracked = _Untracked()  # type: ignore[attr-defined]


def uninstall() -> None:
    """Put moto's own methods back (used by the benchmark to measure both side by side)."""
    global _generation
    _generation += 1
    DynamoDBBackend.transact_write_items = _original_transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _original_update_item  # type: ignore[method-assign]
    Table.query = _original_query  # type: ignore[method-assign]
    Table.put_item = _original_table_put_item  # type: ignore[method-assign]
    Table.delete_item = _original_table_delete_item  # type: ignore[method-assign]
    Shard.get_records = _original_shard_get_records  # type: ignore[method-assign]
    Shard.get_max_sequence_number = _original_shard_max  # type: ignore[method-assign]
    Shard.get_min_sequence_number = _original_shard_min  # type: ignore[method-assign]
    moto_backends.list_of_moto_modules = _original_list_of_moto_modules  # type: ignore[assignment]
    Stream.get_shard_for_key = _original_shard_for_key  # type: ignore[method-assign]
    Stream.split_shard = _original_split_shard  # type: ignore[method-assign]
    Stream.merge_shards = _original_merge_shards  # type: ignore[method-assign]
    KinesisBackend.get_records = _original_backend_get_records  # type: ignore[method-assign]
    DynamoResult.execute_result = _original_dynamo_result_execute  # type: ignore[method-assign]
    for model in _UNTRACKED_MODELS:
        model.instances_tracked = []  # type: ignore[attr-defined]

"""Metering of the embedded endpoint: what every request would be billed on AWS.

A `Meter` watches each request inside the endpoint's serialization lock, so it sees the DynamoDB items a
write touches exactly before and after it: it counts requests per service and operation, the write units
each applied write costs (infra/onward_infra/billing.py: table and global secondary indexes, transactional writes
doubled), failed conditional writes (AWS bills them too), cancelled transactions, the read units of every
read, and Kinesis records and bytes put. Requests whose User-Agent carries OBSERVER_AGENT (a benchmark's own
polling) are not counted.

Kinesis records are also counted per shard (`kinesis_records_by_shard`, `kinesis_bytes_by_shard`, keyed
"<stream>|<shard id>"): the open shard whose hash key range holds the record's hash key (the MD5 of its
partition key, or its ExplicitHashKey), the one Kinesis writes it to and whose limits (1,000 records and
1 MB a second) it counts against. A record's bytes are its data and its partition key, as Kinesis counts
them against those limits; `kinesis_payload_units` are the 25 KB PUT payload units Kinesis bills (each
record rounded up to a whole unit).

Read and write units are also attributed to the partition that pays them (`charge_key`): "<table>|<partition
key value>" for a table, "<table>.<index>|<index partition key value>" for a global secondary index (a write
that moves an item's entry between index partitions charges the removal to the old one, the insertion to the
new one), "<table>|*scan*" (or "<table>.<index>|*scan*") for every Scan page, whatever partitions it read.
`MeterReading.hottest` names the costliest one. A table's write units are also counted by the written item's
sort key (`write_units_by_sort_key`, "<table>|<sort key value>", tables with a sort key only), so that a
bench tells apart the kinds of item one partition holds (a job's row from its run records).

Reads are billed as on AWS: GetItem, BatchGetItem and TransactGetItems by the size of each item named (the
whole item, whatever the projection; an absent one costs the minimum); Query and Scan by the items a page
examined, before any filter: those are found after the request by running moto's own query (scan) again on
the same state with the request's key condition, ExclusiveStartKey, order, Limit and index but no filter nor
projection, which answers exactly the items (index entries, for an index) that DynamoDB reads for the page.
A BatchGetItem's keys are all charged (moto leaves keys unprocessed only past a 16 MB answer). A failed read
costs nothing.

An endpoint in another process (`onward endpoint --meter`) answers `POST METER_PATH` with its reading
(JSON) and starts counting afresh: `RemoteMeter` reads it.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from moto.core.exceptions import JsonRESTError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.parsing.key_condition_expression import parse_expression, validate_schema
from moto.kinesis.models import kinesis_backends

from onward_infra.billing import IndexSpec, Item, index_writes, item_size, read_units, table_write_units, units
from onward_infra.moto_fixes.query_results import results_read_only

OBSERVER_AGENT = "onward-observer"
METER_PATH = "/_onward/meter"
SCAN = "*scan*"  # the partition every Scan page is charged to
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_READS = {"GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan"}
_COUNTERS = ("requests", "write_units", "read_units_by_key", "write_units_by_key", "kinesis_records_by_shard",
             "kinesis_bytes_by_shard", "write_units_by_sort_key")
PAYLOAD_UNIT = 25 * 1024  # Kinesis bills PUT payload units of 25 KB, each record rounded up to whole units
# legacy KeyConditions' operators, as moto's key condition parsing names them
_KEY_OPERATORS = {"EQ": "=", "LE": "<=", "LT": "<", "GE": ">=", "GT": ">"}

Conditions = tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, str, list[dict[str, Any]]]]]


def charge_key(table: str, partition: str, index: str | None = None) -> str:
    """The key units are attributed to: "<table>|<partition>", or "<table>.<index>|<partition>" for a global
    secondary index. `partition`: the partition key's value as text (SCAN for a Scan page)."""
    return f"{table}|{partition}" if index is None else f"{table}.{index}|{partition}"


def _text(value: dict[str, Any]) -> str:
    """A key value in DynamoDB JSON as text: a string as is, a number's digits, binary in base64."""
    (inner,) = value.values()
    return str(inner)


@dataclass(frozen=True)
class WriteCharge:
    """Write units of one write charged to one partition (`key`: see charge_key), of an index or not."""

    key: str
    units: int
    on_index: bool = False
    sort_key: str | None = None  # the written item's sort key value as text (a table with one; not an index)


@dataclass
class MeterReading:
    requests: Counter[str] = field(default_factory=Counter)  # "dynamodb.TransactWriteItems" -> count
    table_write_units: int = 0
    index_write_units: int = 0
    write_units: Counter[str] = field(default_factory=Counter)  # "dynamodb.PutItem" -> units (table + index)
    failed_conditional_writes: int = 0
    cancelled_transactions: int = 0
    kinesis_records: int = 0
    kinesis_bytes: int = 0
    kinesis_payload_units: int = 0
    kinesis_records_by_shard: Counter[str] = field(default_factory=Counter)  # "<stream>|<shard id>" -> records
    kinesis_bytes_by_shard: Counter[str] = field(default_factory=Counter)  # "<stream>|<shard id>" -> bytes
    read_units: float = 0.0
    read_units_by_key: Counter[str] = field(default_factory=Counter)  # charge_key -> read units
    write_units_by_key: Counter[str] = field(default_factory=Counter)  # charge_key -> write units (table, index)
    # "<table>|<sort key value>" -> the table's write units on items of that sort key (not its indexes')
    write_units_by_sort_key: Counter[str] = field(default_factory=Counter)

    def add(self, operation: str, charges: Iterable[WriteCharge]) -> None:
        """Count the write units of one write of `operation`, by partition."""
        for charge in charges:
            if charge.on_index:
                self.index_write_units += charge.units
            else:
                self.table_write_units += charge.units
            self.write_units[f"dynamodb.{operation}"] += charge.units
            self.write_units_by_key[charge.key] += charge.units
            if charge.sort_key is not None:
                self.write_units_by_sort_key[f"{charge.key.partition('|')[0]}|{charge.sort_key}"] += charge.units

    def add_read(self, key: str, read_units: float) -> None:
        """Count `read_units` charged to the partition `key` (see charge_key)."""
        self.read_units += read_units
        self.read_units_by_key[key] += read_units  # type: ignore[assignment]  # typeshed: Counter holds ints

    def hottest(self, kind: Literal["read", "write"],
                exclude: Callable[[str], bool] | None = None) -> tuple[str, float]:
        """The partition (see charge_key) charged the most units of `kind`, and those units; among the keys
        `exclude` does not reject when given (e.g. `lambda key: key.endswith("|*scan*")`). Ties go to the
        first key in sorted order; ("", 0.0) when no key is left."""
        if kind not in ("read", "write"):
            raise ValueError(f"kind is 'read' or 'write', not {kind!r}")
        by_key = self.read_units_by_key if kind == "read" else self.write_units_by_key
        candidates = [(key, float(n)) for key, n in by_key.items() if exclude is None or not exclude(key)]
        return min(candidates, key=lambda candidate: (-candidate[1], candidate[0]), default=("", 0.0))

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), **{name: dict(getattr(self, name)) for name in _COUNTERS}}

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> MeterReading:
        return cls(**{**values, **{name: Counter(values.get(name, {})) for name in _COUNTERS}})


@dataclass(frozen=True)
class _Touch:
    table: str
    key: Item
    before: Item | None
    condition_only: bool = False


@dataclass(frozen=True)
class _Pending:
    operation: str
    touches: list[_Touch]
    transactional: bool


@dataclass(frozen=True)
class _Read:
    operation: str
    request: dict[str, Any]


class Meter:
    def __init__(self, region: str, account_id: str = DEFAULT_ACCOUNT_ID, *, billing: bool = True) -> None:
        """`billing` False: count requests and Kinesis records only, no units (the units need each written
        item read before and after, and each Query run again: most of the meter's cost)."""
        self._billing = billing
        self._region = region
        self._account = account_id
        self._lock = threading.Lock()
        self.reading = MeterReading()

    def reset(self) -> MeterReading:
        """Start counting afresh; returns what was counted so far."""
        with self._lock:
            previous, self.reading = self.reading, MeterReading()
        return previous

    # --- called by the endpoint, inside its lock -----------------------------------------------------------

    def before(self, headers: dict[str, str], body: bytes) -> _Pending | _Read | None:
        if OBSERVER_AGENT in headers.get("user-agent", ""):
            return None
        target = headers.get("x-amz-target", "")
        prefix, _, operation = target.partition(".")
        service = {"DynamoDB_20120810": "dynamodb", "DynamoDBStreams_20120810": "dynamodbstreams",
                   "Kinesis_20131202": "kinesis"}.get(prefix)
        if service is None:
            return None
        with self._lock:
            self.reading.requests[f"{service}.{operation}"] += 1
            if service == "kinesis" and operation in ("PutRecords", "PutRecord"):
                self._count_records(json.loads(body or b"{}"))
        if not self._billing or service != "dynamodb" or operation not in _WRITES | _READS:
            return None
        request = json.loads(body or b"{}")
        if operation in _READS:
            return _Read(operation, request)
        touches = [_Touch(table, key, self._item(table, key), condition_only)
                   for table, key, condition_only in self._targets(operation, request)]
        return _Pending(operation, touches, transactional=operation == "TransactWriteItems")

    def after(self, pending: _Pending | _Read | None, status: int) -> None:
        if pending is None:
            return
        if isinstance(pending, _Read):
            if status < 400:
                charges = self._read_charges(pending)
                with self._lock:
                    for key, cost in charges:
                        self.reading.add_read(key, cost)
            return
        with self._lock:
            if status >= 400:
                if pending.transactional:
                    self.reading.cancelled_transactions += 1
                elif pending.operation != "BatchWriteItem":
                    self.reading.failed_conditional_writes += 1
                    touch = pending.touches[0]
                    self.reading.add(pending.operation, [
                        WriteCharge(self._charge_key(touch.table, touch.key), units(item_size(touch.before)),
                                    sort_key=self._sort_key(touch.table, touch.key))])
                return
            for touch in pending.touches:
                self.reading.add(pending.operation, self._write_charges(touch, pending.transactional))

    def _count_records(self, request: dict[str, Any]) -> None:
        """Count a PutRecord(s) request's records and bytes, in all and per shard written (under the lock)."""
        records = request.get("Records") or [request]
        shards = self._record_shards(request, records)
        for record, shard in zip(records, shards, strict=True):
            size = len(base64.b64decode(record.get("Data", ""))) + len(record.get("PartitionKey", "").encode())
            self.reading.kinesis_records += 1
            self.reading.kinesis_bytes += size
            self.reading.kinesis_payload_units += max(1, -(-size // PAYLOAD_UNIT))
            self.reading.kinesis_records_by_shard[shard] += 1
            self.reading.kinesis_bytes_by_shard[shard] += size

    def _record_shards(self, request: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
        """The "<stream>|<shard id>" each record goes to ("<stream>|?" when the request fails: no such stream,
        a key out of range)."""
        name = request.get("StreamName") or str(request.get("StreamARN", "")).rpartition("/")[2]
        try:
            stream = kinesis_backends[self._account][self._region].describe_stream(
                stream_arn=request.get("StreamARN"), stream_name=request.get("StreamName"))
        except JsonRESTError:
            return [f"{name}|?"] * len(records)
        shards = []
        for record in records:
            try:
                shard = stream.get_shard_for_key(record.get("PartitionKey", ""), record.get("ExplicitHashKey", ""))
            except JsonRESTError:
                shard = None
            shards.append(f"{stream.stream_name}|{shard.shard_id if shard is not None else '?'}")
        return shards

    # --- what a request costs ------------------------------------------------------------------------------

    def _write_charges(self, touch: _Touch, transactional: bool) -> list[WriteCharge]:
        """The units of one applied write (or condition check), by partition of the table and of its indexes."""
        key, sort_key = self._charge_key(touch.table, touch.key), self._sort_key(touch.table, touch.key)
        if touch.condition_only:
            return [WriteCharge(key, table_write_units(touch.before, touch.before, transactional=True),
                                sort_key=sort_key)]
        after = self._item(touch.table, touch.key)
        charges = [WriteCharge(key, table_write_units(touch.before, after, transactional=transactional),
                               sort_key=sort_key)]
        name = self._table(touch.table).name
        for spec in self._indexes(touch.table):
            charges += [WriteCharge(charge_key(name, _text(write.entry[spec.partition_key]), spec.name),
                                    write.units, on_index=True)
                        for write in index_writes(touch.before, after, spec)]
        return charges

    def _read_charges(self, read: _Read) -> list[tuple[str, float]]:
        """(charge_key, read units) of every partition a successful read read."""
        request = read.request
        if read.operation == "GetItem":
            return [self._item_read(request["TableName"], request["Key"],
                                    consistent=bool(request.get("ConsistentRead")))]
        if read.operation == "BatchGetItem":
            return [self._item_read(table, key, consistent=bool(wanted.get("ConsistentRead")))
                    for table, wanted in request.get("RequestItems", {}).items() for key in wanted["Keys"]]
        if read.operation == "TransactGetItems":
            return [self._item_read(action["Get"]["TableName"], action["Get"]["Key"], consistent=True,
                                    transactional=True) for action in request.get("TransactItems", [])]
        if read.operation == "Query":
            return [self._query_read(request)]
        return [self._scan_read(request)]

    def _item_read(self, table: str, key: Item, *, consistent: bool, transactional: bool = False) -> tuple[str, float]:
        size = item_size(self._item(table, key))
        return self._charge_key(table, key), read_units(size, consistent=consistent, transactional=transactional)

    def _query_read(self, request: dict[str, Any]) -> tuple[str, float]:
        """A Query page's units, charged to the queried partition: the size of the items (index entries) its
        key condition selects from ExclusiveStartKey on, up to its Limit or 1 MB, before any filter."""
        table, index = request["TableName"], request.get("IndexName")
        hash_conditions, range_conditions = self._key_conditions(request)
        last_range = range_conditions[-1] if range_conditions else ("", None, [])
        consistent = bool(request.get("ConsistentRead"))
        with results_read_only():  # the items are only sized, here and now: moto's copy of them is not needed
            examined, _, _ = self._backend().query(
                table, hash_conditions[0][1], last_range[1], last_range[2], projection_expressions=None,
                scan_index_forward=request.get("ScanIndexForward", True), consistent_read=consistent,
                filter_expression=None, hash_key_conditions=hash_conditions, range_key_conditions=range_conditions,
                **_page(request))
        size = sum(item_size(item.to_json()["Attributes"]) for item in examined)
        key = charge_key(self._table(table).name, _text(hash_conditions[0][1]), index)
        return key, read_units(size, consistent=consistent)

    def _scan_read(self, request: dict[str, Any]) -> tuple[str, float]:
        """A Scan page's units, charged to the table's (index's) SCAN key: the size of the items (index
        entries) it examined from ExclusiveStartKey on, in its segment, up to its Limit or 1 MB."""
        table, index = request["TableName"], request.get("IndexName")
        consistent = bool(request.get("ConsistentRead"))
        examined, _, _ = self._backend().scan(
            table, {}, filter_expression=None, consistent_read=consistent, projection_expression=None,
            segments=(request.get("Segment"), request.get("TotalSegments")), **_page(request))
        size = sum(item_size(item.to_json()["Attributes"]) for item in examined)
        return charge_key(self._table(table).name, SCAN, index), read_units(size, consistent=consistent)

    def _key_conditions(self, request: dict[str, Any]) -> Conditions:
        """A Query's key conditions as moto's query takes them (hash, range), from KeyConditionExpression or
        the legacy KeyConditions."""
        schema = self._backend().get_schema(request["TableName"], request.get("IndexName"))
        if "KeyConditionExpression" in request:
            hash_conditions, range_conditions, _ = parse_expression(
                request["KeyConditionExpression"], request.get("ExpressionAttributeValues", {}),
                request.get("ExpressionAttributeNames", {}), schema)
            return hash_conditions, range_conditions
        keys = {key["AttributeName"] for key in schema}
        return validate_schema([
            (name, _KEY_OPERATORS.get(condition["ComparisonOperator"], condition["ComparisonOperator"]),
             condition["AttributeValueList"])
            for name, condition in request.get("KeyConditions", {}).items() if name in keys], schema)

    # --- moto's state --------------------------------------------------------------------------------------

    def _backend(self) -> DynamoDBBackend:
        return dynamodb_backends[self._account][self._region]

    def _table(self, name: str) -> Any:
        return self._backend().get_table(name)

    def _charge_key(self, table: str, key: Item) -> str:
        """The charge_key of the table partition holding `key` (`table`: the table's name or ARN)."""
        described = self._table(table)
        return charge_key(described.name, _text(key[described.hash_key_attr]))

    def _sort_key(self, table: str, key: Item) -> str | None:
        """The sort key value of `key` as text, None for a table without one."""
        described = self._table(table)
        return _text(key[described.range_key_attr]) if described.range_key_attr else None

    def _key_of(self, table: str, item: Item) -> Item:
        described = self._table(table)
        names = [described.hash_key_attr] + ([described.range_key_attr] if described.range_key_attr else [])
        return {name: item[name] for name in names}

    def _item(self, table: str, key: Item) -> Item | None:
        described = self._table(table)
        range_key = DynamoType(key[described.range_key_attr]) if described.range_key_attr else None
        found = described.get_item(DynamoType(key[described.hash_key_attr]), range_key)
        return None if found is None else found.to_json()["Attributes"]

    def _indexes(self, table: str) -> list[IndexSpec]:
        described = self._table(table)
        table_keys = tuple(k for k in (described.hash_key_attr, described.range_key_attr) if k)
        return [IndexSpec(index.name, tuple(_hash_first(index.schema)), table_keys,
                          index.projection.get("ProjectionType", "ALL"),
                          tuple(index.projection.get("NonKeyAttributes", [])))
                for index in described.global_indexes]

    def _targets(self, operation: str, request: dict[str, Any]) -> list[tuple[str, Item, bool]]:
        """(table, key, condition check only) of every item a write request names."""
        if operation == "PutItem":
            return [(request["TableName"], self._key_of(request["TableName"], request["Item"]), False)]
        if operation in ("UpdateItem", "DeleteItem"):
            return [(request["TableName"], request["Key"], False)]
        if operation == "BatchWriteItem":
            found = []
            for table, writes in request.get("RequestItems", {}).items():
                for write in writes:
                    if "PutRequest" in write:
                        found.append((table, self._key_of(table, write["PutRequest"]["Item"]), False))
                    else:
                        found.append((table, write["DeleteRequest"]["Key"], False))
            return found
        found = []
        for action in request.get("TransactItems", []):
            (kind, spec), = action.items()
            key = self._key_of(spec["TableName"], spec["Item"]) if kind == "Put" else spec["Key"]
            found.append((spec["TableName"], key, kind == "ConditionCheck"))
        return found


def _page(request: dict[str, Any]) -> dict[str, Any]:
    """The arguments of moto's query and scan that say which page of items a Query or Scan reads."""
    return {"limit": request.get("Limit"), "exclusive_start_key": request.get("ExclusiveStartKey"),
            "index_name": request.get("IndexName"), "expr_names": request.get("ExpressionAttributeNames", {}),
            "expr_values": request.get("ExpressionAttributeValues", {})}


def _hash_first(schema: list[dict[str, str]]) -> list[str]:
    """A key schema's attribute names, its partition (HASH) keys first."""
    return [key["AttributeName"] for key in sorted(schema, key=lambda key: key["KeyType"] != "HASH")]


class RemoteMeter:
    """The meter of an endpoint in another process (`onward endpoint --meter` at `url`)."""

    def __init__(self, url: str) -> None:
        self._url = url

    def reset(self) -> MeterReading:
        """Start counting afresh; returns what was counted so far."""
        request = urllib.request.Request(self._url + METER_PATH, method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30) as response:
            return MeterReading.from_json(json.loads(response.read()))

"""Metering of the embedded endpoint: what every request would be billed on AWS.

A `Meter` watches each request inside the endpoint's serialization lock, so it sees the DynamoDB items a
write touches exactly before and after it: it counts requests per service and operation, the write units
each applied write costs (infra/billing.py: table and global secondary indexes, transactional writes
doubled), failed conditional writes (AWS bills them too), cancelled transactions, and Kinesis records and
bytes put. Requests whose User-Agent carries OBSERVER_AGENT (a benchmark's own polling) are not counted.

An endpoint in another process (`onward endpoint --meter`) answers `POST METER_PATH` with its reading
(JSON) and starts counting afresh: `RemoteMeter` reads it.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType

from infra.billing import IndexSpec, Item, WriteCost, item_size, units, write_cost

OBSERVER_AGENT = "onward-observer"
METER_PATH = "/_onward/meter"
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


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

    def add(self, operation: str, cost: WriteCost) -> None:
        self.table_write_units += cost.table_units
        self.index_write_units += cost.index_units
        self.write_units[f"dynamodb.{operation}"] += cost.total

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "requests": dict(self.requests), "write_units": dict(self.write_units)}

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> MeterReading:
        return cls(**{**values, "requests": Counter(values["requests"]), "write_units": Counter(values["write_units"])})


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


class Meter:
    def __init__(self, region: str, account_id: str = DEFAULT_ACCOUNT_ID) -> None:
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

    def before(self, headers: dict[str, str], body: bytes) -> _Pending | None:
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
                request = json.loads(body or b"{}")
                records = request.get("Records") or [request]
                self.reading.kinesis_records += len(records)
                self.reading.kinesis_bytes += sum(
                    len(base64.b64decode(r.get("Data", ""))) + len(r.get("PartitionKey", "")) for r in records)
        if service != "dynamodb" or operation not in _WRITES:
            return None
        request = json.loads(body or b"{}")
        touches = [_Touch(table, key, self._item(table, key), condition_only)
                   for table, key, condition_only in self._targets(operation, request)]
        return _Pending(operation, touches, transactional=operation == "TransactWriteItems")

    def after(self, pending: _Pending | None, status: int) -> None:
        if pending is None:
            return
        with self._lock:
            if status >= 400:
                if pending.transactional:
                    self.reading.cancelled_transactions += 1
                elif pending.operation != "BatchWriteItem":
                    self.reading.failed_conditional_writes += 1
                    self.reading.add(pending.operation, WriteCost(units(item_size(pending.touches[0].before)), 0))
                return
            for touch in pending.touches:
                if touch.condition_only:
                    self.reading.add(pending.operation, write_cost(touch.before, touch.before, [], transactional=True))
                    continue
                self.reading.add(pending.operation, write_cost(
                    touch.before, self._item(touch.table, touch.key), self._indexes(touch.table),
                    transactional=pending.transactional))

    # --- moto's state --------------------------------------------------------------------------------------

    def _table(self, name: str) -> Any:
        return dynamodb_backends[self._account][self._region].get_table(name)

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
        return [IndexSpec(index.name, tuple(index.schema_key_attrs), table_keys,
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


class RemoteMeter:
    """The meter of an endpoint in another process (`onward endpoint --meter` at `url`)."""

    def __init__(self, url: str) -> None:
        self._url = url

    def reset(self) -> MeterReading:
        """Start counting afresh; returns what was counted so far."""
        request = urllib.request.Request(self._url + METER_PATH, method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30) as response:
            return MeterReading.from_json(json.loads(response.read()))

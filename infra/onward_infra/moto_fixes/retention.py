"""Retention as AWS applies it. moto never deletes an expired item (and its CloudFormation does not even
enable a table's TimeToLiveSpecification), never trims a DynamoDB stream or a Kinesis stream: an endpoint
running for long holds every item, stream record and Kinesis record it was ever given.

Here, for the tables and Kinesis streams created through an endpoint with a `Retention` (the endpoint's
thread-local, like streams.py's topology; `onward endpoint` and `onward up` have one, scale 1 unless
`--retention-scale` says otherwise), a sweeper thread, between requests:

- TTL: deletes each item of a TTL-enabled table once the Number in its TTL attribute (epoch seconds) has
  passed, as DynamoDB does: a value of another type, or more than five years in the past, is ignored; the
  deletion goes through the table's own delete (its indexes and its stream shard routing, streams.py), and
  its stream REMOVE record carries the TTL service's identity, userIdentity {"Type": "Service",
  "PrincipalId": "dynamodb.amazonaws.com"} (a Lambda event shows it as {"type": "Service", "principalId":
  "dynamodb.amazonaws.com"}). Items are found from every write path (queries.mark_written), not by scanning;
- DynamoDB Streams: trims records older than 24 h (streams.py's `TableStream.trim`: then TrimmedDataAccessException
  at a trimmed position);
- Kinesis: trims records older than the stream's RetentionPeriodHours (kinesis.py's `trim_shard`: reads at a
  trimmed position start at the trim horizon).

The memory goes with them: moto's trackers keep none of these objects (moto_fixes/__init__.py).

`RetentionPolicy.scale` shortens every period for drills: an item lives `scale` times the time between its
last write and its TTL value, records are kept `scale` times their retention, and the sweeper runs every
`scale` times SWEEP_PERIOD_S (0.05 s at least). DynamoDB deletes expired items within minutes (docs: usually
within days); here within one sweep period.

`GET /_onward/retention` on the endpoint answers what was deleted and trimmed, and what is held now (JSON).
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.kinesis.models import KinesisBackend, Stream, kinesis_backends

from onward_infra.moto_fixes.kinesis import trim_shard
from onward_infra.moto_fixes.queries import Identity, lookup, ranged_items, unranged_items
from onward_infra.moto_fixes.stream_topology import answered
from onward_infra.moto_fixes.streams import TableStream

logger = logging.getLogger("onward-embedded-retention")

DYNAMODB_STREAM_RETENTION_S = 24 * 3600
SWEEP_PERIOD_S = 60.0  # at scale 1: TTL deletions and trims at most a minute late
MIN_SWEEP_PERIOD_S = 0.05
MIN_SCALE = 1e-5  # 24 h -> 0.86 s: below that a stream would be trimmed before its reader's next poll
MAX_TTL_DELETIONS_PER_SWEEP = 5000  # the sweep holds the request lock: a backlog is worked off over sweeps
TTL_IGNORED_AFTER_S = 5 * 365 * 24 * 3600  # DynamoDB ignores TTL values more than five years in the past
TTL_SERVICE_IDENTITY = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
STATS_PATH = "/_onward/retention"


@dataclass(frozen=True)
class RetentionPolicy:
    """AWS's retention periods times `scale` (1: AWS's own; 0.001: 24 h is 86.4 s)."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.scale, int | float) or not math.isfinite(self.scale) or not (
                MIN_SCALE <= self.scale <= 1):
            raise ValueError(f"the retention scale must be a number from {MIN_SCALE:g} to 1 (1: AWS's periods), "
                             f"not {self.scale!r}")

    @property
    def sweep_period_s(self) -> float:
        return max(MIN_SWEEP_PERIOD_S, SWEEP_PERIOD_S * self.scale)

    @property
    def dynamodb_stream_retention_s(self) -> float:
        return DYNAMODB_STREAM_RETENTION_S * self.scale

    def kinesis_retention_s(self, stream: Stream) -> float:
        return float(stream.retention_period_hours) * 3600 * self.scale

    def expires_at(self, written_at: float, ttl_value: float) -> float:
        """When an item written at `written_at` with TTL value `ttl_value` (epoch seconds) is expired here."""
        return written_at + max(0.0, ttl_value - written_at) * self.scale


# --- one table's TTL ------------------------------------------------------------------------------------

def _every_item(table: Table) -> Iterator[Item]:
    if table.range_key_attr:
        for row in ranged_items(table).values():
            yield from row.values()
    else:
        yield from unranged_items(table).values()


def _ttl_value(item: Item, attribute: str) -> float | None:
    value: DynamoType | None = item.attrs.get(attribute)
    if value is None or value.type != "N":
        return None
    try:
        number = float(value.value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass
class _TtlIndex:
    """A TTL-enabled table's items by when they expire here (a heap), fed by every write to the table."""

    table: Table
    attribute: str
    pending: dict[Identity, float] = field(default_factory=dict)  # written since the last sweep -> when
    heap: list[tuple[float, int, Identity, float]] = field(default_factory=list)  # (expires here, n, item, TTL)
    numbers: Iterator[int] = field(default_factory=itertools.count)

    def written(self, identity: Identity) -> None:
        self.pending[identity] = time.time()

    def take_pending(self, policy: RetentionPolicy) -> None:
        pending, self.pending = self.pending, {}
        for identity, written_at in pending.items():
            item = lookup(self.table, identity)
            value = None if item is None else _ttl_value(item, self.attribute)
            if value is not None:
                heapq.heappush(self.heap, (policy.expires_at(written_at, value), next(self.numbers), identity, value))

    def expired(self, now: float, limit: int) -> list[tuple[Identity, Item]]:
        """The items whose TTL passed (still holding the TTL value they were indexed with), at most `limit`."""
        found: list[tuple[Identity, Item]] = []
        while self.heap and self.heap[0][0] <= now and len(found) < limit:
            _, _, identity, value = heapq.heappop(self.heap)
            item = lookup(self.table, identity)
            if item is None or _ttl_value(item, self.attribute) != value:
                continue  # deleted, or written since with another TTL (indexed again then)
            if value < now - TTL_IGNORED_AFTER_S:
                continue
            found.append((identity, item))
        return found


# --- an endpoint's retention ------------------------------------------------------------------------------

_request = threading.local()


def current_retention() -> Retention | None:
    """The retention of the endpoint whose request runs on this thread (None outside one, or without one)."""
    found: Retention | None = getattr(_request, "retention", None)
    return found


@contextmanager
def _using(retention: Retention) -> Iterator[None]:
    previous = getattr(_request, "retention", None)
    _request.retention = retention
    try:
        yield
    finally:
        _request.retention = previous


class Retention:
    """The retention of one endpoint: the tables and Kinesis streams created through it, swept by a thread
    of its own (`start`) between requests (it holds the lock `start` is given while it sweeps)."""

    def __init__(self, policy: RetentionPolicy) -> None:
        self.policy = policy
        self.counts: Counter[str] = Counter()  # ttl_deleted, dynamodb_stream_records_trimmed, ...
        self._tables: list[tuple[str, str, Table]] = []  # (account, region, table)
        self._streams: list[tuple[str, str, Stream]] = []
        self._ttl: dict[int, _TtlIndex] = {}  # by id(table)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # what it sweeps

    def adopt_table(self, table: Table) -> None:
        self._tables.append((table.account_id, table.region_name, table))

    def adopt_stream(self, stream: Stream, account_id: str, region: str) -> None:
        self._streams.append((account_id, region, stream))

    def _live_tables(self) -> list[Table]:
        self._tables = [(account, region, table) for account, region, table in self._tables
                        if dynamodb_backends[account][region].tables.get(table.name) is table]
        return [table for _, _, table in self._tables]

    def _live_streams(self) -> list[Stream]:
        self._streams = [(account, region, stream) for account, region, stream in self._streams
                         if kinesis_backends[account][region].streams.get(stream.stream_name) is stream]
        return [stream for _, _, stream in self._streams]

    # the sweep

    def sweep(self, now: float | None = None) -> Counter[str]:
        """Delete expired items and trim old records, once; what it did. The caller holds the request lock."""
        now = time.time() if now is None else now
        done: Counter[str] = Counter()
        for table in self._live_tables():
            done["ttl_deleted"] += self._expire(table, now)
            stream = table.stream_shard
            if isinstance(stream, TableStream):  # moto stamps its records with naive UTC times
                before = datetime.fromtimestamp(now - self.policy.dynamodb_stream_retention_s, UTC).replace(tzinfo=None)
                done["dynamodb_stream_records_trimmed"] += stream.trim(before)
        for kinesis_stream in self._live_streams():
            before_s = now - self.policy.kinesis_retention_s(kinesis_stream)
            done["kinesis_records_trimmed"] += sum(trim_shard(shard, before_s)
                                                   for shard in kinesis_stream.shards.values())
        done["sweeps"] += 1
        self.counts.update(done)
        return done

    def _expire(self, table: Table, now: float) -> int:
        index = self._ttl_index(table)
        if index is None:
            return 0
        index.take_pending(self.policy)
        expired = index.expired(now, MAX_TTL_DELETIONS_PER_SWEEP)
        log = getattr(table.stream_shard, "items", None)
        for (hash_key, range_key), _ in expired:
            length = None if log is None else len(log)
            table.delete_item(hash_key, range_key)  # its indexes, its stream record (routed by streams.py)
            if log is not None and length is not None and len(log) > length:
                log[-1].record["userIdentity"] = dict(TTL_SERVICE_IDENTITY)
        return len(expired)

    def _ttl_index(self, table: Table) -> _TtlIndex | None:
        """The table's TTL index, (re)built when TTL was enabled or its attribute changed; None while disabled."""
        specification = table.ttl
        attribute = specification.get("AttributeName")
        index = self._ttl.get(id(table))
        if specification.get("TimeToLiveStatus") != "ENABLED" or not attribute:
            if index is not None:
                del self._ttl[id(table)]
                table.__dict__.pop("_onward_on_write", None)
            return None
        if index is None or index.attribute != attribute:
            index = _TtlIndex(table, attribute)
            now = time.time()
            index.pending = {(item.hash_key, item.range_key if table.range_key_attr else None): now
                             for item in _every_item(table)}
            self._ttl[id(table)] = index
            table.__dict__["_onward_on_write"] = index.written  # queries.mark_written calls it on every write
        return index

    def held(self) -> dict[str, int]:
        """What the swept resources hold now: items, DynamoDB stream records, Kinesis records."""
        tables = self._live_tables()
        return {
            "items": sum(len(table) for table in tables),
            "dynamodb_stream_records": sum(len(table.stream_shard.items) for table in tables
                                           if table.stream_shard is not None),
            "kinesis_records": sum(len(shard.records) for stream in self._live_streams()
                                   for shard in stream.shards.values()),
        }

    def stats(self) -> dict[str, Any]:
        return {"scale": self.policy.scale, "sweep_period_s": self.policy.sweep_period_s,
                "dynamodb_stream_retention_s": self.policy.dynamodb_stream_retention_s,
                **{name: self.counts[name] for name in ("sweeps", "ttl_deleted", "dynamodb_stream_records_trimmed",
                                                        "kinesis_records_trimmed")},
                "held": self.held()}

    # the thread

    def start(self, exclusive: Callable[[], AbstractContextManager[Any]]) -> None:
        """Sweep every policy.sweep_period_s, each sweep under `exclusive()` (the endpoint's request lock)."""
        self._stop.clear()

        def run() -> None:
            while not self._stop.wait(self.policy.sweep_period_s):
                try:
                    with exclusive():
                        self.sweep()
                except Exception:
                    logger.exception("a retention sweep failed; the next one retries")

        self._thread = threading.Thread(target=run, name="embedded-aws-retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # the endpoint's requests

    def app(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """A WSGI app running `app` (moto's) with this retention for what its requests create, and answering
        GET STATS_PATH itself."""

        def with_retention(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == STATS_PATH:
                start_response("200 OK", [("Content-Type", "application/json")])
                return [json.dumps(self.stats()).encode()]
            with _using(self):
                return answered(app, environ, start_response)

        return with_retention


# --- moto, patched ------------------------------------------------------------------------------------

def create_table(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Table:
    table: Table = _original_create_table(self, *args, **kwargs)
    retention = current_retention()
    if retention is not None:
        retention.adopt_table(table)
    return table


def create_stream(self: KinesisBackend, stream_name: str, *args: Any, **kwargs: Any) -> Stream:
    stream: Stream = _original_create_stream(self, stream_name, *args, **kwargs)
    retention = current_retention()
    if retention is not None:
        retention.adopt_stream(stream, self.account_id, self.region_name)
    return stream


def _table_from_cloudformation(cls: type[Table], /, resource_name: str, cloudformation_json: dict[str, Any],
                               account_id: str, region_name: str, **kwargs: Any) -> Table:
    """moto's, then the TimeToLiveSpecification applied (moto's CloudFormation ignores it)."""
    table: Table = _original_table_from_cloudformation.__func__(cls, resource_name, cloudformation_json,
                                                                account_id, region_name, **kwargs)
    specification = cloudformation_json.get("Properties", {}).get("TimeToLiveSpecification")
    if specification:
        enabled = specification.get("Enabled")
        dynamodb_backends[account_id][region_name].update_time_to_live(table.name, {
            "Enabled": enabled is True or str(enabled).lower() == "true",
            "AttributeName": specification.get("AttributeName")})
    return table


_original_create_table = DynamoDBBackend.create_table
_original_create_stream = KinesisBackend.create_stream
_original_table_from_cloudformation: Any = Table.__dict__["create_from_cloudformation_json"]  # a classmethod

PATCHES = (
    (DynamoDBBackend, "create_table", create_table),
    (KinesisBackend, "create_stream", create_stream),
    (Table, "create_from_cloudformation_json", classmethod(_table_from_cloudformation)),
)

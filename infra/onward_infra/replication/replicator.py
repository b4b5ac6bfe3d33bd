"""A replicator between embedded endpoints that are different Regions, as DynamoDB global tables replicate in
their default mode, multi-Region eventual consistency (MREC):

- **Item by item, asynchronously.** Every item a committed request wrote in one Region (a Put's, an Update's
  and a Delete's, each action of a transaction, each entry of a batch) is sent to the other Regions as the
  item then is (its whole image, or its deletion), stamped with the request's commit time. The items of one
  transaction arrive one by one, each on its own, as the service's do ("items are replicated individually;
  items updated in a single transaction might not be replicated together").
- **Conditions are local.** A write in one Region is checked against that Region's copy only: the replicator
  changes nothing about how a request is evaluated.
- **Last writer wins, per item.** A replicated write is applied only if its commit time is later than the
  time of the write that last changed the item in the destination (by a request there or by replication),
  ties broken by Region name; an older one is discarded and counted `superseded`. Deletions are kept as
  tombstones with their time, so an older write arriving later cannot bring an item back.
- **Replicated writes are writes.** An applied write changes the destination's item through moto's table,
  so it appears in the destination's DynamoDB stream (a table's stream in a global table holds every write,
  wherever it came from) and in its indexes; it is not replicated onward (each Region sends its own writes).

Faults, per direction (`link`): a lag (a change is applied no earlier than its commit time plus the lag), a
loss (that fraction of the changes is dropped for good, counted `dropped`), and a partition: while
partitioned, changes wait, and are delivered in order on `heal` (the service replicates what it could not
once the Region is back); `partition(..., discard=True)` drops them instead (a Region lost for good).

Sources: "How DynamoDB global tables work" (MREC, last writer wins, conditions evaluated in the local Region),
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html, and the AWS
Prescriptive Guidance's key facts on MREC (items replicated individually; the last-write timestamp kept as a
private system attribute), https://docs.aws.amazon.com/prescriptive-guidance/latest/dynamodb-global-tables/overview.html.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.replication.tap import ItemWrite

ItemKey = tuple[str, str, str]  # (logical table, hash key's wire value, range key's) as canonical text
Stamp = tuple[int, str]  # (commit time in ns, the Region that wrote): later wins, then the greater Region name


@dataclass
class _Change:
    table: str  # logical name
    key: ItemKey
    image: dict[str, Any] | None  # the item's attributes in wire form; None: deleted
    stamp: Stamp = (0, "")  # set when the request's writes are stamped, all with its commit time


@dataclass
class LinkState:
    """One direction of replication: its faults and what went through it."""

    source: str
    destination: str
    enabled: bool = True
    lag_s: float = 0.0
    loss: float = 0.0
    partitioned: bool = False
    discard_while_partitioned: bool = False
    replicated: int = 0  # applied at the destination
    superseded: int = 0  # arrived older than the destination's write of the item: discarded (last writer wins)
    dropped: int = 0  # lost to `loss` or to a discarding partition
    latency_max_s: float = 0.0  # the longest commit-to-apply time of an applied change
    latency_sum_s: float = 0.0
    queue: deque[_Change] = field(default_factory=deque)

    def counts(self) -> dict[str, Any]:
        return {"source": self.source, "destination": self.destination, "enabled": self.enabled,
                "lag_s": self.lag_s, "loss": self.loss, "partitioned": self.partitioned,
                "replicated": self.replicated, "superseded": self.superseded, "dropped": self.dropped,
                "pending": len(self.queue), "latency_max_s": round(self.latency_max_s, 4),
                "latency_mean_s": round(self.latency_sum_s / self.replicated, 4) if self.replicated else None}


class Replicator:
    """Replicates the chosen tables between embedded endpoints of different Regions (see the module's
    docstring). `tables`: logical name -> {Region: that Region's table name} (a global table's replicas share
    one name; `tables_of` builds this from deployed stacks). Every direction between two Regions is a link,
    enabled unless `directions` names the ones wanted. Use as a context manager or start()/stop()."""

    def __init__(self, endpoints: Iterable[EmbeddedEndpoint], tables: Mapping[str, Mapping[str, str]], *,
                 directions: Iterable[tuple[str, str]] | None = None, seed: int | None = None,
                 poll_s: float = 0.002) -> None:
        self._endpoints = {endpoint.region: endpoint for endpoint in endpoints}
        if len(self._endpoints) < 2:
            raise ValueError("replication needs endpoints of at least two different Regions")
        self._tables = {name: dict(regions) for name, regions in tables.items()}
        self._logical = {(region, physical): name for name, regions in self._tables.items()
                         for region, physical in regions.items()}
        wanted = None if directions is None else set(directions)
        self._links = {(source, destination): LinkState(source, destination,
                                                         enabled=wanted is None or (source, destination) in wanted)
                       for source in self._endpoints for destination in self._endpoints if source != destination}
        self._stamps: dict[str, dict[ItemKey, Stamp]] = {region: {} for region in self._endpoints}
        self._clock_skew_ns = dict.fromkeys(self._endpoints, 0)
        self._last_ns = dict.fromkeys(self._endpoints, 0)
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._poll_s = poll_s
        self._running = False
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> Self:
        for endpoint in self._endpoints.values():
            endpoint.writes.observe(self._committed)
        self._running = True
        self._thread = threading.Thread(target=self._deliver_forever, name="replicator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop replicating: what is still queued stays queued (counted `pending`)."""
        for endpoint in self._endpoints.values():
            endpoint.writes.forget(self._committed)
        with self._wake:
            self._running = False
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # the small API: faults and counters

    def link(self, source: str, destination: str) -> LinkState:
        return self._links[(source, destination)]

    def _links_between(self, source: str | None, destination: str | None) -> list[LinkState]:
        return [state for (src, dst), state in self._links.items()
                if (source is None or src == source) and (destination is None or dst == destination)]

    def set_lag(self, lag_s: float, source: str | None = None, destination: str | None = None) -> None:
        """Apply changes no earlier than `lag_s` after their commit (on every link, or those named)."""
        if lag_s < 0:
            raise ValueError(f"a lag is not negative: {lag_s}")
        with self._wake:
            for state in self._links_between(source, destination):
                state.lag_s = lag_s
            self._wake.notify_all()

    def set_loss(self, loss: float, source: str | None = None, destination: str | None = None) -> None:
        """Drop this fraction (0 to 1) of the changes, chosen at random, for good."""
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"a loss is a fraction from 0 to 1, not {loss}")
        with self._wake:
            for state in self._links_between(source, destination):
                state.loss = loss

    def set_direction(self, source: str, destination: str, enabled: bool) -> None:
        """Replicate from `source` to `destination` or not (a disabled link queues nothing)."""
        with self._wake:
            self._links[(source, destination)].enabled = enabled

    def set_clock_skew(self, region: str, skew_s: float) -> None:
        """Stamp `region`'s writes `skew_s` seconds off the true time, as a Region whose clock is off would
        (last writer wins by timestamp then prefers the Region whose clock runs ahead)."""
        with self._wake:
            self._clock_skew_ns[region] = int(skew_s * 1e9)

    def partition(self, *regions: str, discard: bool = False) -> None:
        """Cut every link to and from `regions` (all links when none is named): changes wait until `heal`,
        or with `discard` are dropped while it lasts."""
        with self._wake:
            for (source, destination), state in self._links.items():
                if not regions or source in regions or destination in regions:
                    state.partitioned = True
                    state.discard_while_partitioned = discard
                    if discard:
                        state.dropped += len(state.queue)
                        state.queue.clear()

    def heal(self) -> None:
        """Reconnect every link: what waited is delivered in commit order, each change still last-writer-wins."""
        with self._wake:
            for state in self._links.values():
                state.partitioned = False
                state.discard_while_partitioned = False
            self._wake.notify_all()

    def counts(self) -> dict[str, Any]:
        """Per link and in total: replicated, superseded (conflicts resolved against the arriving write),
        dropped, pending, and the commit-to-apply latency (what CloudWatch's ReplicationLatency measures)."""
        with self._wake:
            links = [state.counts() for state in self._links.values()]
        totals = {name: sum(link[name] for link in links)
                  for name in ("replicated", "superseded", "dropped", "pending")}
        return {"links": links, **totals}

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until no link that can deliver holds a change (partitioned links may hold some); whether
        that happened within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._wake:
            while any(state.queue for state in self._links.values() if not state.partitioned):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wake.wait(min(remaining, 0.05))
        return True

    def stamp(self, region: str, table: str, key: Mapping[str, Any]) -> Stamp | None:
        """The (commit time ns, writing Region) of the write `region`'s copy of an item last took."""
        item_key = self._key_of(table, self._table(region, table), key)
        with self._wake:
            return self._stamps[region].get(item_key)

    # capture: called by each endpoint's WriteTap, under that endpoint's request lock

    def _committed(self, region: str, writes: list[ItemWrite]) -> None:
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][region]
        changes: list[_Change] = []
        for write in writes:
            logical = self._logical.get((region, write.table.rpartition("/")[2]))
            if logical is None:
                continue
            table = backend.get_table(write.table)
            key = write.key if write.key is not None else _key_attributes(table, write.item or {})
            item_key = self._key_of(logical, table, key)
            current = table.get_item(*_dynamo_key(table, key))
            image = None if current is None else copy.deepcopy(current.to_json()["Attributes"])
            changes.append(_Change(logical, item_key, image))
        if not changes:
            return
        with self._wake:
            now = max(time.time_ns() + self._clock_skew_ns[region], self._last_ns[region] + 1)
            self._last_ns[region] = now
            for change in changes:
                change.stamp = (now, region)
                self._stamps[region][change.key] = change.stamp
                for (source, _), state in self._links.items():
                    if source == region and state.enabled:
                        if state.partitioned and state.discard_while_partitioned:
                            state.dropped += 1
                        else:
                            state.queue.append(change)
            self._wake.notify_all()

    # delivery

    def _deliver_forever(self) -> None:
        while True:
            with self._wake:
                if not self._running:
                    return
                due, wait_s = self._due_changes()
                if not due:
                    self._wake.wait(wait_s)
                    continue
            for state, change in due:
                self._apply(state, change)

    def _due_changes(self) -> tuple[list[tuple[LinkState, _Change]], float]:
        """The changes due now, in commit order per link (taken off their queues), and how long to wait when
        none is. Holds the replicator's lock."""
        now_ns = time.time_ns()
        due: list[tuple[LinkState, _Change]] = []
        wait_s = 0.5
        for state in self._links.values():
            if state.partitioned:
                continue
            while state.queue:
                change = state.queue[0]
                ready_at = change.stamp[0] - self._clock_skew_ns[change.stamp[1]] + int(state.lag_s * 1e9)
                if ready_at > now_ns:
                    wait_s = min(wait_s, max((ready_at - now_ns) / 1e9, self._poll_s))
                    break
                state.queue.popleft()
                if state.loss and self._random.random() < state.loss:
                    state.dropped += 1
                    continue
                due.append((state, change))
        return due, wait_s

    def _apply(self, state: LinkState, change: _Change) -> None:
        destination = self._endpoints[state.destination]
        with destination.exclusive(), self._wake:
            if state.partitioned:  # cut after it was taken: it waits at the head of its queue again
                state.queue.appendleft(change)
                return
            stamps = self._stamps[state.destination]
            held = stamps.get(change.key)
            if held is not None and held >= change.stamp:
                state.superseded += 1
                self._wake.notify_all()
                return
            table = self._table(state.destination, change.table)
            if change.image is None:
                key = _key_from_item_key(table, change.key)
                if table.get_item(*_dynamo_key(table, key)) is not None:
                    table.delete_item(*_dynamo_key(table, key))
            else:
                table.put_item(copy.deepcopy(change.image))
            stamps[change.key] = change.stamp
            latency_s = max(0.0, (time.time_ns() - change.stamp[0] + self._clock_skew_ns[change.stamp[1]]) / 1e9)
            state.replicated += 1
            state.latency_sum_s += latency_s
            state.latency_max_s = max(state.latency_max_s, latency_s)
            self._wake.notify_all()

    # keys

    def _table(self, region: str, logical: str) -> Table:
        table: Table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(self._tables[logical][region])
        return table

    @staticmethod
    def _key_of(logical: str, table: Table, key: Mapping[str, Any]) -> ItemKey:
        range_value = "" if table.range_key_attr is None else _canonical(key[table.range_key_attr])
        return logical, _canonical(key[table.hash_key_attr]), range_value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _key_attributes(table: Table, item: Mapping[str, Any]) -> dict[str, Any]:
    key = {table.hash_key_attr: item[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = item[table.range_key_attr]
    return key


def _key_from_item_key(table: Table, item_key: ItemKey) -> dict[str, Any]:
    key = {table.hash_key_attr: json.loads(item_key[1])}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = json.loads(item_key[2])
    return key


def _dynamo_key(table: Table, key: Mapping[str, Any]) -> tuple[DynamoType, DynamoType | None]:
    range_value = None if table.range_key_attr is None else DynamoType(key[table.range_key_attr])
    return DynamoType(key[table.hash_key_attr]), range_value


# The tables of a deployed stack that replicate on AWS (docs/regional-recovery.md): the jobs table (job rows,
# run records, results, idempotency, tenants, schedules) and the outbox (with the pipeline's heartbeats).
REPLICATED_VARIABLES = ("JOBS_TABLE", "OUTBOX_TABLE")


def tables_of(environments: Mapping[str, Mapping[str, str]],
              variables: Iterable[str] = REPLICATED_VARIABLES) -> dict[str, dict[str, str]]:
    """{variable: {Region: table name}} for the tables the variables name in each Region's deployed stack
    (`environments`: Region -> the environment `EmbeddedEndpoint.deploy` answered)."""
    return {variable: {region: environment[variable] for region, environment in environments.items()}
            for variable in variables}

"""The replication block of every status's freshness after a failover (onward.domain.replication_status), read
from this Region's jobs table and cached per process (it changes rarely: at a failover, and once when the old
home's writes are reconciled or declared lost):

- the epoch item (`REGION` / `EPOCH`, through the job store): the epoch, the home lost, when it was fenced;
- the item `REGION` / `REPLICATION` of that epoch: `home_seen_through`, the commit time of the newest heartbeat
  of the old home this Region received before the fence (`record_home_seen`: the outbox's heartbeat slot 0,
  newest first, read by the failover's operator, as only operators read the outbox), and `reconciled_epoch`, set by
  `declare_reconciled` (the operator's `onward failover --declare-lost`, or a drill once the old home's backlog
  replicated and the fence reconciler drained it).

The API reads both items with GetItem only (its role reads the jobs table, never the outbox).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from onward.domain.clock import EpochMs, system_clock
from onward.domain.models import ReplicationState
from onward.domain.replication_status import replication_state
from onward.pipeline.heartbeats import HEARTBEAT_PARTITION

REGION_PK = "REGION"
REPLICATION_SK = "REPLICATION"
CACHE_MS = 30_000  # how long a process keeps the block before reading it again


class EpochItem(Protocol):
    @property
    def epoch(self) -> int: ...
    @property
    def previous_home(self) -> str | None: ...
    @property
    def fenced_at(self) -> EpochMs | None: ...


class ReplicationStatus:
    """This Region's replication block, read at most every `cache_ms` (thread-safe)."""

    def __init__(self, client: Any, jobs_table: str, region_epoch: Callable[[], EpochItem],
                 clock: Callable[[], EpochMs] = system_clock, cache_ms: int = CACHE_MS) -> None:
        self._db = client
        self._jobs = jobs_table
        self._region_epoch = region_epoch
        self._clock = clock
        self._cache_ms = cache_ms
        self._lock = threading.Lock()
        self._cached: tuple[EpochMs, ReplicationState | None] | None = None

    def current(self) -> ReplicationState | None:
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < self._cache_ms:
                return self._cached[1]
        state = self.read()
        with self._lock:
            self._cached = (now, state)
        return state

    def forget(self) -> None:
        """Read again at the next `current` (after a failover or a declaration in this process)."""
        with self._lock:
            self._cached = None

    def read(self) -> ReplicationState | None:
        item = self._region_epoch()
        if item.epoch <= 0:
            return None
        found = self._db.get_item(TableName=self._jobs, Key=_replication_key(), ConsistentRead=True).get("Item")
        if found is None or int(found["epoch"]["N"]) != item.epoch:
            return replication_state(item.epoch, item.previous_home, item.fenced_at, None, reconciled=False)
        seen = found.get("home_seen_through", {}).get("N")
        return replication_state(item.epoch, item.previous_home, item.fenced_at, None if seen is None else int(seen),
                                 reconciled=int(found.get("reconciled_epoch", {}).get("N", "0")) == item.epoch)


def _replication_key() -> dict[str, Any]:
    return {"pk": {"S": REGION_PK}, "sk": {"S": REPLICATION_SK}}


def newest_home_beat(client: Any, outbox_table: str, fenced_at: EpochMs | None) -> EpochMs | None:
    """The commit time of the newest heartbeat committed before the fence that this Region's outbox holds (the
    standby beats only once it is home, so every earlier beat is the old home's). One Query (operators only)."""
    values: dict[str, Any] = {":p": {"S": f"{HEARTBEAT_PARTITION}#0"}}
    condition = "job_id = :p"
    if fenced_at is not None:
        condition += " AND version <= :fenced"
        values[":fenced"] = {"N": str(fenced_at)}
    items = client.query(TableName=outbox_table, KeyConditionExpression=condition, ExpressionAttributeValues=values,
                         ScanIndexForward=False, Limit=1, ConsistentRead=True)["Items"]
    return int(items[0]["version"]["N"]) if items else None


def record_home_seen(client: Any, jobs_table: str, outbox_table: str, epoch: int, fenced_at: EpochMs | None,
                     region_epoch: int | None = None) -> EpochMs | None:
    """Record, for `epoch`'s failover, the newest heartbeat of the old home this Region received (what the page's
    `may_miss_after` is computed from); returns it. Run by the failover, after the fence window. A later epoch's
    item is never written over."""
    seen = newest_home_beat(client, outbox_table, fenced_at)
    names = {"#e": "epoch", "#h": "home_seen_through", "#re": "region_epoch"}
    values: dict[str, Any] = {":e": {"N": str(epoch)}, ":re": {"N": str(region_epoch if region_epoch is not None
                                                                         else epoch)}}
    sets = ["#e = :e", "#re = :re"]
    if seen is not None:
        sets.append("#h = :h")
        values[":h"] = {"N": str(seen)}
    _update(client, jobs_table, sets, names, values, epoch)
    return seen


def declare_reconciled(client: Any, jobs_table: str, epoch: int, *, by: str, reason: str, at: EpochMs) -> None:
    """Say the old home's writes of `epoch`'s failover are all in (reconciled) or given up (declared lost): the
    statuses stop being stale for it. A later epoch's item is never written over."""
    _update(client, jobs_table, ["#e = :e", "#re = :e", "reconciled_epoch = :e", "declared_at = :at",
                                 "declared_by = :by", "reason = :why"],
            {"#e": "epoch", "#re": "region_epoch"},
            {":e": {"N": str(epoch)}, ":at": {"N": str(at)}, ":by": {"S": by}, ":why": {"S": reason}}, epoch)


def _update(client: Any, jobs_table: str, sets: list[str], names: dict[str, str], values: dict[str, Any],
            epoch: int) -> None:
    try:
        client.update_item(TableName=jobs_table, Key=_replication_key(), UpdateExpression="SET " + ", ".join(sets),
                           ConditionExpression="attribute_not_exists(#e) OR #e <= :e",
                           ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    except client.exceptions.ConditionalCheckFailedException:
        return

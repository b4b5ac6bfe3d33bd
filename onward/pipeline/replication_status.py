"""The replication block of every status's freshness after a failover (onward.domain.replication_status), read
from this Region's tables and cached per process (it changes rarely: at a failover, and once when the old home's
writes are reconciled or declared lost):

- the epoch item (`REGION` / `EPOCH`, through the job store): the epoch, the home lost, when it was fenced;
- the newest heartbeat of the old home this Region received: the newest heartbeat slot 0 of the outbox holds
  committed before the fence (one Query, newest first, Limit 1; this Region beats only once it is home);
- whether the old home's writes are reconciled: the item `REGION` / `RECONCILED` naming this epoch, written by
  `declare_reconciled` (the operator's `onward failover --declare-lost`, or a drill once the old home's backlog
  replicated and the fence reconciler drained it).
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
RECONCILED_SK = "RECONCILED"
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

    def __init__(self, client: Any, jobs_table: str, outbox_table: str, region_epoch: Callable[[], EpochItem],
                 clock: Callable[[], EpochMs] = system_clock, cache_ms: int = CACHE_MS) -> None:
        self._db = client
        self._jobs = jobs_table
        self._outbox = outbox_table
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
        return replication_state(item.epoch, item.previous_home, item.fenced_at,
                                 self.newest_home_beat(item.fenced_at), self.reconciled(item.epoch))

    def newest_home_beat(self, fenced_at: EpochMs | None) -> EpochMs | None:
        """The commit time of the newest heartbeat committed before the fence that this Region holds."""
        values: dict[str, Any] = {":p": {"S": f"{HEARTBEAT_PARTITION}#0"}}
        condition = "job_id = :p"
        if fenced_at is not None:
            condition += " AND version <= :fenced"
            values[":fenced"] = {"N": str(fenced_at)}
        items = self._db.query(TableName=self._outbox, KeyConditionExpression=condition,
                               ExpressionAttributeValues=values, ScanIndexForward=False, Limit=1,
                               ConsistentRead=True)["Items"]
        return int(items[0]["version"]["N"]) if items else None

    def reconciled(self, epoch: int) -> bool:
        item = self._db.get_item(TableName=self._jobs, Key={"pk": {"S": REGION_PK}, "sk": {"S": RECONCILED_SK}},
                                 ConsistentRead=True).get("Item")
        return item is not None and int(item["epoch"]["N"]) >= epoch


def declare_reconciled(client: Any, jobs_table: str, epoch: int, *, by: str, reason: str, at: EpochMs) -> None:
    """Say the old home's writes of `epoch`'s failover are all in (reconciled) or given up (declared lost): the
    statuses stop being stale for it. Never lowers a later epoch's declaration."""
    try:
        client.put_item(
            TableName=jobs_table,
            Item={"pk": {"S": REGION_PK}, "sk": {"S": RECONCILED_SK}, "epoch": {"N": str(epoch)},
                  "region_epoch": {"N": str(epoch)}, "declared_at": {"N": str(at)}, "declared_by": {"S": by},
                  "reason": {"S": reason}},
            ConditionExpression="attribute_not_exists(epoch) OR epoch <= :e",
            ExpressionAttributeValues={":e": {"N": str(epoch)}})
    except client.exceptions.ConditionalCheckFailedException:
        return

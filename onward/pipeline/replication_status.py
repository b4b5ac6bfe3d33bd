"""The replication block of every status's freshness after a failover (onward.domain.replication_status), read
from this Region's jobs table and cached per process (it changes rarely: at a failover, and once when the old
home's writes are reconciled or declared lost):

- the epoch item (`REGION` / `EPOCH`, through the job store): the epoch, the home lost, when it was fenced;
- the item `REGION` / `REPLICATION` of that epoch: `home_seen_through`, the commit time of the newest heartbeat
  of the old home this Region received before the fence (onward.operator.replication.record_home_seen: the
  outbox's heartbeat slot 0, newest first, read by the failover's operator, as only operators read the outbox),
  and `reconciled_epoch`, set by onward.operator.replication.declare_reconciled (the operator's `onward failover
  --declare-lost`, or a drill once the old home's backlog replicated and the fence reconciler drained it).

The API reads both items with GetItem only (its role reads the jobs table, never the outbox).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from onward.domain.clock import EpochMs, system_clock
from onward.domain.models import ReplicationState
from onward.domain.replication_status import replication_state

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
        found = self._db.get_item(TableName=self._jobs, Key=replication_key(), ConsistentRead=True).get("Item")
        if found is None or int(found["epoch"]["N"]) != item.epoch:
            return replication_state(item.epoch, item.previous_home, item.fenced_at, None, reconciled=False)
        seen = found.get("home_seen_through", {}).get("N")
        return replication_state(item.epoch, item.previous_home, item.fenced_at, None if seen is None else int(seen),
                                 reconciled=int(found.get("reconciled_epoch", {}).get("N", "0")) == item.epoch)


def replication_key() -> dict[str, Any]:
    return {"pk": {"S": REGION_PK}, "sk": {"S": REPLICATION_SK}}

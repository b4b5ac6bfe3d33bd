"""The region fence in memory (onward.store.ports.region_epochs): the epoch item under its own lock, and the
adoption's reads and the counters' rebuild over the recorder's MemoryState."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import replace

from onward.domain.clock import EpochMs
from onward.domain.regions import RegionEpoch
from onward.domain.states import CLAIMABLE_STATES, is_terminal
from onward.store.memory.state import MemoryState, QueueEntryState, stored
from onward.store.ports.index_shards import active_shard
from onward.store.ports.ready_queues import ready_queue
from onward.store.ports.region_epochs import RegionEpochBook
from onward.store.ports.rows import JobRow
from onward.store.ports.tenant_values import Tenant


def _phase(row: JobRow) -> int:
    return 0 if row.held_by is not None else 1 if row.job.state in CLAIMABLE_STATES else 2


class MemoryRegionEpochs(RegionEpochBook):
    def __init__(self, state: MemoryState) -> None:
        self._lock = threading.Lock()
        self._item = RegionEpoch.never_failed_over()
        self._state = state

    def read(self) -> RegionEpoch:
        with self._lock:
            return self._item

    def raise_to(self, epoch: RegionEpoch) -> bool:
        with self._lock:
            if self._item.epoch != epoch.epoch - 1:
                return False
            self._item = epoch
            return True

    def mark_adopted(self, epoch: int, at: int) -> bool:
        with self._lock:
            if self._item.epoch != epoch:
                return False
            if self._item.adopted_at is None:
                self._item = replace(self._item, adopted_at=EpochMs(at))
            return True

    def unadopted(self, epoch: int, cursor: str | None, limit: int) -> tuple[list[str], str | None]:
        # held rows first, then waiting, then running (as on DynamoDB: onward.store.dynamo.region_epochs)
        with self._state.lock:
            found = sorted((_phase(row), job_id) for job_id, row in self._state.rows.items()
                           if not is_terminal(row.job.state) and row.region_epoch < epoch)
        start = None if cursor is None else tuple(json.loads(cursor))
        page = [key for key in found if start is None or key > start][:limit]
        more = len(page) == limit and page[-1] != found[-1]
        return [job_id for _, job_id in page], (json.dumps(page[-1]) if more else None)

    def rebuild_counters(self, epoch: int, tenants: Sequence[Tenant], clock: float) -> int:
        state = self._state
        with state.lock:
            bands: dict[tuple[str, int], dict[int, int]] = {}
            for row in state.rows.values():
                if row.job.state in CLAIMABLE_STATES and row.held_by is None:
                    queue = ready_queue(row.job, row.ready_shards)
                    counts = bands.setdefault((row.job.tenant_id, queue.shard), {})
                    counts[queue.priority] = counts.get(queue.priority, 0) + 1
            for counter in state.running.values():
                counter.usage = counter.usage._replace(running=0, started_ms_sum=0)
            for key in bands.keys() - state.queues.keys():
                state.queues[key] = QueueEntryState(*key)
            for (tenant_id, shard), entry in state.queues.items():
                entry.bands = dict(bands.get((tenant_id, shard), {}))
                entry.waiting = sum(entry.bands.values())
                if entry.waiting and not entry.in_active:
                    entry.partition = active_shard(tenant_id, shard, state.active_shards, "")
                    entry.active = True
                    entry.parked_until = None
                    if entry.active_vt is None:
                        entry.active_vt = stored(clock)
            return len(state.running) + len(state.queues)

"""The lease index, the tenant counters, parking and the virtual clock in memory (onward.store.ports): due
jobs and lapsed leases in due and expiry order, tenants' settings and counters, the `active` head and the
parked entries in the order of their index shards, each update under the condition DynamoDB's has."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import replace

from onward.domain.clock import EpochMs
from onward.domain.dispatch import Usage
from onward.domain.errors import RegionFenced
from onward.domain.states import JobState
from onward.store.memory.state import MemoryState, first, stored
from onward.store.ports.index_shards import CLOCK_SHARDS, PARKED_SHARDS, active_shard, parked_shard, waking
from onward.store.ports.lease_index import LeaseIndex
from onward.store.ports.outcomes import RenewalAnswer
from onward.store.ports.parking import Parking
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import ActiveEntry, ActiveHead, DueJob
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import Tenant, TenantState
from onward.store.ports.virtual_clock import VirtualClock


class MemoryLeaseIndex(LeaseIndex):
    _state: MemoryState

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        with self._state.lock:
            index = self._state.ready.get((tenant_id, queue), {})
            due = first((((due_at, job_id), job_id) for job_id, due_at in index.items() if due_at <= now), limit)
            # with the rows, as DynamoDB's ready index answers (it projects every attribute)
            return [DueJob(job_id, index[job_id], self._state.row(job_id)) for job_id in due]

    def expired_leases(self, shard: int, now: EpochMs, limit: int) -> list[str]:
        with self._state.lock:
            index = self._state.leases.get(shard, {})
            return first((((expires, job_id), job_id) for job_id, expires in index.items() if expires < now), limit)

    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs, *,
                    region_epoch: int = 0) -> RenewalAnswer:
        with self._state.lock:
            row = self._state.rows.get(job_id)
            if row is not None and row.region_epoch != region_epoch:  # (region fence, issue 39)
                raise RegionFenced(f"renewal of job {job_id} attempt {attempt}: the row is of region epoch "
                                   f"{row.region_epoch}, the writer's {region_epoch}")
            if row is None or (row.job.state, row.job.attempt, row.job.lease_owner) != (
                    JobState.RUNNING, attempt, worker_id):
                return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)
            self._state.put_row(row._replace(job=row.job.model_copy(update={"lease_expires_at": expires_at})))
            return RenewalAnswer(held=True, cancel_requested=row.job.cancel_requested, lease_expires_at=expires_at)


class MemoryTenantCounters(TenantCounters):
    _state: MemoryState

    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        with self._state.lock:
            registered = self._state.tenants
            wanted = sorted(registered) if tenant_ids is None else sorted(set(tenant_ids) & set(registered))
            return {tenant_id: registered[tenant_id] for tenant_id in wanted}

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        states = {}  # (always as last written: one lock orders every read and write)
        with self._state.lock:
            for tenant, shards in wanted.items():
                running = [self._state.running.get((tenant.tenant_id, shard)) for shard in range(tenant.running_shards)]
                usages = tuple(Usage() if counter is None else counter.usage for counter in running)
                queues = {shard: entry.value() for shard in (range(tenant.ready_shards) if shards is None
                                                              else sorted(shards))
                          if (entry := self._state.queues.get((tenant.tenant_id, shard))) is not None}
                states[tenant.tenant_id] = TenantState(tenant, Usage.combined(list(usages)), queues, usages)
        return states

    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        with self._state.lock:
            if only_if_new and tenant.tenant_id in self._state.tenants:
                return False
            base = tenant.base  # (its virtual time kept as DynamoDB's number reads back)
            self._state.tenants[tenant.tenant_id] = replace(tenant, base=base._replace(virtual=stored(base.virtual)))
        return True

    def lift(self, tenant_id: str, lift_vt: int) -> bool:
        with self._state.lock:
            counter = self._state.running.get((tenant_id, 0))
            if counter is not None and counter.item_lift is not None and counter.item_lift >= lift_vt:
                return False
            counter = self._state.counter(tenant_id, 0)
            counter.usage, counter.item_lift = counter.usage.lifted(lift_vt), lift_vt
            return True

    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        with self._state.lock:
            entry = self._state.queues.get((tenant_id, shard))
            if entry is None or not entry.active or entry.active_vt is None or not entry.active_vt < active_vt:
                return False
            entry.active_vt = stored(active_vt)  # as DynamoDB's number reads back
            return True

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        with self._state.lock:
            entry = self._state.queues.get((tenant_id, shard))
            if entry is None or not entry.active or entry.waiting > 0:
                return False
            entry.active, entry.returned_at = False, math.inf
            return True

    def active_head(self, limit_per_shard: int) -> ActiveHead:
        with self._state.lock:
            shards = self._state.active_shards
            by_shard: dict[int, list[tuple[tuple[float, str, str], ActiveEntry]]] = {}
            for entry in self._state.queues.values():
                if entry.in_active and entry.active_vt is not None:
                    by_shard.setdefault(entry.partition, []).append(
                        ((entry.active_vt, *entry.order()), ActiveEntry(entry.tenant_id, entry.shard,
                                                                         float(entry.active_vt))))
        found: list[ActiveEntry] = []
        unread_from: float | None = None
        for index in range(shards):  # each partition's head, as a Query of each reads it
            partition = by_shard.get(index, [])
            read = first(partition, limit_per_shard)
            found += read
            if read and len(read) >= limit_per_shard:  # a full page: DynamoDB answers a LastEvaluatedKey
                unread_from = min(read[-1].active_vt, unread_from if unread_from is not None else float("inf"))
        found.sort(key=lambda entry: (entry.active_vt, entry.tenant_id, entry.shard))
        return ActiveHead(found, unread_from)


class MemoryParking(Parking):
    _state: MemoryState

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        with self._state.lock:
            entry = self._state.queues.get((tenant_id, shard))
            # no job entered since the read (an entry none ever entered has no count to compare)
            if entry is None or not entry.active or entry.entered not in (0, entered):
                return False
            entry.active, entry.parked_until, entry.returned_at = False, until, math.inf
            return True

    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        with self._state.lock:
            found: list[tuple[str, int]] = []
            for index in range(PARKED_SHARDS):
                found += first((((entry.parked_until, *entry.order()), (entry.tenant_id, entry.shard))
                                for entry in self._state.queues.values()
                                if entry.parked_until is not None and entry.parked_until <= now
                                and parked_shard(entry.tenant_id, entry.shard) == index), limit_per_shard)
        return found

    def wake(self, tenant_id: str, shard: int, now: EpochMs) -> bool:
        with self._state.lock:
            entry = self._state.queues.get((tenant_id, shard))
            if entry is None or entry.parked_until is None:
                return False
            entry.active, entry.parked_until = True, None
            entry.partition = active_shard(tenant_id, shard, self._state.active_shards, waking(now))
            return True


class MemoryVirtualClock(VirtualClock):
    _state: MemoryState

    def clock(self) -> float:
        with self._state.lock:
            return float(max((self._state.clock.get(shard, 0.0) for shard in range(CLOCK_SHARDS)), default=0.0))

    def advance_clock(self, shard: int, value: float) -> bool:
        with self._state.lock:
            if shard in self._state.clock and self._state.clock[shard] >= value:
                return False
            self._state.clock[shard] = value
            return True

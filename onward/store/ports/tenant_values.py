"""A tenant as the store keeps it: its settings (Tenant), its queue entries and dispatch counters as one read
found them (QueueEntry, TenantState) (pure values)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from onward.domain.dispatch import TenantLoad, TenantPolicy, Usage, VirtualBase, running_shards, shard_caps
from onward.store.ports.ready_queues import ReadyQueue


@dataclass(frozen=True)
class Tenant:
    """A tenant's settings. `base`: where its virtual time stood at its last weight change (the store's to
    keep: onward.store.tenants.TenantRegistry.register keeps it, or rebases it when the weight changes)."""

    tenant_id: str
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    ready_shards: int = 1
    base: VirtualBase = field(default_factory=VirtualBase)

    @property
    def running_shards(self) -> int:
        """How many RUNNING counters its attempts are charged to (dispatch.running_shards)."""
        return running_shards(self.ready_shards)

    def shard_caps(self) -> tuple[int | None, ...]:
        """Its cap split over its RUNNING counters (dispatch.shard_caps)."""
        return shard_caps(self.policy.cap, self.running_shards)


@dataclass(frozen=True)
class QueueEntry:
    """A tenant's queue entry of one ready shard: its waiting jobs (queued or retry_wait) by priority band,
    and its key in the `active` index (None when it is not in the index). `returned_at`: the system clock
    (as the writer knew it) when jobs entered it while it was out of the index (new, emptied or parked);
    None once a claim served it since (its tenant stayed backlogged); infinite when not recorded (woken from
    a park). While none of its tenant's entries with jobs is None, the tenant is returning: lifted to the
    clock if below it (onward.domain.dispatch.candidate)."""

    tenant_id: str
    shard: int
    bands: dict[int, int] = field(default_factory=dict)
    active_vt: float | None = None
    entered: int = 0  # jobs that ever entered it: a park is conditional on none entering since the read
    returned_at: float | None = math.inf

    @property
    def waiting(self) -> int:
        return sum(count for count in self.bands.values() if count > 0)

    def bands_with_work(self) -> list[int]:
        """Its priority bands holding waiting jobs, highest first."""
        return sorted((band for band, count in self.bands.items() if count > 0), reverse=True)


@dataclass(frozen=True)
class TenantState:
    """A tenant's settings and dispatch counters, as one read found them: its usage (the sum of its running
    shards'), each running shard's, and its queue entries by ready shard. `old_running`: of each shard's
    running attempts, those its older RUNNING item counts (claimed before the counters moved onto the queue
    entries: what the claim's condition on the queue entry leaves out of the cap)."""

    tenant: Tenant
    usage: Usage = field(default_factory=Usage)
    queues: dict[int, QueueEntry] = field(default_factory=dict)
    running_by_shard: tuple[Usage, ...] = ()
    old_running: tuple[int, ...] = ()

    def entry_caps(self) -> tuple[int | None, ...]:
        """Each running shard's cap as the counter on its queue entry is held to: the shard's share of the
        tenant's cap less the attempts its older RUNNING item counts (None: no cap)."""
        old = [*self.old_running, *[0] * (self.tenant.running_shards - len(self.old_running))]
        return tuple(None if cap is None else cap - old[shard] for shard, cap in enumerate(self.tenant.shard_caps()))

    @property
    def waiting_by_queue(self) -> dict[ReadyQueue, int]:
        return {ReadyQueue(shard, band): count for shard, entry in self.queues.items()
                for band, count in entry.bands.items() if count}

    def load(self) -> TenantLoad:
        """Its load for dispatch: returning while no queue entry read that holds jobs was served since jobs
        entered it (one that was says it stayed backlogged)."""
        with_work = [entry for entry in self.queues.values() if entry.waiting > 0]
        waiting = sum(entry.waiting for entry in with_work)
        returning = all(entry.returned_at is not None for entry in with_work)
        return TenantLoad(self.tenant.tenant_id, self.tenant.policy, self.usage, waiting, self.tenant.base,
                          returning)

    def queues_with_work(self) -> list[ReadyQueue]:
        """The ready queues holding waiting jobs, highest priority first."""
        return sorted((queue for queue, count in self.waiting_by_queue.items() if count > 0),
                      key=lambda queue: (-queue.priority, queue.shard))

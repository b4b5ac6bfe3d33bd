"""A tenant as the store keeps it: its settings (Tenant), its queue entries and dispatch counters as one read
found them (QueueEntry, TenantState) (pure values)."""

from __future__ import annotations

from dataclasses import dataclass, field

from onward.domain.dispatch import TenantLoad, TenantPolicy, Usage, running_shards, shard_caps
from onward.store.ports.ready_queues import ReadyQueue


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    ready_shards: int = 1

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
    and its key in the `active` index (None when it is not in the index)."""

    tenant_id: str
    shard: int
    bands: dict[int, int] = field(default_factory=dict)
    active_vt: float | None = None
    entered: int = 0  # jobs that ever entered it: a park is conditional on none entering since the read

    @property
    def waiting(self) -> int:
        return sum(count for count in self.bands.values() if count > 0)

    def bands_with_work(self) -> list[int]:
        """Its priority bands holding waiting jobs, highest first."""
        return sorted((band for band, count in self.bands.items() if count > 0), reverse=True)


@dataclass(frozen=True)
class TenantState:
    """A tenant's settings and dispatch counters, as one read found them: its usage (the sum of its running
    shards'), each running shard's, and its queue entries by ready shard."""

    tenant: Tenant
    usage: Usage = field(default_factory=Usage)
    queues: dict[int, QueueEntry] = field(default_factory=dict)
    running_by_shard: tuple[Usage, ...] = ()

    @property
    def waiting_by_queue(self) -> dict[ReadyQueue, int]:
        return {ReadyQueue(shard, band): count for shard, entry in self.queues.items()
                for band, count in entry.bands.items() if count}

    def load(self) -> TenantLoad:
        waiting = sum(entry.waiting for entry in self.queues.values())
        return TenantLoad(self.tenant.tenant_id, self.tenant.policy, self.usage, waiting)

    def queues_with_work(self) -> list[ReadyQueue]:
        """The ready queues holding waiting jobs, highest priority first."""
        return sorted((queue for queue, count in self.waiting_by_queue.items() if count > 0),
                      key=lambda queue: (-queue.priority, queue.shard))

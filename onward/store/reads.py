"""What operator reads and maintenance passes read of the job store beside JobStore's own reads: tenants'
settings and dispatch counters, a ready queue's due jobs, the head of the claim order, a job's run records.
Read-only, each read the recorder's own (the same requests); the bootstrap builds one per deployment."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from onward.domain.clock import EpochMs
from onward.domain.models import Run
from onward.store.ports import ActiveHead, DueJob, Tenant, TenantState
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.service import JobStore


class StoreReads:
    """Reads of one job store's recorder and tenant registry, for the code outside the store that decides from
    them (onward.operator.explain, onward.operator.due_age, onward.operator.overlaps, `onward tenant set`)."""

    def __init__(self, store: JobStore) -> None:
        self._recorder = store.recorder
        self._registry = store.registry

    def tenants(self, tenant_ids: Collection[str]) -> dict[str, Tenant]:
        """The registered ones among `tenant_ids`, read now (not from the registry's cache)."""
        return self._recorder.tenants(tenant_ids)

    def cached_tenants(self, tenant_ids: list[str]) -> dict[str, Tenant]:
        """The registered ones among `tenant_ids`, from the registry's cache where it is fresh, as claims read
        them."""
        return self._registry.settings(tenant_ids)

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None]) -> dict[str, TenantState]:
        """Each tenant's dispatch counters, of the ready shards given (None: all of them), as a claim reads them."""
        return self._recorder.tenant_counters(wanted)

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        """Up to `limit` of the tenant's jobs in `queue` due by `now`, in due order."""
        return self._recorder.due(tenant_id, queue, now, limit)

    def active_head(self, limit_per_shard: int) -> ActiveHead:
        """The queue entries at the head of the claim order, up to `limit_per_shard` of each partition."""
        return self._recorder.active_head(limit_per_shard)

    def runs(self, job_id: str) -> list[Run]:
        """The job's run records in attempt order, read consistently, whether or not its row is still kept."""
        return self._recorder.runs(job_id)

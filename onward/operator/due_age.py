"""How long the jobs next in line have waited: the age of the oldest job due now among the queue entries at the
head of the `active` index, the entries every claim reads first (onward.store.claims). The reaper publishes it once a
minute as the metric OldestDueAgeSeconds, and an alarm watches it.

The `active` index is sorted by tenants' virtual time, not by the age of their jobs, so the truly oldest due
job of the whole system cannot be read cheaply: a tenant that used its share waits, by design, behind the
others, and its jobs may be older than any at the head. What this reads is the head's oldest due job:

- a LOWER bound of the oldest due job's age over all tenants (a tenant beyond the head may hold older ones);
- exactly the wait of the jobs claims serve next: when no worker claims, or workers fall behind, it grows by a
  second per second; while they keep up it stays near zero, whatever an overloaded tenant's own backlog.

Cost per reading: one Query per partition of the index (HEAD_PER_SHARD entries each), one batch read of the head
tenants' counters, and one Query of a single item per ready queue (shard and band) holding waiting jobs.
"""

from __future__ import annotations

from collections.abc import Collection

from onward.domain.clock import EpochMs
from onward.store.claims import HEAD_PER_SHARD
from onward.store.ports import Tenant
from onward.store.reads import StoreReads


def oldest_due_at(reads: StoreReads, now: EpochMs) -> EpochMs | None:
    """When the oldest job due by `now` in the queue entries at the head of the `active` index fell due; None
    when none of them holds a due job (nothing waits, or all of it is in backoff)."""
    shards_by_tenant: dict[str, set[int]] = {}
    for entry in reads.active_head(HEAD_PER_SHARD):
        shards_by_tenant.setdefault(entry.tenant_id, set()).add(entry.shard)
    if not shards_by_tenant:
        return None
    settings = reads.cached_tenants(list(shards_by_tenant))
    wanted: dict[Tenant, Collection[int] | None] = {
        settings[tenant_id]: shards for tenant_id, shards in shards_by_tenant.items() if tenant_id in settings}
    oldest: EpochMs | None = None
    for tenant_id, state in reads.tenant_counters(wanted).items():
        for queue in state.queues_with_work():
            if queue.shard not in shards_by_tenant[tenant_id]:
                continue
            for job in reads.due(tenant_id, queue, now, 1):
                oldest = job.due_at if oldest is None else min(oldest, job.due_at)
    return oldest


def oldest_due_age_s(reads: StoreReads, now: EpochMs) -> float:
    """Seconds the oldest due job at the head of the claim order has been due (0.0 when none is due)."""
    due_at = oldest_due_at(reads, now)
    return 0.0 if due_at is None else max(0.0, (now - due_at) / 1000)

"""A tenant's items read back as values (onward.store.ports.tenant_values): its settings item, its RUNNING
counters and its queue entries (plain values, in the shapes of onward.store.dynamo.keys)."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Any

from onward.domain.dispatch import TenantPolicy, Usage, VirtualBase
from onward.store.dynamo.keys import SERVED_SINCE_RETURN, Entity
from onward.store.ports.tenant_values import QueueEntry, Tenant, TenantState


def usage_from_values(values: dict[str, Any]) -> Usage:
    """A RUNNING counter's usage (plain values). (A lift kept in worker ms as `offset_ms` by older code is
    left out: the tenant, below the clock again, is lifted anew when next considered.)"""
    return Usage(values.get("running", 0), values.get("ended_ms", 0), values.get("started_ms_sum", 0),
                 values.get("lift_vt", 0), values.get("ended", 0))


def queue_entry_from_values(values: dict[str, Any]) -> QueueEntry:
    """A queue entry (plain values)."""
    bands = {int(name[1:]): count for name, count in values.items()
             if name[:1] == "w" and name[1:].isdigit()}
    return QueueEntry(values["tenant_id"], values["shard"], bands,
                      values.get("active_vt") if "active_pk" in values else None, values.get("entered", 0),
                      _returned_at(values.get("returned_vt")))


def _returned_at(stored: float | None) -> float | None:
    """A queue entry's `returned_vt` as QueueEntry.returned_at: SERVED_SINCE_RETURN is None, none is unknown."""
    if stored is None:
        return math.inf
    return None if stored == SERVED_SINCE_RETURN else float(stored)


def tenant_state(tenant: Tenant, counters: Iterable[dict[str, Any]],
                 queue_shards: Collection[int] | None = None) -> TenantState:
    """A tenant's state from its counter items (plain values: RUNNING counters and queue entries, any
    order, any subset): a running shard's usage is the sum of its queue entry's counters and its older
    RUNNING item's. `queue_shards`: the queue entries it holds (None: every one read; the others are read
    for their counters only)."""
    running = [Usage()] * tenant.running_shards
    old = [0] * tenant.running_shards
    queues: dict[int, QueueEntry] = {}
    for values in counters:
        entity = values.get("entity")
        if entity not in (Entity.TENANT_RUNNING, Entity.TENANT_QUEUE):
            continue
        shard = values["shard"]
        if shard >= len(running):  # charged before its shards were reduced: counted until it ends
            running.extend([Usage()] * (shard + 1 - len(running)))
            old.extend([0] * (shard + 1 - len(old)))
        usage = usage_from_values(values)
        running[shard] = Usage.combined((running[shard], usage))
        if entity == Entity.TENANT_RUNNING:
            old[shard] += usage.running
        elif queue_shards is None or shard in queue_shards:
            queues[shard] = queue_entry_from_values(values)
    return TenantState(tenant, Usage.combined(running), queues, tuple(running), tuple(old))


def tenant_from_values(values: dict[str, Any]) -> Tenant:
    """A registry item's tenant (plain values)."""
    policy = TenantPolicy(weight=values["weight"], cap=values.get("cap"))
    base = VirtualBase(values.get("base_vt", 0.0), values.get("base_ms", 0))
    return Tenant(values.get("tenant_id") or values["sk"], policy, values["ready_shards"], base)

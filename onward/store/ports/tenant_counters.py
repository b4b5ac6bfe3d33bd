"""The tenant counters role of the recorder: tenants' settings, their RUNNING counters and queue entries, and
the head of the `active` index that claims read, with the conditional updates that keep it (lift, rekey,
deactivate)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping

from onward.store.ports.rows import ActiveHead
from onward.store.ports.tenant_values import Tenant, TenantState


class TenantCounters(ABC):
    """Tenants' settings and dispatch counters, and the `active` index of their queue entries. Thread-safe."""

    @abstractmethod
    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        """Registered tenants' settings: those of `tenant_ids` that are registered, or every one (None)."""

    @abstractmethod
    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        """Each wanted tenant's counters, read together (one batch): all its RUNNING counters (each kept on the
        queue entry of its shard, plus the older RUNNING items: issue 34) and the queue entries of the ready
        shards named (None: all its ready shards); each item as last written when `consistent`, else possibly
        a moment behind."""

    def tenant_states(self) -> dict[str, TenantState]:
        """Every registered tenant's settings and counters (an operator's read: it grows with the tenants)."""
        return self.tenant_counters(dict.fromkeys(self.tenants().values()))

    @abstractmethod
    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        """Write a tenant's settings (`only_if_new`: unless it is registered). False when it was not
        written."""

    @abstractmethod
    def lift(self, tenant_id: str, lift_vt: int) -> bool:
        """Raise the tenant's lift (virtual ms, on its older RUNNING counter 0) to `lift_vt`, never lowering
        it: False when it was already there or higher. A resume's (onward.store.pauses); a claim serving a
        returning tenant raises its lift in its own transaction instead (Admission.lift_vt)."""

    @abstractmethod
    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        """Raise the key of a queue entry in the `active` index to `active_vt` (a lower bound of its
        tenant's virtual time), only while it is in the index and below that: False otherwise."""

    @abstractmethod
    def deactivate(self, tenant_id: str, shard: int) -> bool:
        """Take a queue entry out of the `active` index, only if it holds no waiting job: False otherwise
        (any job entering it puts it back)."""

    @abstractmethod
    def active_head(self, limit_per_shard: int) -> ActiveHead:
        """The head of the `active` index: up to `limit_per_shard` entries of each of its ACTIVE_SHARDS
        partitions, lowest key first, merged in key order (may lag behind the entries), with the least key
        the entries left unread can have (ActiveHead.unread_from)."""

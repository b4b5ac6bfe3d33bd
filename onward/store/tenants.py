"""The tenant registry and the system virtual clock, as one process sees them.

Settings (weight, cap, ready shards, and the virtual base that a weight change moves:
onward.domain.dispatch.VirtualBase) live in the registry partition `TENANTS`, one item per tenant, written only
when an operator sets a tenant or a tenant's first job registers it with the defaults, and read by claims
through a per-process cache (TENANT_CACHE_MS), so a claim reads only the settings of the tenants at the head of
the active index, and at most once per cache period each.

The system virtual clock (onward.domain.dispatch) is kept in CLOCK_SHARDS items. A process reads it at most once
per CLOCK_REFRESH_MS, raises its own copy with every claim it makes, and writes its copy to one of the
items at most once per CLOCK_PUBLISH_MS: the clock costs no request per claim, and no item takes more than
a few writes per second per process. A process's copy can be behind the others' by about a second of
claims: a tenant returning then is lifted to a clock a moment old, which the next claims correct.
"""

from __future__ import annotations

import random
import threading
from dataclasses import replace

from pydantic import TypeAdapter, ValidationError

from onward.domain.clock import Clock, EpochMs
from onward.domain.dispatch import VirtualBase, VirtualMs
from onward.domain.errors import InvalidRequest
from onward.domain.models import TenantId
from onward.store.ports.index_shards import CLOCK_SHARDS
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import Tenant, TenantState
from onward.store.ports.virtual_clock import VirtualClock

TENANT_CACHE_MS = 2_000
CLOCK_REFRESH_MS = 1_000
CLOCK_PUBLISH_MS = 1_000
MAX_READY_SHARDS = 64

_tenant_id = TypeAdapter(TenantId)


def check_tenant_id(tenant_id: str) -> None:
    """InvalidRequest unless `tenant_id` is a valid tenant id."""
    try:
        _tenant_id.validate_python(tenant_id)
    except ValidationError as error:
        raise InvalidRequest(f"invalid tenant id {tenant_id!r}") from error


def check_tenant(tenant: Tenant) -> None:
    """InvalidRequest unless every setting of `tenant` is valid (the policy validated its own)."""
    check_tenant_id(tenant.tenant_id)
    shards = tenant.ready_shards
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_READY_SHARDS:
        raise InvalidRequest(f"ready shards must be a whole number from 1 to {MAX_READY_SHARDS}, not {shards!r}")


class TenantRegistry:
    """Tenants' settings (cached) and the system virtual clock for one process. Thread-safe."""

    def __init__(self, counters: TenantCounters, virtual_clock: VirtualClock, clock: Clock,
                 rng: random.Random | None = None) -> None:
        self._counters = counters
        self._virtual_clock = virtual_clock
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._settings: dict[str, tuple[Tenant, EpochMs]] = {}
        self._virtual = 0.0
        self._virtual_read_at: EpochMs | None = None
        self._published = 0.0
        self._published_at: EpochMs | None = None

    # --- settings -----------------------------------------------------------------------------------------

    def register(self, tenant: Tenant) -> None:
        """Add or update a tenant's settings (InvalidRequest when one is not valid, or when its ready shards
        would be lowered: jobs are queued, and attempts charged, under the current ones). Its virtual base
        is the store's, whatever `tenant` holds: kept, or rebased when the weight changes (`_base`)."""
        check_tenant(tenant)
        current = self._counters.tenants([tenant.tenant_id]).get(tenant.tenant_id)
        if current is not None and tenant.ready_shards < current.ready_shards:
            raise InvalidRequest(f"ready shards can be raised, not lowered (tenant {tenant.tenant_id} has "
                                 f"{current.ready_shards}: jobs are queued and attempts counted under each)")
        tenant = replace(tenant, base=VirtualBase() if current is None else self._base(current, tenant.policy.weight))
        self._counters.put_tenant(tenant)
        self._remember(tenant)

    def _base(self, current: Tenant, weight: float) -> VirtualBase:
        """The virtual base of `current` under `weight`: its own while the weight stays; when it changes, its
        virtual time now (the work so far charged at the weights it ran under) at its worker time now, read
        consistently, from which the new weight charges (dispatch.VirtualBase.rebased).

        What a race can cost, bounded and not kept: a process holding the old settings (TENANT_CACHE_MS at
        most) orders the tenant by the old weight's rate for the work done since, and claims or ends between
        this read and the write are charged at the new weight; either way a misplacement of at most
        |1/old - 1/new| times the tenant's worker time in that moment, never its history. Its lifts are in
        virtual time, which no base or weight rescales: one computed under the old settings is still the
        distance to the clock."""
        if weight == current.policy.weight:
            return current.base
        usage = self._counters.tenant_counters({current: ()}, consistent=True)[current.tenant_id].usage
        return current.base.rebased(usage.worker_ms(self._clock()), current.policy.weight)

    def _remember(self, tenant: Tenant) -> None:
        with self._lock:
            self._settings[tenant.tenant_id] = (tenant, self._clock())

    def tenant(self, tenant_id: str) -> Tenant:
        """The tenant's settings, registering it with the defaults the first time it is seen."""
        known = self.settings([tenant_id]).get(tenant_id)
        if known is not None:
            return known
        tenant = Tenant(tenant_id)
        if not self._counters.put_tenant(tenant, only_if_new=True):
            tenant = self._counters.tenants([tenant_id])[tenant_id]  # registered meanwhile
        self._remember(tenant)
        return tenant

    def settings(self, tenant_ids: list[str]) -> dict[str, Tenant]:
        """The registered ones among `tenant_ids`, from the cache where it is fresh, else read at once."""
        now = self._clock()
        found: dict[str, Tenant] = {}
        missing = []
        with self._lock:
            for tenant_id in tenant_ids:
                cached = self._settings.get(tenant_id)
                if cached is not None and now - cached[1] <= TENANT_CACHE_MS:
                    found[tenant_id] = cached[0]
                else:
                    missing.append(tenant_id)
        if missing:
            read = self._counters.tenants(missing)
            with self._lock:
                for tenant in read.values():
                    self._settings[tenant.tenant_id] = (tenant, now)
            found |= read
        return found

    def registered(self) -> list[Tenant]:
        """Every registered tenant, read now (an operator's read)."""
        tenants = self._counters.tenants()
        for tenant in tenants.values():
            self._remember(tenant)
        return sorted(tenants.values(), key=lambda tenant: tenant.tenant_id)

    def states(self) -> dict[str, TenantState]:
        """Every registered tenant's settings and counters (an operator's read: it grows with the tenants)."""
        return self._counters.tenant_states()

    # --- the system virtual clock -------------------------------------------------------------------------

    def virtual_clock(self) -> VirtualMs:
        """The system virtual clock as this process knows it (read at most once per CLOCK_REFRESH_MS): what
        claims order by, and the clock a queue entry returns at (its `returned_vt`, the lift of a tenant
        that returns), so a process that creates jobs reads it too, whether or not it claims."""
        now = self._clock()
        with self._lock:
            due = self._virtual_read_at is None or now - self._virtual_read_at >= CLOCK_REFRESH_MS
            if due:
                self._virtual_read_at = now
        if due:
            read = self._virtual_clock.clock()
            with self._lock:
                self._virtual = max(self._virtual, read)
                self._published = max(self._published, read)
        with self._lock:
            return self._virtual

    def served(self, virtual_time: VirtualMs) -> None:
        """A claim served a tenant at `virtual_time`: the clock moves up to it (published within
        CLOCK_PUBLISH_MS)."""
        now = self._clock()
        with self._lock:
            self._virtual = max(self._virtual, virtual_time)
            publish = self._virtual > self._published and (
                self._published_at is None or now - self._published_at >= CLOCK_PUBLISH_MS)
            if publish:
                self._published, self._published_at, value = self._virtual, now, self._virtual
        if publish:
            self._virtual_clock.advance_clock(self._rng.randrange(CLOCK_SHARDS), value)

"""The system clock a claim lifts returning tenants to, when a tenant it examined runs ahead of the others.

A claim raises the clock to the least virtual time of the backlogged tenants it examined that have jobs
running (`dispatch.virtual_floor`). That is a floor of the whole pool only up to the least key the claim has
not examined: one tenant of the window whose attempt has run 2 s would otherwise raise the clock 2 s past
every tenant waiting at the head, lift every returning tenant examined to it (past what each is owed),
and leave the claim trusting none of them (the tenants not examined may come first), so it examined the whole
head: 2,070 read units for one claim over 1,000 backlogged tenants on DynamoDB, one of them running an
attempt for a second or more (`bench.scale`'s `claim_read_units_backlogged` when its claims come that far
apart), 54.5 with the bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from onward.domain.models import NewJob
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import Tenant
from onward.store.ports.tenant_values import TenantState
from onward.store.service import JobStore
from tests.support import ManualClock

TENANTS = 100


class CounterReadsRecorder(MemoryRecorder):
    """The memory recorder, counting the tenants whose counters a claim reads."""

    def __init__(self) -> None:
        super().__init__()
        self.tenants_read: Counter[str] = Counter()

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        self.tenants_read.update(tenant.tenant_id for tenant in wanted)
        return super().tenant_counters(wanted, consistent=consistent)


def test_a_tenant_running_ahead_does_not_lift_the_others_past_the_head() -> None:
    """100 tenants with 2 jobs each; a claim serves one, whose attempt then runs 2 s (past LIFT_TOLERANCE_MS).
    A claim by a new process (cold caches) serves another tenant after examining one window of the head, not
    all of it, and lifts no returning tenant past the head (the clock stays below the running tenant's)."""
    clock = ManualClock()
    recorder = CounterReadsRecorder()
    store = JobStore.in_memory(clock=clock, recorder=recorder)
    for n in range(TENANTS):
        store.register_tenant(Tenant(f"t{n:03d}"))
        for _ in range(2):
            store.create(f"t{n:03d}", NewJob(type="demo.echo", params={}))
    first = store.claim("w1", 300)
    assert first is not None
    clock.advance(2.0)  # (its attempt runs on: its tenant's virtual time 2 s ahead of every other's)
    recorder.tenants_read.clear()
    cold = JobStore.in_memory(clock=clock, recorder=recorder)
    second = cold.claim("w2", 300)
    assert second is not None and second.job.tenant_id != first.job.tenant_id
    assert sum(recorder.tenants_read.values()) <= 16, recorder.tenants_read
    assert cold.registry.virtual_clock() < 2_000.0

"""The tenant settings' virtual base on every recorder (through the `store_backend` fixture): a weight change
stores the tenant's virtual time at that moment with its worker time then (onward.domain.dispatch.VirtualBase),
read back the same by every process; a change that leaves the weight keeps it; a lift is kept in virtual ms,
whole through a weight change that races it."""

from __future__ import annotations

from typing import Any

from onward.domain.dispatch import TenantPolicy, VirtualBase
from onward.domain.models import NewJob
from onward.store.ports import Tenant
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={})


def thirty_seconds_of_two_attempts(store: JobStore, clock) -> None:
    """Two attempts of `acme` claimed together, 30 s later one ends: 60 worker-s, one still running."""
    store.create("acme", ECHO)
    store.create("acme", ECHO)
    leases = [store.claim("w1", 300), store.claim("w2", 300)]
    clock.advance(30)
    store.complete(leases[0])


def test_a_weight_change_stores_the_virtual_time_reached_and_charges_at_the_new_weight_from_there(
        backend: StoreBackend, store: JobStore, clock):
    store.register_tenant(Tenant("acme", TenantPolicy(weight=2.0)))
    thirty_seconds_of_two_attempts(store, clock)
    assert store.tenant_states()["acme"].load().virtual_time(clock.now) == 30_000
    store.register_tenant(Tenant("acme", TenantPolicy(weight=0.5)))
    assert backend.recorder.tenants(["acme"])["acme"].base == VirtualBase(30_000, 60_000)
    other = backend.store()  # another process reads the same base
    assert other.tenant_states()["acme"].load().virtual_time(clock.now) == 30_000
    clock.advance(10)  # one attempt running: 10 worker-s at weight 0.5
    assert other.tenant_states()["acme"].load().virtual_time(clock.now) == 50_000


def test_a_change_that_keeps_the_weight_keeps_the_base_and_a_new_tenant_starts_at_zero(
        backend: StoreBackend, store: JobStore, clock):
    store.register_tenant(Tenant("acme", TenantPolicy(weight=3.0)))
    assert backend.recorder.tenants(["acme"])["acme"].base == VirtualBase()
    thirty_seconds_of_two_attempts(store, clock)
    store.register_tenant(Tenant("acme", TenantPolicy(weight=1.5)))
    base = VirtualBase(20_000, 60_000)
    assert backend.recorder.tenants(["acme"])["acme"].base == base
    # A cap and more ready shards, same weight; the base a caller passes is not the store's: ignored.
    store.register_tenant(Tenant("acme", TenantPolicy(weight=1.5, cap=4), ready_shards=2, base=VirtualBase(1.0, 7)))
    assert backend.recorder.tenants(["acme"])["acme"] == Tenant("acme", TenantPolicy(weight=1.5, cap=4), 2, base)
    assert store.tenants()[0].base == base
    store.register_tenant(Tenant("globex", TenantPolicy(weight=2.0), base=VirtualBase(5.0, 5)))
    assert backend.recorder.tenants(["globex"])["globex"].base == VirtualBase()


def test_a_lift_is_virtual_time_that_a_weight_change_leaves_alone(backend: StoreBackend, store: JobStore, clock):
    store.register_tenant(Tenant("acme", TenantPolicy(weight=2.0)))
    thirty_seconds_of_two_attempts(store, clock)
    assert backend.recorder.lift("acme", 100_000)
    assert store.tenant_states()["acme"].load().virtual_time(clock.now) == 130_000
    store.register_tenant(Tenant("acme", TenantPolicy(weight=4.0)))
    state = store.tenant_states()["acme"]
    assert state.usage.lift_vt == 100_000 and state.tenant.base == VirtualBase(30_000, 60_000)
    assert state.load().virtual_time(clock.now) == 130_000


class LiftDuringRebase:
    """A recorder on which a concurrent claim lifts `acme` (to `lift_vt`) just after a weight change read
    its counters, before the change writes its settings."""

    def __init__(self, recorder: Any, lift_vt: int) -> None:
        self._recorder, self._lift_vt = recorder, lift_vt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)

    def tenant_counters(self, wanted: Any, *, consistent: bool = False) -> dict[str, Any]:
        read = self._recorder.tenant_counters(wanted, consistent=consistent)
        if consistent:
            assert self._recorder.lift("acme", self._lift_vt)
        return read


def test_a_lift_between_a_weight_changes_read_and_its_write_is_kept_whole(
        backend: StoreBackend, store: JobStore, clock):
    """The rebase reads the counters, a claim lifts the tenant, the rebase writes the new weight with a base
    from counters without the lift: the lift (virtual ms) counts in full, neither lost nor rescaled. A lift
    in worker ms, missing from the base's worker time, would be divided by the new weight (4x here)."""
    store.register_tenant(Tenant("acme", TenantPolicy(weight=4.0)))
    thirty_seconds_of_two_attempts(store, clock)  # 60 worker-s at weight 4: 15 s
    racing = backend.store(recorder=LiftDuringRebase(backend.recorder, 100_000))
    racing.register_tenant(Tenant("acme", TenantPolicy(weight=1.0)))
    state = store.tenant_states()["acme"]
    assert state.tenant.base == VirtualBase(15_000, 60_000)
    assert state.load().virtual_time(clock.now) == 115_000

"""onward.store.dynamo.counter_items: a tenant's items read back as values (pure)."""

from __future__ import annotations

from onward.domain.dispatch import TenantPolicy, Usage, VirtualBase
from onward.store.dynamo.counter_items import tenant_from_values, usage_from_values
from onward.store.dynamo.keys import tenant_items
from onward.store.ports import Tenant


def test_a_tenant_reads_back_with_its_virtual_base_and_without_one_from_zero():
    """The settings item carries the virtual base (base_vt, base_ms): without reading it back, every claim
    would see the tenant's lifetime work divided by its current weight again (the debt a weight change
    made). An item written before there was a base reads as (0, 0): all its work at its current weight."""
    tenant = Tenant("acme", TenantPolicy(weight=0.5, cap=2), 3, VirtualBase(12.5, 40_000))
    settings, entry = tenant_items("acme", 0.5, 2, 3, tenant.base)
    assert tenant_from_values(settings) == tenant == tenant_from_values(entry)
    older = {name: value for name, value in settings.items() if name not in ("base_vt", "base_ms")}
    assert tenant_from_values(older).base == VirtualBase()


def test_a_lift_kept_in_worker_ms_by_older_code_is_left_out():
    """Lifts are virtual ms (`lift_vt`). An `offset_ms` (worker ms) read as virtual ms would misplace the
    tenant by offset * (1 - 1 / weight); left out, the tenant is below the clock again and lifted anew."""
    values = {"running": 1, "ended_ms": 5, "started_ms_sum": 7, "offset_ms": 9_000}
    assert usage_from_values(values) == Usage(1, 5, 7, 0)
    assert usage_from_values({**values, "lift_vt": 300}) == Usage(1, 5, 7, 300)

"""A weight change is not debt: a tenant's virtual time charges each slice of work at the weight in force
when it ran (onward.domain.dispatch.VirtualBase, rebased by onward.store.tenants.TenantRegistry.register), on
the real store (each backend) with a pool of workers simulated on a manual clock. With virtual time as
lifetime worker time over the current weight, lowering a weight from 2 to 1 after two hours starved the
tenant for 40 minutes, and a 10 s boost and back cost it more starvation than the boost gave."""

from __future__ import annotations

import pytest

from onward.domain.dispatch import LIFT_TOLERANCE_MS, TenantPolicy
from onward.store.ports import Tenant
from onward.store.service import JobStore
from tests.integration.store.test_fairness_holes import HOUR_S, Pool, enqueue, share


@pytest.fixture
def store(store_backend) -> JobStore:
    return store_backend.store()


def set_weight(store: JobStore, tenant_id: str, weight: float) -> None:
    store.register_tenant(Tenant(tenant_id, TenantPolicy(weight=weight)))


def off_fair(claims, fair: dict[str, float]) -> dict[str, float]:
    """Each tenant's share of the claims relative to its fair share, minus one (0: exactly fair)."""
    return {tenant_id: share(claims, tenant_id) / fair_share - 1 for tenant_id, fair_share in fair.items()}


def test_lowering_a_weight_after_two_hours_costs_no_starvation(store, clock):
    """`a` at weight 2 and `b` at weight 1, both backlogged, for two hours; then a's weight goes to 1. Its
    two hours of work stay charged at weight 2: over the next hour it gets half the pool. Divided all at
    once by the new weight, its past work counted twice and a got 17% of that hour (40 of 240 claims)."""
    set_weight(store, "a", 2)
    pool = Pool(store, clock, workers=4)
    enqueue(store, "a", 4 * 3 * 60 + 8)
    enqueue(store, "b", 4 * 3 * 60 + 8)
    before = pool.run(2 * HOUR_S, 60)
    assert abs(share(before, "a") / (2 / 3) - 1) <= 0.05, before
    set_weight(store, "a", 1)
    after = pool.run(HOUR_S, 60)
    assert abs(share(after, "a") / 0.5 - 1) <= 0.05, after


def test_a_ten_second_boost_and_back_costs_no_starvation(store, clock):
    """`a` is boosted to weight 10 for 10 s, then set back to 1, while it and `b` stay backlogged: over the
    next three minutes it gets its half (within 5%). Its boosted work divided by weight 1 afterwards (or the
    lift it got while at weight 10, in worker ms, divided by 1) made it wait behind b instead."""
    pool = Pool(store, clock, workers=4)
    enqueue(store, "a", 600)
    enqueue(store, "b", 600)
    pool.run(120, 2)
    set_weight(store, "a", 10)
    boosted = pool.run(10, 2)
    assert share(boosted, "a") >= 0.75, boosted
    set_weight(store, "a", 1)
    after = pool.run(180, 2)
    assert abs(share(after, "a") / 0.5 - 1) <= 0.05, after


def test_weights_changed_mid_run_among_several_tenants_keep_every_share(store, clock):
    """Three backlogged tenants at weights 1, 2 and 3 for half an hour, then at 3, 1 and 2: over the next
    half hour each one's share is within 5% of its new fair share (w / 6), as before the change. With
    lifetime work divided by the new weight, `b` (2 -> 1) starved and `a` (1 -> 3) took most of the pool."""
    weights = {"a": 1, "b": 2, "c": 3}
    for tenant_id, weight in weights.items():
        set_weight(store, tenant_id, weight)
        enqueue(store, tenant_id, 12 * 60 + 12)
    pool = Pool(store, clock, workers=12)
    before = pool.run(HOUR_S / 2, 60)
    assert max(abs(error) for error in off_fair(before, {t: w / 6 for t, w in weights.items()}).values()) <= 0.05
    changed = {"a": 3, "b": 1, "c": 2}
    for tenant_id, weight in changed.items():
        set_weight(store, tenant_id, weight)
    after = pool.run(HOUR_S / 2, 60)
    errors = off_fair(after, {t: w / 6 for t, w in changed.items()})
    assert max(abs(error) for error in errors.values()) <= 0.05, (after, errors)


def test_a_lift_computed_under_the_old_weight_does_not_turn_into_debt(store_backend, clock):
    """A second process still holds `back`'s settings as they were before its weight went from 4 to 1 (its
    cache keeps them 2 s) and lifts it to the clock as it returns. A lift in worker ms, computed at weight 4
    and read at weight 1, would put back four times as far past the clock as it was below it; a lift in
    virtual time puts it at the clock whatever the weight it was computed under."""
    first, second = store_backend.store(), store_backend.store()
    set_weight(first, "back", 4)
    enqueue(first, "back", 1)
    lease = first.claim("w0", 60)
    clock.advance(60)
    first.complete(lease)  # 60 s of work at weight 4: 15 s of virtual time
    pool = Pool(first, clock, workers=2)
    enqueue(first, "busy", 2 * 60 + 2)
    pool.run(HOUR_S / 2, 60)  # busy alone: the clock moves on half an hour of virtual time per worker
    assert second.registry.settings(["back"])["back"].policy.weight == 4  # cached by the second process
    set_weight(first, "back", 1)
    enqueue(first, "back", 5)
    lease = second.claim("w9", 60)
    assert lease is not None and lease.job.tenant_id == "back"
    clock_now = second.registry.virtual_clock()
    state = first.tenant_states()["back"]
    assert state.tenant.policy.weight == 1
    # (the order of claims charges the attempt it just started its mean, 60 s at weight 1, at once)
    assert abs(state.load().virtual_time(clock.now) - clock_now) <= 60_000 + LIFT_TOLERANCE_MS

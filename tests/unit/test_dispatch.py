"""onward.dispatch: the fair order of tenants for one free worker (pure, no I/O)."""

from __future__ import annotations

import pytest

from onward.dispatch import (
    DEFAULT_CAP,
    DEFAULT_WEIGHT,
    Candidate,
    DispatchOrder,
    TenantLoad,
    TenantPolicy,
    Usage,
    dispatch_order,
    on_claim,
    on_end,
    virtual_floor,
)

NOW = 1_800_000_000_000
S = 1000  # ms


def load(tenant_id: str, *, ended_s: float = 0, running: int = 0, running_for_s: float = 0, waiting: int = 1,
         weight: float = 1.0, cap: int | None = None) -> TenantLoad:
    """A tenant whose `running` attempts were all claimed `running_for_s` before NOW."""
    usage = Usage(running, int(ended_s * S), running * (NOW - int(running_for_s * S)))
    return TenantLoad(tenant_id, TenantPolicy(weight=weight, cap=cap), usage, waiting)


def order_of(*loads: TenantLoad) -> tuple[list[str], list[str]]:
    order = dispatch_order(loads, NOW)
    return [c.tenant_id for c in order.within_cap], [c.tenant_id for c in order.flex]


# --- virtual time -----------------------------------------------------------------------------------------

def test_the_tenant_with_the_least_worker_time_goes_first():
    """Without ordering by used worker time (the old rotation, or FIFO), `bulk`, which has used 1,000
    worker-seconds, would be served as often as, or before, `small`, which has used 5."""
    assert order_of(load("bulk", ended_s=1000, running=1), load("small", ended_s=5, running=1)) == (
        ["small", "bulk"], [])


def test_running_attempts_count_as_they_run():
    """Usage.worker_ms counts `running * now - started_ms_sum`: without it, `long`, whose 4 jobs have run
    for 10 s each (40 s) but ended none, would look unused and take every free worker ahead of `short`,
    which has used 30 s in attempts that ended."""
    assert order_of(load("long", running=4, running_for_s=10), load("short", ended_s=30, running=1)) == (
        ["short", "long"], [])


def test_weights_divide_worker_time():
    """virtual_time divides by the weight: without it, `heavy` (weight 4, 30 s used: 7.5 s virtual)
    would wait behind `light` (weight 1, 10 s used)."""
    assert order_of(load("light", ended_s=10, running=1), load("heavy", ended_s=30, running=1, weight=4)) == (
        ["heavy", "light"], [])


def test_ties_spread_over_tenants_by_running_jobs_per_weight():
    """The tie-break on running / weight: without it, simultaneous claims at equal virtual time (all at
    zero, at the start) would all go to the same tenant (the first by id) instead of 1:4 by weight."""
    assert order_of(load("a", running=1, running_for_s=0), load("b", running=1, running_for_s=0, weight=4)) == (
        ["b", "a"], [])
    assert order_of(load("a", running=1), load("b", running=2, weight=4)) == (["b", "a"], [])
    assert order_of(load("a", running=1), load("b", running=5, weight=4)) == (["a", "b"], [])


# --- no banked credit -------------------------------------------------------------------------------------

def test_a_returning_tenant_starts_at_the_floor_and_is_lifted_when_served():
    """The floor and lift in dispatch_order (and Usage.lifted): without them, `sleeper`, idle for a long
    time at 5 s used, would be served ahead of `bulk` (1,000 s) for the next ~995 s of worker time: credit
    banked while it had nothing to do. With them it starts level with the least backlogged running tenant."""
    bulk = load("bulk", ended_s=1000, running=10, running_for_s=0)
    other = load("other", ended_s=1200, running=1, running_for_s=0)
    sleeper = load("sleeper", ended_s=5)
    order = dispatch_order([bulk, other, sleeper], NOW)
    first = order.within_cap[0]
    assert first == Candidate("sleeper", 1000 * S, lift_to_ms=1000 * S)  # level with bulk, first on the tie
    assert [c.tenant_id for c in order.within_cap] == ["sleeper", "bulk", "other"]
    lifted = sleeper.usage.lifted(first.lift_to_ms).apply(on_claim(NOW))
    assert lifted.worker_ms(NOW + 2 * S) == 1002 * S  # from now on it pays like everyone else


def test_the_lift_keeps_a_weighted_tenant_level_in_virtual_time():
    """lift_to_ms is the floor times the tenant's weight: without the weight, a weight-4 tenant lifted to
    1,000 worker-seconds would sit at 250 s of virtual time, far below the floor."""
    order = dispatch_order([load("bulk", ended_s=1000, running=2), load("w4", weight=4)], NOW)
    assert order.within_cap[0] == Candidate("w4", 1000 * S, lift_to_ms=4000 * S)


def test_a_returning_tenant_above_the_floor_keeps_its_own_time():
    """The lift only ever raises: without `floor > virtual`, a tenant that used MORE than the others
    would be pulled down to the floor and get credit it never had."""
    order = dispatch_order([load("bulk", ended_s=100, running=3), load("greedy", ended_s=500)], NOW)
    assert order.within_cap == (Candidate("bulk", 100 * S, None), Candidate("greedy", 500 * S, None))


def test_other_returning_tenants_and_idle_ones_do_not_set_the_floor():
    """virtual_floor counts only backlogged tenants with jobs running: if another returning tenant's old,
    low virtual time set the floor, two sleepers waking together would both keep their banked credit;
    if a running tenant with nothing waiting set it, a tenant that is not competing would."""
    loads = [load("bulk", ended_s=1000, running=5), load("a", ended_s=1), load("b", ended_s=2),
             load("done", ended_s=3, running=1, waiting=0)]
    assert virtual_floor(loads, NOW) == 1000 * S
    assert {c.tenant_id: c.lift_to_ms for c in dispatch_order(loads, NOW).within_cap} == {
        "a": 1000 * S, "b": 1000 * S, "bulk": None}


def test_nothing_backlogged_and_running_means_no_floor():
    """With no floor (the pool just woke up), a returning tenant keeps its own time: there is nobody it
    could have banked credit against, and inventing a floor would need state the policy does not have."""
    order = dispatch_order([load("a", ended_s=7), load("b", ended_s=3)], NOW)
    assert order.within_cap == (Candidate("b", 3 * S, None), Candidate("a", 7 * S, None))


# --- caps and flex ----------------------------------------------------------------------------------------

def test_a_tenant_at_its_cap_is_skipped_while_another_has_work():
    """The `at_cap` split: without it, `bulk` (least virtual time, but at its cap of 2) would get the
    worker although `small` has a job waiting and is below its cap."""
    order = dispatch_order([load("bulk", running=2, cap=2), load("small", ended_s=100, running=1)], NOW)
    assert ([c.tenant_id for c in order.within_cap], [c.tenant_id for c in order.flex]) == (["small"], ["bulk"])
    assert order.first() == (order.within_cap[0], False)


def test_caps_flex_when_no_other_tenant_has_work():
    """DispatchOrder.flex: without it a capped tenant alone with work would leave workers idle while its
    jobs are due (not work conserving); `first()` serves it past its cap, saying so."""
    order = dispatch_order([load("bulk", running=2, cap=2), load("idle", waiting=0)], NOW)
    assert order == DispatchOrder((), (Candidate("bulk", 0.0, None),))
    assert order.first() == (Candidate("bulk", 0.0, None), True)


def test_capped_tenants_flex_in_fair_order():
    """Flex candidates are sorted like the others: without it, the first tenant by id would take every
    flexed worker instead of the one that has used least."""
    assert order_of(load("a", ended_s=50, running=2, cap=2), load("b", ended_s=10, running=3, cap=3)) == (
        [], ["b", "a"])


def test_tenants_with_nothing_waiting_are_not_candidates():
    """Filtering on `waiting`: without it the claim would query the ready queues of idle tenants (the
    ones with the least virtual time, so first) on every claim."""
    assert order_of(load("idle", waiting=0), load("busy", ended_s=99, running=1)) == (["busy"], [])
    assert dispatch_order([], NOW).first() is None


# --- settings and usage arithmetic ------------------------------------------------------------------------

def test_defaults_and_validation():
    """Defaults: weight 1 and no cap of its own (fair share alone decides). A zero weight would divide by
    zero in virtual_time; a cap of 0 would make a tenant unservable except by flex."""
    assert TenantPolicy() == TenantPolicy(weight=DEFAULT_WEIGHT, cap=DEFAULT_CAP) == TenantPolicy(1.0, None)
    for bad in ({"weight": 0}, {"weight": -1}, {"cap": 0}):
        (name,) = bad
        with pytest.raises(ValueError, match=f"a tenant's {name} must be"):
            TenantPolicy(**bad)


def test_a_claim_and_its_end_add_up_to_the_run_time():
    """on_claim / on_end are what the store ADDs to the tenant's RUNNING counter: if on_end did not take
    back exactly what on_claim added, running and started_ms_sum would drift with every job."""
    usage = Usage().apply(on_claim(NOW)).apply(on_claim(NOW + 500))
    assert usage.worker_ms(NOW + 1000) == 1000 + 500
    usage = usage.apply(on_end(NOW, NOW + 2000))
    assert usage == Usage(running=1, ended_ms=2000, started_ms_sum=NOW + 500)
    usage = usage.apply(on_end(NOW + 500, NOW + 3000))
    assert usage == Usage(running=0, ended_ms=4500, started_ms_sum=0)
    with pytest.raises(ValueError, match="only a tenant with nothing running is lifted"):
        Usage(running=1).lifted(10)

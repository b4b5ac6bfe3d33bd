"""onward.domain.dispatch: the fair order of tenants for one free worker (pure, no I/O)."""

from __future__ import annotations

import math

import pytest

from onward.domain.dispatch import (
    AGING_MS,
    DEFAULT_CAP,
    DEFAULT_WEIGHT,
    LIFT_TOLERANCE_MS,
    MAX_WEIGHT,
    MIN_WEIGHT,
    Candidate,
    DispatchOrder,
    TenantLoad,
    TenantPolicy,
    Usage,
    VirtualBase,
    advance_clock,
    aged_priority,
    band_order,
    dispatch_order,
    on_claim,
    on_end,
    running_shards,
    shard_caps,
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


# --- the system virtual clock: no banked credit ----------------------------------------------------------

CLOCK = 1000 * S  # virtual ms: the highest virtual time a claim has served


def test_a_tenant_below_the_clock_is_lifted_even_with_jobs_running():
    """The clock lifts any tenant more than LIFT_TOLERANCE_MS below it. Under the old floor (a tenant was
    lifted only with nothing running) `back`, which kept one long job running for 100 s while otherwise
    idle, would start 900 s behind `busy` and take every free worker until it caught up."""
    busy = load("busy", ended_s=990, running=9, running_for_s=10)
    back = load("back", running=1, running_for_s=100)
    order = dispatch_order([busy, back], NOW, CLOCK)
    assert order.within_cap[0] == Candidate("back", CLOCK, lift_offset_ms=900 * S)
    assert order.within_cap[1] == Candidate("busy", 1080 * S, None)


def test_the_lift_makes_its_virtual_time_equal_the_clock():
    """Usage.lifted sets the lift the candidate names, and virtual_time counts it: without the lift in
    virtual_time it would not stick (lifted again at every claim, credit kept). The lift is virtual ms, so
    it lands on the clock at any weight and base. From then on the tenant pays like everyone else."""
    for weight, lift_s, base in ((1.0, 0, VirtualBase()), (4.0, 0, VirtualBase()), (2.0, 30, VirtualBase()),
                                 (0.5, 10, VirtualBase(300 * S, 2 * S))):
        sleeper = load("sleeper", ended_s=5, weight=weight)._replace(base=base)
        sleeper = sleeper._replace(usage=sleeper.usage._replace(lift_vt=lift_s * S))
        (chosen,) = dispatch_order([sleeper], NOW, CLOCK).within_cap
        assert chosen.virtual_time == CLOCK and chosen.lift_offset_ms is not None
        lifted = sleeper._replace(usage=sleeper.usage.lifted(chosen.lift_offset_ms))
        assert lifted.virtual_time(NOW) == CLOCK, weight
        assert dispatch_order([lifted], NOW, CLOCK).within_cap[0].lift_offset_ms is None  # not lifted twice
        running = lifted._replace(usage=lifted.usage.apply(on_claim(NOW)))
        assert running.virtual_time(NOW + 2 * S) == CLOCK + 2 * S / weight


def test_a_lift_never_lowers():
    """Usage.lifted keeps the larger lift (the store's conditional SET): without it, a claim that read
    an older, lower clock and lost the race to write its lift would hand the tenant back the credit."""
    assert Usage(lift_vt=10 * S).lifted(5 * S).lift_vt == 10 * S
    assert Usage(lift_vt=10 * S).lifted(15 * S).lift_vt == 15 * S


# --- a weight change is not debt ----------------------------------------------------------------------------

def test_a_rebase_keeps_the_virtual_time_and_charges_only_later_work_at_the_new_weight():
    """VirtualBase.rebased: at the change the virtual time is what it was (the work so far charged at the
    old weight); after it, each worker ms adds 1 / new weight. With lifetime worker time divided by the
    current weight, 2 hours of work at weight 2 (1 h of virtual time) became 2 h at weight 1: an hour of
    debt to every tenant that had been level with it."""
    hours = 3_600 * S
    before = TenantLoad("a", TenantPolicy(weight=2.0), Usage(ended_ms=2 * hours), waiting=1)
    assert before.virtual_time(NOW) == 1 * hours
    base = before.base.rebased(before.usage.worker_ms(NOW), before.policy.weight)
    after = before._replace(policy=TenantPolicy(weight=1.0), base=base)
    assert after.virtual_time(NOW) == 1 * hours
    later = after._replace(usage=after.usage.apply(on_claim(NOW)))
    assert later.virtual_time(NOW + 60 * S) == 1 * hours + 60 * S
    back = later._replace(policy=TenantPolicy(weight=4.0),
                          base=base.rebased(later.usage.worker_ms(NOW + 60 * S), 1.0))
    assert back.virtual_time(NOW + 100 * S) == 1 * hours + 60 * S + 40 * S / 4


def test_a_boost_and_back_leaves_the_virtual_time_where_the_work_put_it():
    """A 10 s boost to weight 10 with 4 attempts running, then back to 1: the 40 worker-s of the boost are
    charged 4 virtual s, and the virtual time after it is 4 s on from before (and keeps rising at 1).
    Without the rebase, the 40 s and everything before came back at weight 1, the whole history at once."""
    running = Usage().apply(on_claim(NOW))
    for _ in range(3):
        running = running.apply(on_claim(NOW))
    tenant = TenantLoad("a", TenantPolicy(weight=1.0), running._replace(ended_ms=500 * S), waiting=1)
    start = tenant.virtual_time(NOW)
    boosted = tenant._replace(policy=TenantPolicy(weight=10.0),
                              base=tenant.base.rebased(tenant.usage.worker_ms(NOW), 1.0))
    back = boosted._replace(policy=TenantPolicy(weight=1.0),
                            base=boosted.base.rebased(boosted.usage.worker_ms(NOW + 10 * S), 10.0))
    assert back.virtual_time(NOW + 10 * S) == pytest.approx(start + 4 * S)
    assert back.virtual_time(NOW + 11 * S) == pytest.approx(start + 4 * S + 4 * S)


def test_a_lift_computed_under_the_old_weight_lands_on_the_clock_after_the_change():
    """A process that still holds the settings from before a weight change (its cache) computes the lift
    of a returning tenant under them. The lift is virtual ms: it is the distance to the clock under either,
    so it lands on the clock, off only by the work since the change times the change in 1 / weight. In
    worker ms (clock times the old weight), read at weight 1 it put the tenant 3 clocks past the clock."""
    old = load("back", ended_s=40, weight=4.0)
    new = old._replace(policy=TenantPolicy(weight=1.0), base=old.base.rebased(old.usage.worker_ms(NOW), 4.0))
    (stale,) = dispatch_order([old], NOW, CLOCK).within_cap
    assert stale.lift_offset_ms is not None
    lifted = new._replace(usage=new.usage.lifted(stale.lift_offset_ms))
    assert lifted.virtual_time(NOW) == CLOCK


def test_a_tenant_within_the_tolerance_is_not_lifted():
    """LIFT_TOLERANCE_MS: without it a backlogged tenant a hair below the clock (claims racing: the clock
    moved on between reading the counters and claiming) would be lifted on almost every claim, an extra
    write each time for no fairness gained."""
    near = load("near", ended_s=CLOCK / S - LIFT_TOLERANCE_MS / S)
    assert dispatch_order([near], NOW, CLOCK).within_cap == (Candidate("near", CLOCK - LIFT_TOLERANCE_MS, None),)
    below = load("below", ended_s=(CLOCK - LIFT_TOLERANCE_MS - 1) / S)
    assert dispatch_order([below], NOW, CLOCK).within_cap == (
        Candidate("below", CLOCK, lift_offset_ms=LIFT_TOLERANCE_MS + 1),)


def test_a_tenant_above_the_clock_keeps_its_own_time():
    """The lift only ever raises: without `virtual >= clock - tolerance`, a tenant that used MORE than the
    clock would be pulled down to it and get credit it never had."""
    order = dispatch_order([load("bulk", ended_s=1000, running=3), load("greedy", ended_s=1500)], NOW, CLOCK)
    assert order.within_cap == (Candidate("bulk", 1000 * S, None), Candidate("greedy", 1500 * S, None))


def test_the_clock_outlives_an_idle_pool_and_lifts_every_returning_tenant():
    """The clock is kept, not derived from who runs now: under the old floor, with nobody backlogged and
    running (the pool idle, or every job ending at the same instant) there was no floor, and two tenants
    waking together kept their banked credit (5 s and 7 s against a pool that served 1,000 s)."""
    order = dispatch_order([load("a", ended_s=7), load("b", ended_s=5), load("done", ended_s=3, waiting=0)],
                           NOW, CLOCK)
    assert order.within_cap == (Candidate("a", CLOCK, lift_offset_ms=993 * S),
                                Candidate("b", CLOCK, lift_offset_ms=995 * S))


def test_advance_clock_never_goes_back():
    """advance_clock keeps the larger: without it, serving a tenant below the clock (one that flexed
    past its cap, or a claim that read old counters) would move the clock back, and the next returning
    tenant would be lifted only that far, keeping the difference as credit."""
    assert advance_clock(CLOCK, Candidate("low", CLOCK - 500 * S, None)) == CLOCK
    assert advance_clock(CLOCK, Candidate("high", CLOCK + 5 * S, None)) == CLOCK + 5 * S
    assert advance_clock(0.0, Candidate("returning", CLOCK, 900 * S)) == CLOCK


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


# --- caps over running shards ----------------------------------------------------------------------------

def test_shard_caps_split_the_cap_exactly():
    """shard_caps: the shards' caps add up to the tenant's cap and differ by at most one. If they summed
    to less, the tenant could never reach its cap; to more, it would run past it without flexing. Without
    a cap every shard is uncapped (a 0 there would block the shard)."""
    for cap in range(1, 25):
        for shards in range(1, cap + 1):
            caps = shard_caps(cap, shards)
            assert len(caps) == shards and sum(caps) == cap and max(caps) - min(caps) <= 1, (cap, shards)
    assert shard_caps(None, 3) == (None, None, None)


def test_running_shards_follow_the_ready_shards_and_a_small_cap_leaves_shards_empty():
    """running_shards: one RUNNING item per ready shard (ready shards are only raised, so the counters a
    claim reads never drop one that holds attempts). A cap below the shards gives some shards a share of 0;
    the shares still add up to the cap. If running shards followed the cap, lowering a cap would hide the
    attempts charged to the dropped shards and let claims pass the new cap."""
    assert running_shards(4) == 4
    assert running_shards(1) == running_shards(0) == 1
    assert shard_caps(2, running_shards(4)) == (1, 1, 0, 0)
    assert sum(shard_caps(2, running_shards(4))) == 2

def test_a_low_band_job_overtakes_after_aging():
    """band_order ranks by aged priority: a band-0 job due 95 s ago (9.5 bands of aging) goes before a
    band-9 job due now. Without aging (strict priority) band 0 would never run while band-9 jobs keep
    arriving."""
    assert band_order({0: NOW - 95 * S, 9: NOW}, NOW) == [0, 9]
    assert aged_priority(0, NOW - 95 * S, NOW) == 9.5


def test_a_fresh_low_band_job_waits_its_turn():
    """Aging is one band per AGING_MS, not a reset: a band-0 job due 5 s ago is still behind band 9 (if any
    wait put it first, priorities would mean nothing). On a tie the higher band goes first; a job due in
    the future gets no negative aging."""
    assert band_order({0: NOW - 5 * S, 9: NOW}, NOW) == [9, 0]
    assert band_order({0: NOW - 9 * AGING_MS, 9: NOW}, NOW) == [9, 0]
    assert band_order({0: NOW - 9 * AGING_MS - 1, 9: NOW}, NOW) == [0, 9]
    assert aged_priority(3, NOW + 60 * S, NOW) == 3
    assert band_order({}, NOW) == []


# --- settings and usage arithmetic ------------------------------------------------------------------------

def test_defaults_and_validation():
    """Defaults: weight 1 and no cap of its own (fair share alone decides). A weight of 0 would divide by
    zero in virtual_time, a negative one run virtual time backwards, NaN compare false with everything
    (never first, never last) and infinity never be served. A finite weight beyond MIN_WEIGHT..MAX_WEIGHT
    (1e300, 1e-300) passed once and then failed at the write with a decimal.Overflow / Underflow (DynamoDB
    numbers span about 1e-130 to 1e126); the bounds themselves are allowed. A cap of 0 would make a tenant
    unservable except by flex, and `True` would pass as a cap of 1 (bool is an int)."""
    assert TenantPolicy() == TenantPolicy(weight=DEFAULT_WEIGHT, cap=DEFAULT_CAP) == TenantPolicy(1.0, None)
    assert TenantPolicy(weight=2, cap=1).cap == 1
    assert (MIN_WEIGHT, MAX_WEIGHT) == (0.001, 1000)
    assert TenantPolicy(weight=MIN_WEIGHT).weight == MIN_WEIGHT and TenantPolicy(weight=MAX_WEIGHT).weight == 1000
    beyond = (1e300, 1e-300, MAX_WEIGHT * 1.000001, MIN_WEIGHT * 0.999999, 10**40)
    bad_settings = [{"weight": bad} for bad in (0, 0.0, -1, math.nan, math.inf, -math.inf, *beyond)]
    bad_settings += [{"cap": bad} for bad in (0, -1, True, False, 1.5)]
    for bad in bad_settings:
        (name,) = bad
        with pytest.raises(ValueError, match=f"a tenant's {name} must be"):
            TenantPolicy(**bad)


def test_a_claim_and_its_end_add_up_to_the_run_time():
    """on_claim / on_end are what the store ADDs to the tenant's RUNNING counter: if on_end did not take
    back exactly what on_claim added, running and started_ms_sum would drift with every job."""
    usage = Usage().apply(on_claim(NOW)).apply(on_claim(NOW + 500))
    assert usage.worker_ms(NOW + 1000) == 1000 + 500
    usage = usage.apply(on_end(NOW, NOW + 2000))
    assert usage == Usage(running=1, ended_ms=2000, started_ms_sum=NOW + 500, ended=1)
    usage = usage.apply(on_end(NOW + 500, NOW + 3000))
    assert usage == Usage(running=0, ended_ms=4500, started_ms_sum=0, ended=2)


def test_apply_keeps_the_lift_and_combined_sums_the_shards():
    """A claim or an end must not drop the lift (the tenant would get its credit back with its next job),
    and a tenant's usage is the sum of its shards' counters, lifts included: if `combined` missed a field a
    sharded tenant would look as if it had used less."""
    lifted = Usage(running=1, ended_ms=10, started_ms_sum=NOW, lift_vt=500 * S)
    assert lifted.apply(on_end(NOW, NOW + S)).lift_vt == 500 * S
    parts = [Usage(1, 10, NOW, 5), Usage(2, 20, 2 * NOW + 7, 0), Usage()]
    assert Usage.combined(parts) == Usage(3, 30, 3 * NOW + 7, 5)
    assert Usage.combined(parts).worker_ms(NOW + S) == sum(part.worker_ms(NOW + S) for part in parts)
    assert Usage.combined([]) == Usage()


def test_a_running_attempt_is_charged_its_tenants_mean_from_the_instant_it_starts():
    """The order of claims charges a running attempt at least the tenant's mean attempt (the pool's while
    it has none): without it an attempt costs 0 at its start, and the workers freed at one instant all went
    to the tenant a little behind (a weight-1 tenant of 100 took 6 claims in a row, 25% over its share)."""
    usage = Usage().apply(on_claim(NOW)).apply(on_end(NOW, NOW + 1000)).apply(on_claim(NOW + 1000))
    assert usage.worker_ms(NOW + 1000) == 1000
    assert usage.expected_ms(NOW + 1000) == 2000, "charged its mean (1 s) at once"
    assert usage.expected_ms(NOW + 4000) == 4000, "and as it runs, once it runs longer"
    fresh = Usage().apply(on_claim(NOW))
    assert fresh.expected_ms(NOW, mean_ms=500.0) == 500 and fresh.expected_ms(NOW) == 0


def test_the_floor_of_the_tenants_given_lifts_no_one_past_the_tenants_not_given():
    """`others_from` bounds the floor: `ahead` has run 5 s with a job waiting, `back` returns at 0, and the
    tenants not given (a claim's window left them out) are at 0 at least. Raised to `ahead`'s 5 s anyway,
    the clock would lift `back` past every one of them (past what it is owed, and past the head the claim
    orders by). Without a bound the floor is the given tenants' (a claim that examined every tenant)."""
    ahead = load("ahead", running=1, running_for_s=5)
    back = load("back", waiting=2)
    bounded = dispatch_order([ahead, back], NOW, 0.0, others_from=0.0)
    assert bounded.within_cap[0] == Candidate("back", 0.0, None)
    unbounded = dispatch_order([ahead, back], NOW, 0.0)
    assert unbounded.within_cap[0] == Candidate("back", 5 * S, lift_offset_ms=5 * S)

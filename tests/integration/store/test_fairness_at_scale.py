"""Weighted fair share and caps hold with many more waiting tenants than a claim examines at once
(CANDIDATE_TENANTS), on the real store of each backend with a pool of workers on a manual clock.

What broke them: a claim chose among the first CANDIDATE_TENANTS tenants of the `active` head, whose keys
lag behind their tenants' virtual times, and lifted any tenant it found more than a second below the system
clock. A backlogged tenant outside that window fell below the clock while the window was served and was then
lifted, losing what it was owed: with 100 waiting tenants, the ten of weight 10 got 9.6% of the pool where
52.6% is fair. And with every tenant of the window at its cap, a claim flexed their caps while an uncapped
tenant outside it waited. Now a claim serves the best tenant it examined only once no tenant it has not
examined can come before it (onward.store.claim_window: keys are lower bounds), only a tenant that returned
from idle is lifted (QueueEntry.fresh), and a claim looks past the window for a tenant below its cap before it
flexes one.
"""

from __future__ import annotations

from collections import Counter

from onward.domain.dispatch import TenantPolicy
from onward.store.claims import CANDIDATE_TENANTS
from onward.store.ports import Tenant
from onward.store.service import JobStore
from tests.integration.store.pools import WORK, Pool
from tests.support import ManualClock

CLAIMS_PER_WEIGHT = 20  # each unit of weight's expected claims: +-1 claim is the 5% tolerance


def backlog(store: JobStore, weights: dict[str, float], claims: int) -> None:
    """Register each tenant with its weight and queue more jobs than its fair share of `claims`."""
    total = sum(weights.values())
    for tenant_id, weight in weights.items():
        store.register_tenant(Tenant(tenant_id, TenantPolicy(weight=weight)))
        jobs = int(claims * weight / total) + 5
        for start in range(0, jobs, 50):
            store.create_batch(tenant_id, [(WORK, None)] * min(50, jobs - start))


def share_errors(claims: Counter[str], weights: dict[str, float]) -> dict[str, float]:
    """Each tenant's claims against its fair share of them: achieved / fair - 1."""
    total, weight_sum = sum(claims.values()), sum(weights.values())
    return {tenant_id: claims[tenant_id] / (total * weight / weight_sum) - 1 for tenant_id, weight in weights.items()}


def assert_weighted_shares(store: JobStore, clock: ManualClock, weights: dict[str, float], workers: int) -> None:
    claims_wanted = int(sum(weights.values()) * CLAIMS_PER_WEIGHT)
    backlog(store, weights, claims_wanted)
    claims = Pool(store, clock, workers=workers).run(claims_wanted / workers, job_s=1)
    assert sum(claims.values()) == claims_wanted
    errors = share_errors(claims, weights)
    worst = sorted(errors.items(), key=lambda item: abs(item[1]))[-5:]
    assert max(abs(error) for error in errors.values()) <= 0.05 + 1e-9, worst


def test_weights_hold_with_100_waiting_tenants(store_backend, clock):
    """10 tenants of weight 10 and 90 of weight 1, all backlogged: the ten share 52.6% of the pool (they got
    9.6%), each tenant within 5% of its own fair share (one claim in 20)."""
    weights = {f"t{n:03d}": 10.0 if n % 10 == 0 else 1.0 for n in range(100)}
    assert_weighted_shares(store_backend.store(), clock, weights, workers=10)


def test_weights_hold_with_1000_waiting_tenants(clock):
    """1,000 backlogged tenants, one in ten of weight 5: each within 5% of its fair share. In memory: the
    claim path is the same code on both backends (the contract suite holds their reads equal), and the
    28,000 claims this needs take about ten minutes on the embedded endpoint (`make soak` runs that one:
    tests/soak/fairness_at_scale.py)."""
    weights = {f"t{n:04d}": 5.0 if n % 10 == 0 else 1.0 for n in range(1_000)}
    assert_weighted_shares(JobStore.in_memory(clock=clock), clock, weights, workers=40)


def test_caps_hold_with_more_capped_tenants_than_a_claim_examines(store_backend, clock):
    """CANDIDATE_TENANTS + 4 tenants of cap 1 lead the `active` head (they were served least), and an
    uncapped tenant comes after them: the capped ones never run more than one job each while it has work,
    and it takes every other worker (they ran 2.5-6 jobs each and it got 50%)."""
    store = store_backend.store()
    capped = [f"capped{n:02d}" for n in range(CANDIDATE_TENANTS + 4)]
    for tenant_id in capped:
        store.register_tenant(Tenant(tenant_id, TenantPolicy(cap=1)))
        store.create_batch(tenant_id, [(WORK, None)] * 20)
    clock.advance(1)
    store.create_batch("open", [(WORK, None)] * 50)
    workers = len(capped) + 8
    pool = Pool(store, clock, workers=workers)
    for _ in range(6):
        pool.fill(job_s=1)
        running = Counter(lease.job.tenant_id for lease, _ in pool.running)
        assert all(running[tenant_id] <= 1 for tenant_id in capped), running
        assert running["open"] == workers - len(capped), running
        pool.step(job_s=1)

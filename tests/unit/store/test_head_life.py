"""A newly active tenant is not held behind the process's cached `active` head (issue 34, item 2).

The bound (onward.store.head_life, docs/architecture.md's claim section): a process whose claims come
HEAD_EVERY_CLAIM_GAP_MS apart or more reads the head at every claim, so a tenant whose first job entered
since its last claim is in the head its next claim reads; a process claiming faster uses its cached head
for less than HEAD_CACHE_MS, so such a tenant is in the head of every claim made HEAD_CACHE_MS after the
job entered. And its head reads stay below 1000 / HEAD_EVERY_CLAIM_GAP_MS + 1000 / HEAD_CACHE_MS (14) per
second however often it claims, and about 1000 / HEAD_CACHE_MS when it claims back to back.
"""

from __future__ import annotations

from collections import Counter

import pytest

from onward.domain.dispatch import TenantPolicy
from onward.domain.models import Lease, NewJob
from onward.store.claims import HEAD_CACHE_MS, HEAD_EVERY_CLAIM_GAP_MS
from onward.store.head_life import HeadLife
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import ActiveEntry, Tenant
from onward.store.service import JobStore
from tests.support import ManualClock

WORK = NewJob(type="fair.work")
LEASE_S = 3_600


class HeadCountingRecorder(MemoryRecorder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        self.calls["active_head"] += 1
        return super().active_head(limit_per_shard)


def _pool(gap_ms: int, claims: int, more: int = 0
          ) -> tuple[JobStore, JobStore, HeadCountingRecorder, ManualClock, list[Lease]]:
    """A worker process (`worker`) claiming `bulk`'s jobs `gap_ms` apart, `claims` times (its attempts keep
    running, so bulk's virtual time grows), and the API process (`api`) creating jobs in the same table;
    bulk has `more` jobs left waiting."""
    clock = ManualClock()
    table = HeadCountingRecorder()
    api = JobStore.in_memory(clock=clock, recorder=table)
    worker = JobStore.in_memory(clock=clock, recorder=table)
    api.register_tenant(Tenant("bulk", TenantPolicy()))
    for _ in range(claims + more + 50):
        api.create("bulk", WORK)
    leases = []
    for _ in range(claims):
        clock.now += gap_ms
        lease = worker.claim("w", LEASE_S)
        assert lease is not None and lease.job.tenant_id == "bulk"
        leases.append(lease)
    return worker, api, table, clock, leases


@pytest.mark.parametrize("gap_ms", [HEAD_EVERY_CLAIM_GAP_MS, 2 * HEAD_EVERY_CLAIM_GAP_MS, HEAD_CACHE_MS])
def test_a_process_claiming_slowly_takes_a_new_tenants_first_job_at_its_next_claim(gap_ms):
    """Claims 100 ms apart or more: a tenant whose first job enters between two claims is served by the
    next one. With the fixed 250 ms cache, the claims 100 and 200 ms after the head's read took bulk's job
    from the cached head, blind to `small`, for up to 250 ms."""
    worker, api, table, clock, _ = _pool(gap_ms, claims=40)
    clock.now += 1
    api.create("small", WORK)
    clock.now += gap_ms - 1
    reads = table.calls["active_head"]
    lease = worker.claim("w", LEASE_S)
    assert lease is not None and lease.job.tenant_id == "small"
    assert table.calls["active_head"] == reads + 1


@pytest.mark.parametrize("gap_ms", [5, 20, 50])
def test_a_process_claiming_fast_takes_a_new_tenants_first_job_within_the_head_cache(gap_ms):
    """Claims faster than one per 100 ms share the head a while, never HEAD_CACHE_MS: `small`'s first job is
    taken by the first claim HEAD_CACHE_MS after it entered at the latest."""
    worker, api, _, clock, _ = _pool(gap_ms, claims=60)
    entered = clock.now + 1
    clock.now = entered
    api.create("small", WORK)
    while True:
        clock.now += gap_ms
        lease = worker.claim("w", LEASE_S)
        assert lease is not None
        if lease.job.tenant_id == "small":
            break
    assert clock.now - entered <= HEAD_CACHE_MS + gap_ms


@pytest.mark.parametrize("gap_ms", [2, 10, 25, 50, 71, 75, HEAD_EVERY_CLAIM_GAP_MS, 150, HEAD_CACHE_MS])
def test_a_process_reads_the_head_at_most_fourteen_times_a_second_however_often_it_claims(gap_ms):
    """The cost side: a head read is a Query per `active` partition, so a process's reads per second are what
    each partition pays it. Claims at every gap, for 4 s after the process settled on its pace: at most
    1000 / HEAD_EVERY_CLAIM_GAP_MS + 1000 / HEAD_CACHE_MS reads a second (the most: claims 71 ms apart, each
    past the head's life of 250 * (1 - 71 / 100) ms), and about 1000 / HEAD_CACHE_MS when the claims come
    back to back."""
    claims = 4_000 // gap_ms
    worker, _, table, clock, _ = _pool(gap_ms, claims=100, more=claims)
    before = table.calls["active_head"]
    for _ in range(claims):
        clock.now += gap_ms
        assert worker.claim("w", LEASE_S) is not None
    per_s = (table.calls["active_head"] - before) / 4
    assert per_s <= 1000 / HEAD_EVERY_CLAIM_GAP_MS + 1000 / HEAD_CACHE_MS
    if gap_ms <= 2:
        assert per_s <= 1.25 * 1000 / HEAD_CACHE_MS


def test_claims_at_one_instant_share_one_head_read():
    """A process's threads freed together (the pool's start) read the head once, whatever the pace: the
    head's age 0 is young at any mean gap."""
    life = HeadLife(HEAD_CACHE_MS, HEAD_EVERY_CLAIM_GAP_MS)
    for moment in (0, 1_000, 2_000, 3_000):
        life.claimed(moment)
    assert life.mean_gap_ms > HEAD_EVERY_CLAIM_GAP_MS
    assert life.young(0) and not life.young(1)
    fresh = HeadLife(HEAD_CACHE_MS, HEAD_EVERY_CLAIM_GAP_MS)
    fresh.claimed(0)
    assert fresh.young(HEAD_CACHE_MS - 1) and not fresh.young(HEAD_CACHE_MS)

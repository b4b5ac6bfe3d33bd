"""The epoch item read at most once per period per process (onward.store.region_epoch_cache): what the API's
write gate and the fence reconciler read instead of one consistent GetItem per request or per batch.

How it breaks: without the cache every request and batch reads the item (the reconciler's idle cost at epoch
0); without its expiry a raise or an adoption is never seen; with a period at or above the authority check,
the reconciler could skip, as if before the fence, records committed after the fence window began."""

from __future__ import annotations

from onward.domain.regions import RegionEpoch
from onward.store.region_epoch_cache import EPOCH_CACHE_S, CachedRegionEpoch, cached_region_epoch, epoch_cache_s
from onward.store.service import JobStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_item_is_read_once_per_period_and_again_after_it_or_when_forgotten() -> None:
    items = [RegionEpoch.never_failed_over(),
             RegionEpoch(epoch=1, home="b", previous_home="a", fenced_at=None, decided_by=None, reason=None)]
    clock = Clock()
    cache = CachedRegionEpoch(lambda: items[min(cache.reads, 1)], ttl_s=5.0, clock=clock)
    assert [cache.current().epoch for _ in range(50)] == [0] * 50 and cache.reads == 1
    clock.now += 4.9
    assert cache.current().epoch == 0 and cache.reads == 1
    clock.now += 0.1
    assert cache.current().epoch == 1 and cache.reads == 2
    cache.forget()
    assert cache.current().epoch == 1 and cache.reads == 3


def test_the_period_stays_below_the_authority_check_and_one_cache_serves_a_store() -> None:
    assert epoch_cache_s(10.0) == EPOCH_CACHE_S == 5.0
    assert epoch_cache_s(0.5) == 0.5  # a drill's check: its fence window (2.5 s) is above lease + check
    store = JobStore.in_memory()
    assert cached_region_epoch(store) is cached_region_epoch(store)
    assert cached_region_epoch(JobStore.in_memory()) is not cached_region_epoch(store)

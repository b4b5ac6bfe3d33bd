"""The epoch item (`REGION` / `EPOCH`) as one process reads it: at most once per `ttl_s`, the last answer kept
meanwhile (issue 39's gaps: the API's write gate and the fence reconciler read it per request or per batch
otherwise, one consistent GetItem of the same key each time).

How stale an answer may be is each reader's argument, in its own module: the API refuses or accepts writes up
to `ttl_s` late after `onward failover` raises the epoch or records its adoption (onward.api.failover_gate);
the fence reconciler may skip records as before the fence for up to `ttl_s` after the raise, which is safe
while `ttl_s` is under the fence window (onward.pipeline.fence_reconciler.reconciler). `EPOCH_CACHE_S` and
`epoch_cache_s` keep it there.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from onward.domain.regions import RegionEpoch

EPOCH_CACHE_S = 5.0  # at most; below the authority check (onward.settings: 10 s) and far below the 45 s window


def epoch_cache_s(authority_check_s: float) -> float:
    """How long a process keeps the epoch item: 5 s, or the authority check's period when shorter (drills run
    a 0.5 s check and a 2.5 s fence window). The fence window is at least lease + check (the design's W adds
    5 s more), so an answer kept this long is always younger than the window."""
    return min(EPOCH_CACHE_S, authority_check_s)


class CachedRegionEpoch:
    """`read()` (the store's `region_epoch`) at most once per `ttl_s` of `clock` (monotonic seconds); thread-safe:
    callers arriving during a read wait for its answer instead of reading too."""

    def __init__(self, read: Callable[[], RegionEpoch], ttl_s: float = EPOCH_CACHE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[float, RegionEpoch] | None = None
        self.reads = 0  # how many times the item was read (tests, and what a warm process costs)

    def current(self) -> RegionEpoch:
        with self._lock:
            now = self._clock()
            if self._kept is not None and now - self._kept[0] < self.ttl_s:
                return self._kept[1]
            item = self._read()
            self.reads += 1
            self._kept = (self._clock(), item)
            return item

    def forget(self) -> None:
        """Read again at the next `current` (a failover run in this process)."""
        with self._lock:
            self._kept = None


_caches: weakref.WeakKeyDictionary[Any, CachedRegionEpoch] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cached_region_epoch(store: Any, ttl_s: float = EPOCH_CACHE_S) -> CachedRegionEpoch:
    """The one cache of `store`'s epoch item in this process (built on first use; `ttl_s` then)."""
    with _caches_lock:
        found = _caches.get(store)
        if found is None:
            found = _caches[store] = CachedRegionEpoch(store.region_epoch, ttl_s)
        return found

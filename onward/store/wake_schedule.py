"""When a process's claims wake parked queue entries (onward.store.claims): at the end of each park the process made,
and at least once per WAKE_EVERY_MS for the entries other processes parked.

An entry none of whose jobs is due (all in backoff, or delayed) is parked until its earliest job is due. The
process that parked it knows that time: its claims wake it then, not at the next once-a-second pass, so a
delayed job is claimable at its due time, not up to a second later. Every claiming process also passes
once per WAKE_EVERY_MS, which wakes the entries parked by processes that are gone.
"""

from __future__ import annotations

import heapq
import threading

from onward.domain.clock import EpochMs

WAKE_EVERY_MS = 1_000


class WakeSchedule:
    """The wake passes one process's claims make. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: EpochMs | None = None  # the next pass; None: at the next claim
        self._ends: list[EpochMs] = []  # (a heap) ends of this process's parks after the last pass

    def pass_due(self, now: EpochMs) -> bool:
        """Whether a pass is due at `now`: True hands it to the caller, and the next one is set (the earliest
        park end still to come, or WAKE_EVERY_MS on)."""
        with self._lock:
            if self._next is not None and now < self._next:
                return False
            while self._ends and self._ends[0] <= now:
                heapq.heappop(self._ends)
            self._next = min(now + WAKE_EVERY_MS, self._ends[0]) if self._ends else now + WAKE_EVERY_MS
            return True

    def parked(self, until: EpochMs) -> None:
        """This process parked an entry until `until`: a pass is due then."""
        with self._lock:
            heapq.heappush(self._ends, until)
            if self._next is not None and until < self._next:
                self._next = until

    def again(self) -> None:
        """The last pass may have left due entries asleep (it woke as many as it reads at once): pass again
        at the next claim."""
        with self._lock:
            self._next = None

"""In which order a process's claims take the due jobs of a ready queue (onward.store.claims).

Due order: the oldest due job first, jobs due in the same millisecond by job id (`DueJob.rank`, the ready
index's own order). The threads of a process share its read of a queue's head and are handed its jobs one
at a time in that order (onward.store.shared_claim_reads), so while one worker process claims a queue, its jobs start
in due order, and onward.operator.explain's count of the jobs ahead of a job is its place.

Processes claiming one queue at once cannot all keep to it: each would try the oldest job it read, all but
one would be refused (a cancelled transaction, which costs write units), then all would try the next one.
So a process that finds a job of a queue gone when it tries it (taken by another process since its read;
not one it took itself, which a lagging index may show again, nor one that ended meanwhile, cancelled:
onward.store.claim_take.NotTaken) spreads its claims on that queue for
CONTENDED_MS from then: it takes a job at random among those due within SPREAD_MS of the oldest it holds
(older ones still first: a job more than SPREAD_MS older goes before, and a queue's oldest job is what
aging weighs). While processes race for a queue, a job of it may so start before jobs due up to SPREAD_MS
before it, never before one due earlier than that.
"""

from __future__ import annotations

import random
import threading

from onward.domain.clock import EpochMs
from onward.store.ports.rows import DueJob
from onward.store.shared_claim_reads import QueueKey

SPREAD_MS = 1_000  # a contended queue's jobs due this close to its oldest are taken in random order
CONTENDED_MS = 10_000  # how long a queue counts as contended after a process found one of its jobs gone


class ClaimOrder:
    """The order of one process's claims in each ready queue: due order, spread while contended. Thread-safe."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._lock = threading.Lock()
        self._contended_until: dict[QueueKey, EpochMs] = {}

    def contended(self, key: QueueKey, now: EpochMs) -> None:
        """A claim of this process found a job of the queue gone (another process took it): spread its claims
        on the queue for CONTENDED_MS."""
        with self._lock:
            for other in [other for other, until in self._contended_until.items() if until <= now]:
                del self._contended_until[other]
            self._contended_until[key] = now + CONTENDED_MS

    def is_contended(self, key: QueueKey, now: EpochMs) -> bool:
        with self._lock:
            return self._contended_until.get(key, now) > now

    def order(self, key: QueueKey, due: list[DueJob], now: EpochMs) -> list[DueJob]:
        """The queue's due jobs in the order to try them: due order, those due within SPREAD_MS of the oldest
        shuffled while the queue is contended."""
        ordered = sorted(due, key=DueJob.rank)
        if not ordered or not self.is_contended(key, now):
            return ordered
        oldest = ordered[0].due_at
        spread = [job for job in ordered if job.due_at - oldest <= SPREAD_MS]
        self._rng.shuffle(spread)
        return spread + ordered[len(spread):]

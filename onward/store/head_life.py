"""How long a process uses its cached head of the `active` index (onward.store.claims): tied to how often the
process claims, so that a tenant that became active is found by the next claims without more reads at scale;
and how long what a claim found nothing in answers the process's polls (`NothingFound`)."""

from __future__ import annotations

import threading

from onward.domain.clock import EpochMs

CLAIM_GAP_WEIGHT = 0.1  # the weight of the newest gap in the mean gap between the process's claims


class HeadLife:
    """The life of a process's cached head: `cache_ms` while its claims come back to back, shrinking as the
    mean gap between them (an exponentially weighted mean) grows, to 0 at `every_claim_gap_ms` and beyond.

    A process whose claims come `every_claim_gap_ms` apart or more reads the head at every claim, so a tenant
    that became active since is in the head its next claim reads; one that claims more often reads it less
    than at every claim, and about once per `cache_ms` once its claims come much faster. Its head reads per
    second stay below 1000 / `every_claim_gap_ms` + 1000 / `cache_ms` (a read at every claim while claims
    come further apart than the head's life; docs/architecture.md's claim section has the arithmetic)."""

    def __init__(self, cache_ms: float, every_claim_gap_ms: float) -> None:
        self._cache_ms = cache_ms
        self._every_claim_gap_ms = every_claim_gap_ms
        self._last: EpochMs | None = None
        self.mean_gap_ms = 0.0  # (a process starts as if busy: its first claims share a head)

    def claimed(self, now: EpochMs) -> None:
        """A claim of the process began at `now`."""
        if self._last is not None:
            self.mean_gap_ms += CLAIM_GAP_WEIGHT * (max(0, now - self._last) - self.mean_gap_ms)
        self._last = now if self._last is None else max(self._last, now)

    def young(self, age_ms: float) -> bool:
        """Whether a head read `age_ms` ago may still be used."""
        life = self._cache_ms * max(0.0, 1.0 - self.mean_gap_ms / self._every_claim_gap_ms)
        return age_ms < self._cache_ms and age_ms <= life


class NothingFound:
    """When a claim of the process last found nothing claimable on reads of its own (the head, the counters):
    for `share_ms` after, it answers the process's polls that find nothing in what the process shares,
    unless the process wrote a job into a queue since (`jobs_entered`). Thread-safe.

    An idle process's workers poll one after another (each backs off 0.5 to 2 s, and polls first as its job
    ends): without it each poll that found nothing in the shared head read the whole head again (a Query per
    `active` partition), and the polls of a fleet with idle workers, not its jobs, set the read load of
    every partition (bench/scale.py's realistic run: 1.06 head reads per job where 0.27 do with it). A job
    that became claimable meanwhile is found by the first poll past `share_ms`: a wait of the kind the
    index's own lag already makes (a GSI is eventually consistent)."""

    def __init__(self, share_ms: float) -> None:
        self._share_ms = share_ms
        self._at: EpochMs | None = None
        self._lock = threading.Lock()

    def found(self, at: EpochMs) -> None:
        """A claim that began at `at` found nothing on its own reads."""
        with self._lock:
            self._at = at if self._at is None else max(self._at, at)

    def jobs_entered(self) -> None:
        with self._lock:
            self._at = None

    def lately(self, now: EpochMs) -> bool:
        """Whether a claim found nothing within `share_ms` before `now`, and no job entered since."""
        with self._lock:
            return self._at is not None and now - self._at < self._share_ms

"""Rate limits on the claim path (issue 37): which limits a claimed job is subject to (its tenant's
definitions, cached RATE_LIMIT_CACHE_MS per process), and what its claim does with their buckets.

A claim (JobStore's take) asks `for_claim` with the job row it decided from:
- no limit applies, and no reservation: nothing (the claim costs what it did);
- the job reserved a token and is claimed within the grace (onward.domain.rate_limits.grace_ms): it spends
  it, with no bucket read or written (the claim's transaction only checks the reservation is still the one
  read);
- else the buckets are read (one consistent BatchGetItem) and, when every one has a token now, the claim's
  own transaction takes it (`RateTake`: a compare-and-set of each TAT); when one has none, the earliest token
  to come is reserved in a small transaction of its own (buckets and job row: `reserve`) and the job is
  deferred to it, so it holds no worker meanwhile and the claim goes on to other jobs (JobDeferred). A
  bucket that moved between the read and the reservation is read again (a few times, then the job is left
  for the next claim).

Limit definitions are read through a per-process cache of (tenant, key), RATE_LIMIT_CACHE_MS: a claim reads
only its own job's keys (one BatchGetItem for those not cached), so its cost does not grow with the number
of a tenant's limits; a limit set (or removed, or changed) applies to every process's claims within
RATE_LIMIT_CACHE_MS. Reservations made under the old limit stand (the jobs wait for the moments they were
given); the next token of a bucket is computed with the new limit from its TAT.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from onward.domain.clock import Clock, EpochMs
from onward.domain.errors import InvalidRequest
from onward.domain.models import Job
from onward.domain.rate_limits import Gcra, applicable_keys, grace_ms, key_problem, reservation_fresh, token
from onward.store.ports.rate_buckets import (
    RateBuckets,
    RateLimitDefinition,
    RateTake,
    Reservation,
    ReserveOutcome,
)

RATE_LIMIT_CACHE_MS = 3_000  # how long a process uses a tenant's limit definitions before reading them again
MAX_CACHED = 100_000  # cached definitions (tenant, key) at most: past it the cache starts again
RESERVE_ROUNDS = 8  # reservations tried (each after a fresh read of the buckets) before the job is left


class JobDeferred(Exception):
    """The claimed job has no token now: it reserved one (or could not, for contention) and waits."""


@dataclass(frozen=True)
class _Cached:
    read_at: EpochMs
    gcra: Gcra | None  # None: no limit of that key


class RateLimiter:
    """The claim side of rate limits for one JobStore. Thread-safe."""

    def __init__(self, buckets: RateBuckets, clock: Clock, cache_ms: int = RATE_LIMIT_CACHE_MS) -> None:
        self._buckets = buckets
        self._clock = clock
        self._cache_ms = cache_ms
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], _Cached] = {}
        self.reservations = 0  # reservations committed by this process (for tests and benches)

    def applying(self, job: Job) -> dict[str, Gcra]:
        """The limits `job` is subject to, by key: its key's, its type's, its tenant's, each as cached for up to
        the cache period (those not cached, or older, read in one request: a claim reads only the
        definitions of its own keys, however many the tenant has)."""
        now = self._clock()
        keys = applicable_keys(job.type, job.rate_limit_key)
        found: dict[str, Gcra] = {}
        missing = []
        with self._lock:
            for key in keys:
                cached = self._cache.get((job.tenant_id, key))
                if cached is None or now - cached.read_at >= self._cache_ms:
                    missing.append(key)
                elif cached.gcra is not None:
                    found[key] = cached.gcra
        if missing:
            read = self._buckets.rate_limits_of(job.tenant_id, missing)
            with self._lock:
                if len(self._cache) > MAX_CACHED:
                    self._cache.clear()
                for key in missing:
                    definition = read.get(key)
                    self._cache[(job.tenant_id, key)] = _Cached(now, None if definition is None else definition.gcra)
                    if definition is not None:
                        found[key] = definition.gcra
        return {key: found[key] for key in keys if key in found}

    def forget(self, tenant_id: str, key: str) -> None:
        """Read that limit at its next claim (this process changed it)."""
        with self._lock:
            self._cache.pop((tenant_id, key), None)

    def for_claim(self, job: Job, now: EpochMs) -> RateTake | None:
        """What the claim of `job` (the row as the claim decided from it) at `now` does to rate limits: None
        (nothing), or the RateTake its transaction commits. JobDeferred when it has no token now (it
        reserved one, or left the job for a later claim when its buckets kept moving)."""
        limits = self.applying(job)
        if not limits:
            return None if job.rate_reserved_at is None else RateTake(job.tenant_id, (), job.rate_reserved_at)
        if reservation_fresh(job.rate_reserved_at, now, grace_ms(limits.values())):
            return RateTake(job.tenant_id, (), job.rate_reserved_at)
        for _ in range(RESERVE_ROUNDS):
            chosen = token(limits, self._buckets.bucket_tats(job.tenant_id, list(limits)), now)
            if not chosen.reserved:
                return RateTake(job.tenant_id, chosen.moves, job.rate_reserved_at)
            outcome = self._buckets.reserve(Reservation(
                job.tenant_id, job.job_id, (job.state, job.version, job.attempt), job.rate_reserved_at,
                chosen.at_ms, chosen.moves))
            if outcome is ReserveOutcome.RESERVED:
                with self._lock:
                    self.reservations += 1
                raise JobDeferred(job.job_id)
            if outcome is ReserveOutcome.JOB_MOVED:
                # The row moved since the claim's copy of it (claimed, cancelled, or reserved by another
                # process): a take with no moves, conditional on the reservation as read, is refused as
                # JOB_MOVED, so the store reads the row and decides again (it may hold a reservation due now).
                return RateTake(job.tenant_id, (), job.rate_reserved_at)
            now = self._clock()
        raise JobDeferred(job.job_id)


class RateLimits:
    """A tenant's rate limits, as the API and operators set and read them, and the claim side (`limiter`)."""

    def __init__(self, buckets: RateBuckets, clock: Clock, cache_ms: int = RATE_LIMIT_CACHE_MS) -> None:
        self._buckets = buckets
        self._clock = clock
        self.limiter = RateLimiter(buckets, clock, cache_ms)

    def put(self, tenant_id: str, key: str, limit: int, period_s: float) -> RateLimitDefinition:
        """Set one of the tenant's limits (InvalidRequest, nothing written, for a bad key, limit or period)."""
        problem = key_problem(key)
        if problem is not None:
            raise InvalidRequest(problem)
        try:
            gcra = Gcra(limit, period_s)
        except ValueError as error:
            raise InvalidRequest(str(error)) from error
        definition = RateLimitDefinition(key, gcra, self._clock())
        self._buckets.put_rate_limit(tenant_id, definition)
        self.limiter.forget(tenant_id, key)
        return definition

    def get(self, tenant_id: str, key: str) -> RateLimitDefinition | None:
        return next((found for found in self.list(tenant_id) if found.key == key), None)

    def list(self, tenant_id: str) -> list[RateLimitDefinition]:
        """The tenant's limits, read now, in key order."""
        return sorted(self._buckets.rate_limits(tenant_id), key=lambda definition: definition.key)

    def delete(self, tenant_id: str, key: str) -> bool:
        """Remove one of the tenant's limits (False: there was none). Jobs that reserved tokens keep their
        moments."""
        removed = self._buckets.delete_rate_limit(tenant_id, key)
        self.limiter.forget(tenant_id, key)
        return removed

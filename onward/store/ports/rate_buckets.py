"""The rate limits role of the recorder (issue 37): a tenant's limit definitions, its GCRA buckets
(onward.domain.rate_limits) and the reservation write; the claim's own take rides in its TransitionWrite
(`RateTake`).

Every change of a bucket is a compare-and-set on its TAT: from the value read (or from no bucket) to the new
one. A claim's take is part of the claim's transaction (the job row, its run record, its counters and the
buckets commit together or not at all); a reservation is a transaction of its own: the buckets, and the job
row's due time and `rate_reserved_at`, on the condition that the row is still the one read (state, version,
attempt and the reservation it had), so a job reserves at most one token per read and never two at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from onward.domain.clock import EpochMs
from onward.domain.rate_limits import BucketMove, Gcra
from onward.domain.states import JobState


@dataclass(frozen=True)
class RateLimitDefinition:
    """One of a tenant's limits: `gcra.limit` starts per `gcra.period_s` on key `key`."""

    key: str
    gcra: Gcra
    updated_at: EpochMs = 0


@dataclass(frozen=True)
class RateTake:
    """What a claim's transaction does to rate limits: the buckets' compare-and-sets (`moves`: none when the
    claim spends a reservation), on the condition that the job row's `rate_reserved_at` is still
    `reserved_read` (what the claim decided from)."""

    tenant_id: str
    moves: tuple[BucketMove, ...]
    reserved_read: EpochMs | None


@dataclass(frozen=True)
class Reservation:
    """A job's reservation of a token to come: its buckets moved, its row due at `at` (and `rate_reserved_at`
    = `at`), on the condition that the row is still `expected` (state, version, attempt) with `reserved_read`."""

    tenant_id: str
    job_id: str
    expected: tuple[JobState, int, int]
    reserved_read: EpochMs | None
    at: EpochMs
    moves: tuple[BucketMove, ...]


class ReserveOutcome(StrEnum):
    RESERVED = "reserved"
    JOB_MOVED = "job_moved"  # the row changed since it was read (claimed, reserved, cancelled): leave it
    BUCKET_MOVED = "bucket_moved"  # a bucket's TAT changed since it was read (or a concurrent write): read again


class RateBuckets(ABC):
    """Tenants' rate limit definitions and buckets. Thread-safe."""

    @abstractmethod
    def rate_limits(self, tenant_id: str) -> list[RateLimitDefinition]:
        """The tenant's limits, in key order (one Query of its partition)."""

    @abstractmethod
    def rate_limits_of(self, tenant_id: str, keys: Collection[str]) -> dict[str, RateLimitDefinition]:
        """The tenant's limits of `keys` that exist (one BatchGetItem, eventually consistent: claims cache
        them anyway), by key."""

    @abstractmethod
    def put_rate_limit(self, tenant_id: str, definition: RateLimitDefinition) -> None:
        """Set (add or replace) one of the tenant's limits; its bucket is kept."""

    @abstractmethod
    def delete_rate_limit(self, tenant_id: str, key: str) -> bool:
        """Remove one of the tenant's limits (False: it had none); its bucket is kept."""

    @abstractmethod
    def bucket_tats(self, tenant_id: str, keys: Collection[str]) -> dict[str, int]:
        """The TATs of the tenant's buckets of `keys` that exist (strongly consistent)."""

    @abstractmethod
    def reserve(self, reservation: Reservation) -> ReserveOutcome:
        """Commit a reservation (one transaction), or say which condition refused it."""

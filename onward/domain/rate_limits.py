"""Rate limits as GCRA (the generic cell rate algorithm), pure: which limits a job is subject to, and whether
its claim takes a token now or reserves the earliest one to come.

A limit is `limit` starts per `period_s` on one bucket, whose whole state is one number: its theoretical
arrival time (TAT, epoch microseconds). The emission interval is T = period / limit and the burst tolerance
(limit - 1) * T, so an idle bucket lets `limit` jobs start at once and then one per T. A token at time t
conforms when TAT <= t + tolerance, and moves the bucket to TAT' = max(TAT, t) + T. Over any closed window
of w seconds a bucket hands out at most limit + floor(w / T) tokens (at most 2 * limit - 1 within any
window shorter than the period, as a full token bucket refilling meanwhile would).

Names (`RateLimitKey`): a tenant's limit on all of its jobs is the reserved key `tenant`, a limit on one job
type `type:<job type>`, and any other key is a job's own `rate_limit_key`. A job is subject to every limit
that applies to it: its key's, its type's and its tenant's; its token is one moment, taken from each of
those buckets together.

A job whose buckets have no token now reserves the earliest one instead (`reserve`): every bucket moves on as
if the job started then, and the job waits until then (its due time) and starts without taking a token
again. A reservation is honoured only while it is fresh: claimed more than `grace_ms` after its moment, the
job takes a token anew (so that jobs whose starts were delayed, say for want of workers, cannot all start
together on tokens of the past): a start is then never more than `grace_ms` after its token, and any window
of w seconds sees at most limit + floor((w + grace) / T) starts of a bucket.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from onward.domain.clock import EpochMs
from onward.domain.text_patterns import JOB_TYPE, RATE_LIMIT_KEY

TENANT_LIMIT = "tenant"  # the reserved key of the limit on every job of a tenant
TYPE_LIMIT_PREFIX = "type:"  # `type:<job type>`: the limit on every job of that type
MAX_LIMIT = 100_000
MIN_PERIOD_S = 0.001
MAX_PERIOD_S = 86_400.0
RESERVATION_GRACE_MS = 2_000  # a reservation claimed later than this (or one interval, if longer) is taken anew
US_PER_MS = 1_000


def is_reserved_key(key: str) -> bool:
    """Whether `key` names a tenant's or a type's limit (not a job's own rate_limit_key)."""
    return key == TENANT_LIMIT or key.startswith(TYPE_LIMIT_PREFIX)


def key_problem(key: str) -> str | None:
    """Why `key` cannot name a limit (None: it can): `tenant`, `type:<a job type>`, or a key of RATE_LIMIT_KEY."""
    if not RATE_LIMIT_KEY.matches(key):
        return f"a rate limit key is 1 to 128 of A-Z a-z 0-9 _ . : @ + - starting with a letter or digit, not {key!r}"
    if key.startswith(TYPE_LIMIT_PREFIX) and not JOB_TYPE.matches(key.removeprefix(TYPE_LIMIT_PREFIX)):
        return f"{key!r}: a type's limit is named type:<job type>, and {key.removeprefix(TYPE_LIMIT_PREFIX)!r} " \
               "is no job type"
    return None


def type_key(job_type: str) -> str:
    return f"{TYPE_LIMIT_PREFIX}{job_type}"


def applicable_keys(job_type: str, rate_limit_key: str | None) -> tuple[str, ...]:
    """The keys of the limits a job may be subject to: its own key's, its type's, its tenant's."""
    own = (rate_limit_key,) if rate_limit_key else ()
    return (*own, type_key(job_type), TENANT_LIMIT)


@dataclass(frozen=True)
class Gcra:
    """One limit: `limit` starts per `period_s`."""

    limit: int
    period_s: float

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {self.limit!r}")
        if not (isinstance(self.period_s, int | float) and math.isfinite(self.period_s)
                and MIN_PERIOD_S <= self.period_s <= MAX_PERIOD_S):
            raise ValueError(f"period_s must be from {MIN_PERIOD_S} to {MAX_PERIOD_S} seconds, not {self.period_s!r}")

    @property
    def interval_us(self) -> int:
        """T, rounded up: the rate is never above limit / period."""
        return math.ceil(self.period_s * 1_000_000 / self.limit)

    @property
    def tolerance_us(self) -> int:
        return (self.limit - 1) * self.interval_us

    def conforms(self, tat: int | None, at_us: int) -> bool:
        return tat is None or tat <= at_us + self.tolerance_us

    def earliest_us(self, tat: int | None, now_us: int) -> int:
        """The earliest moment from `now_us` on at which a token conforms."""
        return now_us if tat is None else max(now_us, tat - self.tolerance_us)

    def after(self, tat: int | None, at_us: int) -> int:
        """The bucket's TAT once a token of moment `at_us` is taken."""
        return max(tat if tat is not None else at_us, at_us) + self.interval_us


@dataclass(frozen=True)
class BucketMove:
    """One bucket's compare-and-set: from the TAT read (`expected`, None: no bucket yet) to `tat`."""

    key: str
    expected: int | None
    tat: int


@dataclass(frozen=True)
class Token:
    """What a claim of a limited job does: take its token at `at_ms` (`reserved`: a moment to come, for which
    the job waits; else now, in the claim's own transaction), moving each of its buckets."""

    at_us: int
    moves: tuple[BucketMove, ...]
    reserved: bool

    @property
    def at_ms(self) -> EpochMs:
        """The job's due time for a reserved token: never before its moment."""
        return math.ceil(self.at_us / US_PER_MS)


def token(limits: Mapping[str, Gcra], tats: Mapping[str, int | None], now_ms: EpochMs) -> Token:
    """The token of a job subject to `limits` (by key), its buckets at `tats` (absent: no bucket yet): now when
    every bucket conforms now, else reserved at the earliest moment every bucket conforms."""
    now_us = now_ms * US_PER_MS
    at_us = max((gcra.earliest_us(tats.get(key), now_us) for key, gcra in limits.items()), default=now_us)
    moves = tuple(BucketMove(key, tats.get(key), gcra.after(tats.get(key), at_us)) for key, gcra in limits.items())
    return Token(at_us, moves, reserved=at_us > now_us)


def grace_ms(limits: Iterable[Gcra]) -> int:
    """How late a reservation may be claimed and still be spent: RESERVATION_GRACE_MS, or the longest
    interval of its limits."""
    return max([RESERVATION_GRACE_MS, *(math.ceil(gcra.interval_us / US_PER_MS) for gcra in limits)])


def reservation_fresh(reserved_at: EpochMs | None, now_ms: EpochMs, grace: int) -> bool:
    """Whether a job reserved at `reserved_at` spends that reservation when claimed at `now_ms`."""
    return reserved_at is not None and now_ms - reserved_at <= grace


def max_starts(gcra: Gcra, window_ms: float, grace: int = 0) -> int:
    """The most starts one bucket allows in a closed window of `window_ms` (starts at most `grace` ms after
    their tokens): limit + floor((window + grace) / T)."""
    return gcra.limit + math.floor((window_ms + grace) * US_PER_MS / gcra.interval_us)

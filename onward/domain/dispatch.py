"""Which tenant a free worker serves next: weighted fair share of worker time, caps that flex, priority
bands that age (pure).

One global FIFO lets a tenant with two million jobs starve everyone. Here work is queued per tenant and a
free worker serves the tenant that has used the least worker time for its weight:

- **Virtual time.** A tenant's virtual time is the worker time its attempts have used (ended attempts
  plus the time the running ones have run so far, plus any lift) divided by its weight. Counting the
  running attempts as they run means a tenant holding many long jobs is charged for them while they run,
  not in a lump when they end. A weight-2 tenant's virtual time rises half as fast: twice the share.
- **A system virtual clock; no banked credit.** The clock is the highest virtual time any claim has served
  (`advance_clock`), and at least the least virtual time among the backlogged tenants with jobs running
  (`virtual_floor`: between claims, long attempts move it on): it never goes back, and it exists when
  nothing runs or waits. A tenant below it by
  more than LIFT_TOLERANCE_MS was not competing (idle, or holding one long job while its queue was empty,
  or shut out by its own backoff): it is lifted to the clock when it is next considered (its `offset_ms`
  grows), so it competes on equal terms from now on and never owns the pool for the time it was away.
  Tenants that stay backlogged are at or above the clock (it is their minimum when served) and are never
  lifted. This is start-time fair queueing's rule, with worker time as the cost.
- **Caps that flex.** A tenant with `cap` jobs running is passed over while a tenant below its cap has due
  work. When none has, capped tenants are served past their caps (in the same fair order): no worker idles
  while a job is due (work conserving). A cap is split exactly over the tenant's running shards
  (`shard_caps`), so each shard is one item that a claim can condition on.
- **Ties** (same virtual time, e.g. everyone at the clock) go to the tenant with fewer jobs running per
  unit of weight, then by tenant id, so simultaneous claims spread over tenants in proportion to weights.
- **Priority bands age** (`band_order`): inside a tenant, a due job of a higher band goes first, but a job
  gains one band for every AGING_MS it has been due, so a low band is never starved: a band-0 job waits at
  most 9 * AGING_MS behind band-9 jobs that keep arriving.

The claim path (onward.store.claims) calls `dispatch_order` with the tenants at the head of the active index;
the simulation (bench/fairness/) calls the same functions with the tenants that have due work, lifts
with `Usage.lifted`, advances the clock with `advance_clock` and moves usage with `on_claim` / `on_end`,
the same changes the store writes to DynamoDB. Times are epoch milliseconds (any monotonic ms clock).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_WEIGHT = 1.0
# Weights from MIN_WEIGHT to MAX_WEIGHT: a ratio of 10^6 between the lightest and the heaviest tenant. Beyond
# it one tenant's share is indistinguishable from 0 (the other's from 1) on any pool, and the bounds keep the
# weight and virtual time (worker ms divided by the weight) far inside the numbers DynamoDB stores (about
# 1e-130 to 1e126, 38 digits): 1e-300 or 1e300 would be refused at the write, after the check.
MIN_WEIGHT = 0.001
MAX_WEIGHT = 1000.0
DEFAULT_CAP: int | None = None  # no cap of its own: fair share alone decides, up to the whole pool
LIFT_TOLERANCE_MS = 1_000  # virtual ms below the clock that do not count as returning (claims race)
AGING_MS = 10_000  # a due job gains one priority band per AGING_MS it waits
VirtualMs = float  # worker milliseconds per unit of weight


@dataclass(frozen=True)
class TenantPolicy:
    """A tenant's dispatch settings. `weight`: relative share of worker time (MIN_WEIGHT to MAX_WEIGHT).
    `cap`: most of its jobs running at once while other tenants have due work (>= 1), None for no cap."""

    weight: float = DEFAULT_WEIGHT
    cap: int | None = DEFAULT_CAP

    def __post_init__(self) -> None:
        if not (isinstance(self.weight, int | float) and MIN_WEIGHT <= self.weight <= MAX_WEIGHT):  # NaN: False
            raise ValueError(f"a tenant's weight must be a number from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}, "
                             f"not {self.weight!r}")
        if self.cap is not None and (isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1):
            raise ValueError(f"a tenant's cap must be a whole number >= 1 (or None for no cap), not {self.cap!r}")


class Usage(NamedTuple):
    """A tenant's worker-time counters (the sum of its running shards' items).

    `running`: attempts running now. `ended_ms`: worker time of attempts that ended. `started_ms_sum`: the
    sum of the running attempts' claim times, so the time they have run so far is `running * now -
    started_ms_sum` without touching the counter while they run. `offset_ms`: worker time added by lifts
    (a returning tenant set level with the system clock).
    """

    running: int = 0
    ended_ms: int = 0
    started_ms_sum: int = 0
    offset_ms: int = 0

    def worker_ms(self, now: int) -> int:
        """Worker time charged up to `now`: ended attempts, the running ones so far, and lifts."""
        return self.ended_ms + self.running * now - self.started_ms_sum + self.offset_ms

    def apply(self, change: UsageChange) -> Usage:
        return self._replace(running=self.running + change.running, ended_ms=self.ended_ms + change.ended_ms,
                             started_ms_sum=self.started_ms_sum + change.started_ms_sum)

    def lifted(self, offset_ms: int) -> Usage:
        """With its lift offset raised to `offset_ms` (see `Candidate.lift_offset_ms`); never lowered."""
        return self._replace(offset_ms=max(self.offset_ms, offset_ms))

    @classmethod
    def combined(cls, parts: Iterable[Usage]) -> Usage:
        """The tenant's usage from its shards' counters."""
        running = ended = started = offset = 0
        for part in parts:
            running += part.running
            ended += part.ended_ms
            started += part.started_ms_sum
            offset += part.offset_ms
        return cls(running, ended, started, offset)


class UsageChange(NamedTuple):
    """What one transition adds to a tenant's counters (the store writes it as one DynamoDB ADD)."""

    running: int
    ended_ms: int
    started_ms_sum: int


def on_claim(now: int) -> UsageChange:
    """An attempt starts: one more running, its run time counts from `now`."""
    return UsageChange(running=1, ended_ms=0, started_ms_sum=now)


def on_end(claimed_at: int, now: int) -> UsageChange:
    """An attempt claimed at `claimed_at` stops running at `now` (completed, failed, reaped, released or
    cancelled): its whole run time moves from the running part to the ended part."""
    return UsageChange(running=-1, ended_ms=now - claimed_at, started_ms_sum=-claimed_at)


class TenantLoad(NamedTuple):
    """One tenant as the dispatcher sees it: settings, usage counters and how many jobs wait (queued or
    retry_wait, due or not: the store checks due-ness with its ready query)."""

    tenant_id: str
    policy: TenantPolicy
    usage: Usage
    waiting: int

    def virtual_time(self, now: int) -> VirtualMs:
        return self.usage.worker_ms(now) / self.policy.weight

    @property
    def at_cap(self) -> bool:
        return self.policy.cap is not None and self.usage.running >= self.policy.cap


class Candidate(NamedTuple):
    """A tenant to try at `virtual_time` (lifted to the clock where it returns). `lift_offset_ms`: set when
    it returns from below the clock: the claim that serves it raises its lift offset to this value
    (`Usage.lifted`; a conditional SET that never lowers it), so it cannot bank credit."""

    tenant_id: str
    virtual_time: VirtualMs
    lift_offset_ms: int | None


class DispatchOrder(NamedTuple):
    """Try `within_cap` in order (claims there must keep the tenant below its cap). Only when none of
    them has a due job, try `flex` in order: tenants at their cap, served past it (work conserving)."""

    within_cap: tuple[Candidate, ...]
    flex: tuple[Candidate, ...]

    def first(self) -> tuple[Candidate, bool] | None:
        """The tenant to serve when every candidate has a due job (the simulation's case), and whether
        serving it flexes its cap; None when there is no candidate."""
        if self.within_cap:
            return self.within_cap[0], False
        if self.flex:
            return self.flex[0], True
        return None


def candidate(load: TenantLoad, now: int, clock: VirtualMs) -> Candidate:
    """`load` as a candidate at `now` under the system clock: lifted to the clock when it is below it by
    more than LIFT_TOLERANCE_MS."""
    worker_ms = load.usage.worker_ms(now)
    weight = load.policy.weight
    virtual = worker_ms / weight
    if virtual >= clock - LIFT_TOLERANCE_MS:
        return Candidate(load.tenant_id, virtual, None)
    lift = load.usage.offset_ms + math.ceil(clock * weight - worker_ms)
    return Candidate(load.tenant_id, clock, lift)


def virtual_floor(loads: Iterable[TenantLoad], now: int) -> VirtualMs | None:
    """The least virtual time among backlogged tenants (jobs waiting) with jobs running: how far the pool
    has come since the last claim. None when there is none."""
    return min((load.virtual_time(now) for load in loads if load.waiting > 0 and load.usage.running),
               default=None)


def dispatch_order(loads: Iterable[TenantLoad], now: int, clock: VirtualMs = 0.0) -> DispatchOrder:
    """Which tenants to try for one free worker, in which order, and which only as a flex (past their
    cap). `loads`: the tenants with jobs waiting (others are left out); `clock`: the system virtual clock
    as stored (raised here to the `virtual_floor`). Cost: one pass and a sort over the tenants given."""
    backlogged = [load for load in loads if load.waiting > 0]
    clock = max(clock, virtual_floor(backlogged, now) or 0.0)
    within: list[tuple[float, float, str, Candidate]] = []
    capped: list[tuple[float, float, str, Candidate]] = []
    for load in backlogged:
        chosen = candidate(load, now, clock)
        entry = (chosen.virtual_time, load.usage.running / load.policy.weight, load.tenant_id, chosen)
        (capped if load.at_cap else within).append(entry)
    within.sort()
    capped.sort()
    return DispatchOrder(tuple(entry[3] for entry in within), tuple(entry[3] for entry in capped))


def advance_clock(clock: VirtualMs, served: Candidate) -> VirtualMs:
    """The system virtual clock after a claim served `served`: it never goes back."""
    return max(clock, served.virtual_time)


# --- caps over running shards ----------------------------------------------------------------------------

def running_shards(ready_shards: int) -> int:
    """How many RUNNING counter items a tenant's attempts are spread over: one per ready shard (a tenant
    that needs throughput has several). Ready shards are only ever raised, so no attempt is ever charged to
    a counter that claims no longer read."""
    return max(1, ready_shards)


def shard_caps(cap: int | None, shards: int) -> tuple[int | None, ...]:
    """The cap split exactly over `shards` RUNNING items (their sum is the cap; None: no cap). With a cap
    below the shards, some shards' share is 0: they admit nothing (claims take the others)."""
    if cap is None:
        return (None,) * shards
    base, extra = divmod(cap, shards)
    return tuple(base + (1 if shard < extra else 0) for shard in range(shards))


# --- priority bands --------------------------------------------------------------------------------------

def aged_priority(priority: int, due_at: int, now: int, aging_ms: int = AGING_MS) -> float:
    """A due job's priority after aging: one band more for every `aging_ms` it has been due."""
    return aged_ms(priority, due_at, now, aging_ms) / aging_ms


def aged_ms(priority: int, due_at: int, now: int, aging_ms: int = AGING_MS) -> int:
    """`aged_priority` times `aging_ms`: in whole milliseconds, so that jobs compare exactly (a tie is a tie,
    as onward.operator.explain's bounds count it, not a rounding)."""
    return priority * aging_ms + max(0, now - due_at)


def band_order(heads: Mapping[int, int], now: int, aging_ms: int = AGING_MS) -> list[int]:
    """The order in which to try a tenant's priority bands, from the due time of each band's oldest due
    job (`heads`: priority -> due_at): the highest aged priority first, the higher band on a tie."""
    return sorted(heads, key=lambda band: (-aged_ms(band, heads[band], now, aging_ms), -band))

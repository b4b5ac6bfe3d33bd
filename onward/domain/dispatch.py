"""Which tenant a free worker serves next: weighted fair share of worker time, caps that flex, priority
bands that age (pure).

One global FIFO lets a tenant with two million jobs starve everyone. Here work is queued per tenant and a
free worker serves the tenant that has used the least worker time for its weight:

- **Virtual time.** A tenant's virtual time grows by the worker time its attempts use (the ended ones,
  and the running ones as they run) divided by its weight, plus any lift. Counting the running attempts as
  they run means a tenant holding many long jobs is charged for them while they run, not in a lump when
  they end. A weight-2 tenant's virtual time rises half as fast: twice the share.
- **A weight change is not debt** (`VirtualBase`). Each slice of work is charged at the weight in force
  when it ran: a weight change rebases the tenant (its virtual time then, and its worker time then), and
  only the work after it is divided by the new weight. Lifts are kept in virtual time, so no weight
  rescales them either.
- **A system virtual clock; no banked credit.** The clock is the highest virtual time any claim has served
  (`advance_clock`), and at least the least virtual time among the backlogged tenants with jobs running
  (`virtual_floor`: between claims, long attempts move it on): it never goes back, and it exists when
  nothing runs or waits. A tenant that RETURNS (work entered its queues while none of them was being
  served: it was idle, held one long job with an empty queue, or was shut out by its own backoff) and is
  below the clock by more than LIFT_TOLERANCE_MS is lifted to it when it is first considered (its
  `lift_vt` grows), so it competes on equal terms from now on and never owns the pool for the time it
  was away. A tenant that stayed backlogged is never lifted, however far behind the clock it fell (the
  claim had not reached it: it is owed that time). This is start-time fair queueing's rule, with worker
  time as the cost.
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

    `running`: attempts running now. `ended_ms`: worker time of attempts that ended (`ended` of them).
    `started_ms_sum`: the sum of the running attempts' claim times, so the time they have run so far is `running * now -
    started_ms_sum` without touching the counter while they run. `lift_vt`: virtual ms added by lifts (a
    returning tenant set level with the system clock), whole ms, in virtual time so that no weight change
    rescales it.
    """

    running: int = 0
    ended_ms: int = 0
    started_ms_sum: int = 0
    lift_vt: int = 0
    ended: int = 0

    def worker_ms(self, now: int) -> int:
        """Worker time used up to `now`: ended attempts and the running ones so far (lifts aside). It only
        grows, and continuously: a claim adds nothing at its instant, an end moves what the attempt ran from
        the running part to the ended part."""
        return self.ended_ms + self.running * now - self.started_ms_sum

    def expected_ms(self, now: int, mean_ms: float | None = None) -> float:
        """`worker_ms` with each running attempt charged at least the tenant's mean attempt so far (`mean_ms`,
        the pool's, while it has none): what the order of claims goes by. An attempt costs nothing at the
        instant it starts, so without this the free workers of one instant would all go to the tenant a
        little behind; with it, a claim sees the cost of the attempts it just started (and an attempt that
        runs longer is charged as it runs)."""
        mean = self.ended_ms / self.ended if self.ended else mean_ms
        if mean is None or not self.running:
            return self.worker_ms(now)
        ran = self.running * now - self.started_ms_sum
        return self.ended_ms + max(ran, self.running * mean)

    def apply(self, change: UsageChange) -> Usage:
        return self._replace(running=self.running + change.running, ended_ms=self.ended_ms + change.ended_ms,
                             started_ms_sum=self.started_ms_sum + change.started_ms_sum,
                             ended=self.ended + change.ended)

    def lifted(self, lift_vt: int) -> Usage:
        """With its lift raised to `lift_vt` (see `Candidate.lift_offset_ms`); never lowered."""
        return self._replace(lift_vt=max(self.lift_vt, lift_vt))

    @classmethod
    def combined(cls, parts: Iterable[Usage]) -> Usage:
        """The tenant's usage from its shards' counters: their counts summed, their lifts' highest (a lift is
        a level, raised by the claim that serves a returning tenant on the counter that claim charges)."""
        running = ended_ms = started = lift = ended = 0
        for part in parts:
            running += part.running
            ended_ms += part.ended_ms
            started += part.started_ms_sum
            lift = max(lift, part.lift_vt)
            ended += part.ended
        return cls(running, ended_ms, started, lift, ended)


class VirtualBase(NamedTuple):
    """Where a tenant's virtual time stood when its weight last changed: `virtual` (virtual ms, lifts aside)
    when its worker time was `worker_ms`. Its virtual time at worker time W, under the weight in force since,
    is `virtual + (W - worker_ms) / weight`: the work before the change stays charged at the weights it ran
    under. (0, 0) until its weight first changes."""

    virtual: VirtualMs = 0.0
    worker_ms: int = 0

    def virtual_time(self, worker_ms: float, weight: float) -> VirtualMs:
        """The virtual time (lifts aside) at worker time `worker_ms`, charged at `weight` since the base."""
        return self.virtual + (worker_ms - self.worker_ms) / weight

    def rebased(self, worker_ms: int, weight: float) -> VirtualBase:
        """The base for a weight change at worker time `worker_ms` from `weight` (the weight in force until
        then): the virtual time reached, where the new weight's charging starts. Virtual time is the same
        just before and just after the change."""
        return VirtualBase(self.virtual_time(worker_ms, weight), worker_ms)


class UsageChange(NamedTuple):
    """What one transition adds to a tenant's counters (the store writes it as one DynamoDB ADD)."""

    running: int
    ended_ms: int
    started_ms_sum: int
    ended: int = 0


def on_claim(now: int) -> UsageChange:
    """An attempt starts: one more running, its run time counts from `now`."""
    return UsageChange(running=1, ended_ms=0, started_ms_sum=now)


def on_end(claimed_at: int, now: int) -> UsageChange:
    """An attempt claimed at `claimed_at` stops running at `now` (completed, failed, reaped, released or
    cancelled): its whole run time moves from the running part to the ended part."""
    return UsageChange(running=-1, ended_ms=now - claimed_at, started_ms_sum=-claimed_at, ended=1)


class TenantLoad(NamedTuple):
    """One tenant as the dispatcher sees it: settings, usage counters, how many jobs wait (queued or
    retry_wait, due or not: the store checks due-ness with its ready query) and its virtual base.
    `returning`: work entered its queues while none of them was being served (it was away): lifted to the
    clock if it is below it; False when it stayed backlogged (a claim served it since work entered: it is
    owed what it waited for, and is never lifted)."""

    tenant_id: str
    policy: TenantPolicy
    usage: Usage
    waiting: int
    base: VirtualBase = VirtualBase()
    returning: bool = True

    def virtual_time(self, now: int, mean_ms: float | None = None) -> VirtualMs:
        """Its virtual time at `now`: its work charged at the weights in force when it ran (the running
        attempts at least their expected time, Usage.expected_ms; `mean_ms`: the pool's mean attempt, for a
        tenant with none ended), plus lifts: the order of claims."""
        worked = self.usage.expected_ms(now, mean_ms)
        return self.base.virtual_time(worked, self.policy.weight) + self.usage.lift_vt

    @property
    def at_cap(self) -> bool:
        return self.policy.cap is not None and self.usage.running >= self.policy.cap


class Candidate(NamedTuple):
    """A tenant to try at `virtual_time` (lifted to the clock where it returns). `lift_offset_ms`: set when
    it returns from below the clock: the claim that serves it raises its lift (`Usage.lift_vt`, virtual ms)
    to this value (`Usage.lifted`; in its own transaction, only over a lower lift), so it cannot bank credit."""

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


def candidate(load: TenantLoad, now: int, clock: VirtualMs, mean_ms: float | None = None) -> Candidate:
    """`load` as a candidate at `now` under the system clock: a returning tenant is lifted to the clock when
    it is below it by more than LIFT_TOLERANCE_MS (it is considered at once: it enters the `active` index at
    the clock, at the head)."""
    virtual = load.virtual_time(now, mean_ms)
    if not load.returning or virtual >= clock - LIFT_TOLERANCE_MS:
        return Candidate(load.tenant_id, virtual, None)
    return Candidate(load.tenant_id, clock, load.usage.lift_vt + math.ceil(clock - virtual))


def pool_mean_ms(loads: Iterable[TenantLoad]) -> float | None:
    """The mean attempt of the tenants given (their ended attempts together); None when none ended."""
    ended = ended_ms = 0
    for load in loads:
        ended += load.usage.ended
        ended_ms += load.usage.ended_ms
    return ended_ms / ended if ended else None


def virtual_floor(loads: Iterable[TenantLoad], now: int, mean_ms: float | None = None) -> VirtualMs | None:
    """The least virtual time among backlogged tenants (jobs waiting) with jobs running: how far the pool
    has come since the last claim. None when there is none."""
    return min((load.virtual_time(now, mean_ms) for load in loads if load.waiting > 0 and load.usage.running),
               default=None)


def dispatch_order(loads: Iterable[TenantLoad], now: int, clock: VirtualMs = 0.0,
                   others_from: VirtualMs = math.inf) -> DispatchOrder:
    """Which tenants to try for one free worker, in which order, and which only as a flex (past their
    cap). `loads`: the tenants with jobs waiting (others are left out); `clock`: the system virtual clock
    as stored (raised here to the `virtual_floor`); `others_from`: a lower bound of the virtual times of
    backlogged tenants not in `loads` (a claim's least key not examined). The floor of `loads` is the pool's
    only up to it: raised past it by one tenant running ahead, the clock would lift every returning tenant
    examined past what it is owed (and past the tenants not examined, so the claim trusts none of them).
    Cost: one pass and a sort over the tenants given."""
    backlogged = [load for load in loads if load.waiting > 0]
    mean_ms = pool_mean_ms(backlogged)
    floor = virtual_floor(backlogged, now, mean_ms)
    clock = max(clock, 0.0 if floor is None else min(floor, others_from))
    within: list[tuple[float, float, str, Candidate]] = []
    capped: list[tuple[float, float, str, Candidate]] = []
    for load in backlogged:
        chosen = candidate(load, now, clock, mean_ms)
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

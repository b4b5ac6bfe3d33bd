"""Which tenant a free worker serves next: weighted fair share of worker time, caps that flex (pure).

One global FIFO lets a tenant with two million jobs starve everyone. Here work is queued per tenant and a
free worker serves the tenant that has used the least worker time for its weight:

- **Virtual time.** A tenant's virtual time is the worker time its attempts have used (ended attempts
  plus the time the running ones have run so far) divided by its weight. Counting the running attempts as
  they run means a tenant holding many long jobs is charged for them while they run, not in a lump when
  they end. A weight-2 tenant's virtual time rises half as fast, so it gets twice the share.
- **No banked credit.** A tenant with nothing running returns from idle: it starts at the least virtual
  time among the backlogged tenants (jobs waiting) that have jobs running (the *floor*), or at its own if
  that is higher. A tenant that slept an hour does not then own the pool for an hour; it competes on equal
  terms from now on. (Other returning tenants do not set the floor: their old virtual times are exactly
  the credit that must not count.)
- **Caps that flex.** A tenant with `cap` jobs running is passed over while a tenant below its cap has due
  work. When none has, capped tenants are served past their caps (in the same fair order): no worker idles
  while a job is due (work conserving).
- **Ties** (same virtual time, e.g. everyone at zero) go to the tenant with fewer jobs running per unit
  of weight, then by tenant id, so simultaneous claims spread over tenants in proportion to their weights.

The claim path (onward.store) calls `dispatch_order` with every tenant's counters; the simulation
(bench/fairness.py) calls the same function with the tenants that have due work (tenants with nothing
waiting are ignored either way, so passing only the others is the incremental form), lifts with
`Usage.lifted` and updates usage with the same `on_claim` / `on_end` changes the store writes to
DynamoDB. Times are epoch milliseconds (any monotonic millisecond clock).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_WEIGHT = 1.0
DEFAULT_CAP: int | None = None  # no cap of its own: fair share alone decides, up to the whole pool


@dataclass(frozen=True)
class TenantPolicy:
    """A tenant's dispatch settings. `weight`: relative share of worker time (> 0). `cap`: most of its
    jobs running at once while other tenants have due work (>= 1), None for no cap."""

    weight: float = DEFAULT_WEIGHT
    cap: int | None = DEFAULT_CAP

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise ValueError(f"a tenant's weight must be > 0, not {self.weight!r}")
        if self.cap is not None and self.cap < 1:
            raise ValueError(f"a tenant's cap must be >= 1 (or None for no cap), not {self.cap!r}")


class Usage(NamedTuple):
    """A tenant's worker-time counters, as its counter item holds them.

    `running`: attempts running now. `ended_ms`: worker time of attempts that ended (plus any lift of a
    returning tenant). `started_ms_sum`: the sum of the running attempts' claim times, so the time they
    have run so far is `running * now - started_ms_sum` without touching the counter while they run.
    """

    running: int = 0
    ended_ms: int = 0
    started_ms_sum: int = 0

    def worker_ms(self, now: int) -> int:
        """Worker time used up to `now`: ended attempts plus the running ones so far."""
        return self.ended_ms + self.running * now - self.started_ms_sum

    def apply(self, change: UsageChange) -> Usage:
        return Usage(self.running + change.running, self.ended_ms + change.ended_ms,
                     self.started_ms_sum + change.started_ms_sum)

    def lifted(self, worker_ms: int) -> Usage:
        """A returning tenant (nothing running) set to start at `worker_ms` (see `Candidate.lift_to_ms`)."""
        if self.running:
            raise ValueError("only a tenant with nothing running is lifted")
        return Usage(0, max(self.ended_ms, worker_ms), 0)


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

    def virtual_time(self, now: int) -> float:
        return self.usage.worker_ms(now) / self.policy.weight

    @property
    def at_cap(self) -> bool:
        return self.policy.cap is not None and self.usage.running >= self.policy.cap


class Candidate(NamedTuple):
    """A tenant to try. `lift_to_ms`: set when the tenant returns from idle below the floor: the claim
    that serves it must also set its used worker time to this (`Usage.lifted`), so it cannot bank credit."""

    tenant_id: str
    virtual_time: float
    lift_to_ms: int | None


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


def virtual_floor(loads: Iterable[TenantLoad], now: int) -> float | None:
    """The least virtual time among backlogged tenants (jobs waiting) with jobs running: where a
    returning tenant starts. None when there is none (a returning tenant then keeps its own)."""
    return min((load.virtual_time(now) for load in loads if load.waiting > 0 and load.usage.running),
               default=None)


def dispatch_order(loads: Iterable[TenantLoad], now: int) -> DispatchOrder:
    """Which tenants to try for one free worker, in which order, and which only as a flex (past their
    cap). `loads`: every tenant with jobs waiting (others may be included: they are left out). Cost: one
    pass and a sort over the tenants with jobs waiting."""
    candidates = [load for load in loads if load.waiting > 0]
    if len(candidates) == 1:  # the common case of a busy pool: no floor, nothing to sort
        load = candidates[0]
        candidate = Candidate(load.tenant_id, load.virtual_time(now), None)
        return DispatchOrder((), (candidate,)) if load.at_cap else DispatchOrder((candidate,), ())
    floor = virtual_floor(candidates, now)
    within: list[tuple[float, float, str, Candidate]] = []
    capped: list[tuple[float, float, str, Candidate]] = []
    for load in candidates:
        usage, weight = load.usage, load.policy.weight
        worker_ms = usage.worker_ms(now)
        virtual = worker_ms / weight
        lift: int | None = None
        if not usage.running and floor is not None and floor > virtual:
            virtual = floor
            lift = max(worker_ms, int(floor * weight))
        entry = (virtual, usage.running / weight, load.tenant_id, Candidate(load.tenant_id, virtual, lift))
        (capped if load.at_cap else within).append(entry)
    within.sort()
    capped.sort()
    return DispatchOrder(tuple(entry[3] for entry in within), tuple(entry[3] for entry in capped))

"""The ideal pool simulation: one policy choosing the tenant at every dispatch decision, on a simulated clock.

FIFO and the small-first oracle of the report run here; Onward's figures come from its real claim
(claim_pool.py). Policy.ONWARD here is the IDEAL ordering the claim approximates, kept to compare with: it
sees every tenant with due work at once, with no window, no head cache and no index to lag.

A deterministic discrete-event simulation with a simulated clock (no AWS, no threads, seeded). The ideal
Onward runs the claim path's domain code: at every dispatch decision `onward.domain.dispatch.dispatch_order`
chooses the tenant (given the tenants with due work and the system virtual clock), a tenant below the
clock is lifted with `Usage.lifted(candidate.lift_offset_ms)`, the clock moves on with `advance_clock`
after every claim (it starts at 0), and usage moves with `on_claim` / `on_end`, the very changes the store
writes to DynamoDB. Within a tenant jobs run in arrival order (the `ready` index's order).
FIFO serves every tenant from one queue in arrival order. Both run exactly the same jobs: each tenant draws
its durations from its own seeded generator, in its own order.

Measured, per policy, over the scenarios of bench/fairness/scenarios.py:
- small tenants' queue wait (due -> started) p50 / p99 / max, with bulk and without it;
- `utilisation`: busy workers / all workers, integrated over the time at least one job is due and
  waiting (the least of the two scenarios);
- `jain_min`: Jain's fairness index of worker time / weight among the tenants that were backlogged (a due
  job waiting) through a WHOLE 1-minute window, for each window with at least two such tenants, least over
  the windows of both scenarios. A tenant with little demand is not backlogged and is not held against
  the index. (Onward's small tenants are never backlogged for a minute, so its windows are the weights
  scenario's; FIFO's small tenants are, behind bulk.)
- `weight_share_error`: the largest |achieved share / configured share - 1| in the weights scenario.
"""

from __future__ import annotations

import heapq
import math
import random
from array import array
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from onward.domain.dispatch import (
    TenantLoad,
    TenantPolicy,
    Usage,
    advance_clock,
    dispatch_order,
    on_claim,
    on_end,
)

WORKERS = 100
PARETO_ALPHA = 1.5
MEAN_DURATION_MS = 1000.0
WINDOW_MS = 60_000


class Policy(StrEnum):
    FIFO = "fifo"  # one global queue in arrival order
    ONWARD = "onward"  # onward.domain.dispatch: weighted fair share, caps that flex
    SMALL_FIRST = "small_first"  # reference oracle: a small tenant's due job always goes first


@dataclass(frozen=True)
class TenantSpec:
    """A simulated tenant: its dispatch policy, its jobs due at t=0, its job sizes."""

    tenant_id: str
    policy: TenantPolicy
    backlog_at_start: int = 0
    mean_duration_ms: float = MEAN_DURATION_MS
    small: bool = False


@dataclass(frozen=True)
class Scenario:
    tenants: tuple[TenantSpec, ...]
    workers: int = WORKERS
    arrival_rate_per_ms: float = 0.0  # Poisson arrivals, each to a small tenant drawn uniformly
    arrivals_until_ms: float = 0.0
    stop_at_ms: float = math.inf  # stop the clock here (jobs still waiting are left waiting)
    seed: int = 1


@dataclass
class Outcome:
    """What one run of one scenario under one policy measured (times in simulated ms)."""

    workers: int
    jobs: int = 0
    small_waits_ms: array = field(default_factory=lambda: array("d"))
    due_ms: float = 0.0  # time during which at least one due job waited
    busy_while_due_ms: float = 0.0  # busy workers integrated over that time
    jain: list[float] = field(default_factory=list)  # per qualifying 1-minute window
    worker_ms: list[float] = field(default_factory=list)  # per tenant, up to the stop time
    end_ms: float = 0.0

    @property
    def utilisation(self) -> float:
        return self.busy_while_due_ms / (self.workers * self.due_ms) if self.due_ms else 1.0


def pareto_ms(rng: random.Random, mean_ms: float) -> float:
    return mean_ms * (PARETO_ALPHA - 1) / PARETO_ALPHA * rng.paretovariate(PARETO_ALPHA)


def simulate(scenario: Scenario, policy: Policy) -> Outcome:
    """Run `scenario` until every job is done (or `stop_at_ms`) with `policy` choosing the tenant.

    Jobs are not objects: a tenant's queue is a count of jobs due at t=0 plus a deque of later arrival
    times; running attempts are (finish, tenant, claimed_at) tuples in one heap."""
    tenants = scenario.tenants
    count = len(tenants)
    workers = scenario.workers
    stop_at = scenario.stop_at_ms
    names = [spec.tenant_id for spec in tenants]
    index_of = {name: n for n, name in enumerate(names)}
    policies = [spec.policy for spec in tenants]
    means = [spec.mean_duration_ms for spec in tenants]
    small = [spec.small for spec in tenants]
    small_ids = [n for n in range(count) if small[n]]
    duration_rngs = [random.Random(f"{scenario.seed}:duration:{n}") for n in range(count)]

    initial = [spec.backlog_at_start for spec in tenants]  # due at t=0, ahead of later arrivals
    arrived: list[deque[float]] = [deque() for _ in range(count)]
    usage = [Usage() for _ in range(count)]
    due: set[int] = {n for n in range(count) if initial[n]}  # tenants with a due job waiting
    finishing: list[tuple[float, int, float]] = []
    free = workers
    waiting_total = sum(initial)

    # FIFO / SMALL_FIRST: one heap entry per tenant with work, keyed by its head job's place in the one
    # global queue: (not small [SMALL_FIRST only], arrival, position); the position orders backlogs
    # enqueued together at t=0 (tenant by tenant).
    queued = policy is not Policy.ONWARD
    rank_small = policy is Policy.SMALL_FIRST
    offsets = [sum(initial[:n]) for n in range(count)]
    heads: list[tuple[bool, float, int, int]] = []
    if queued:
        heads = [(rank_small and not small[n], 0.0, offsets[n], n) for n in range(count) if initial[n]]
        heapq.heapify(heads)

    arrival_rng = random.Random(f"{scenario.seed}:arrivals")
    rate = scenario.arrival_rate_per_ms
    until = scenario.arrivals_until_ms
    next_arrival = arrival_rng.expovariate(rate) if rate > 0 and small_ids else math.inf
    if next_arrival > until:
        next_arrival = math.inf

    out = Outcome(workers=workers, worker_ms=[0.0] * count)
    waits = out.small_waits_ms
    worker_ms = out.worker_ms
    backlog_since: list[float | None] = [0.0 if initial[n] else None for n in range(count)]
    backlog_spans: list[list[tuple[float, float]]] = [[] for _ in range(count)]
    window_ms: list[dict[int, float]] = [{} for _ in range(count)]
    now = last = 0.0
    clock = 0.0  # the system virtual clock (onward.domain.dispatch.advance_clock)
    returned: list[bool] = [True] * count  # whether each tenant returned (not served since its work came)
    jobs = 0

    while True:
        # Dispatch while a worker is free and a job is due.
        while free and waiting_total:
            if queued:
                tenant = heapq.heappop(heads)[3]
            else:
                order = dispatch_order(
                    [TenantLoad(names[n], policies[n], usage[n], initial[n] + len(arrived[n]), returning=returned[n])
                     for n in due], now, clock)
                chosen, _flexed = order.first()  # type: ignore[misc]  # never None: `due` is not empty
                tenant = index_of[chosen.tenant_id]
                if chosen.lift_offset_ms is not None:
                    usage[tenant] = usage[tenant].lifted(chosen.lift_offset_ms)
                clock = advance_clock(clock, chosen)
                returned[tenant] = False  # served: it stays backlogged until it has nothing due
            if initial[tenant]:
                initial[tenant] -= 1
                arrival = 0.0
            else:
                arrival = arrived[tenant].popleft()
            waiting_total -= 1
            if not initial[tenant] and not arrived[tenant]:
                due.discard(tenant)
                backlog_spans[tenant].append((backlog_since[tenant], now))  # type: ignore[arg-type]  # was due
                backlog_since[tenant] = None
            elif queued:
                rank = rank_small and not small[tenant]
                if initial[tenant]:
                    position = offsets[tenant] + tenants[tenant].backlog_at_start - initial[tenant]
                    heapq.heappush(heads, (rank, 0.0, position, tenant))
                else:
                    heapq.heappush(heads, (rank, arrived[tenant][0], 0, tenant))
            if small[tenant]:
                waits.append(now - arrival)
            finish = now + pareto_ms(duration_rngs[tenant], means[tenant])
            if not queued:
                usage[tenant] = usage[tenant].apply(on_claim(now))
            heapq.heappush(finishing, (finish, tenant, now))
            cut = finish if finish < stop_at else stop_at
            window = int(now // WINDOW_MS)
            if cut < (window + 1) * WINDOW_MS:  # within one window: most attempts
                windows = window_ms[tenant]
                windows[window] = windows.get(window, 0.0) + (cut - now)
            else:
                charge_windows(window_ms[tenant], now, cut)
            worker_ms[tenant] += cut - now
            free -= 1
            jobs += 1

        # The next event: an attempt ends, or a small job arrives.
        next_finish = finishing[0][0] if finishing else math.inf
        now = min(next_finish, next_arrival)
        if now == math.inf or now > stop_at:
            now = stop_at if stop_at != math.inf else last
            if waiting_total:
                out.due_ms += now - last
                out.busy_while_due_ms += (workers - free) * (now - last)
            break
        if waiting_total:
            out.due_ms += now - last
            out.busy_while_due_ms += (workers - free) * (now - last)
        last = now
        if next_finish <= next_arrival:
            _, tenant, claimed_at = heapq.heappop(finishing)
            free += 1
            if not queued:
                usage[tenant] = usage[tenant].apply(on_end(claimed_at, now))
        else:
            tenant = small_ids[int(arrival_rng.random() * len(small_ids))]
            if not initial[tenant] and not arrived[tenant]:
                backlog_since[tenant] = now
                due.add(tenant)
                returned[tenant] = True  # it returns: lifted to the clock if below (QueueEntry.returned_at)
                if queued:
                    heapq.heappush(heads, (rank_small and not small[tenant], now, 0, tenant))
            arrived[tenant].append(now)
            waiting_total += 1
            next_arrival = next_arrival_after(arrival_rng, now, rate, until)

    close_backlog_spans(backlog_since, backlog_spans, now)
    out.end_ms = now
    out.jobs = jobs
    out.jain = jain_per_window(backlog_spans, window_ms, policies)
    return out


def charge_windows(windows: dict[int, float], start: float, finish: float) -> None:
    """One attempt's worker time, into the 1-minute windows it spans."""
    if finish <= start:
        return
    first, last = int(start // WINDOW_MS), int(finish // WINDOW_MS)
    if first == last:
        windows[first] = windows.get(first, 0.0) + (finish - start)
        return
    windows[first] = windows.get(first, 0.0) + ((first + 1) * WINDOW_MS - start)
    for window in range(first + 1, last):
        windows[window] = windows.get(window, 0.0) + WINDOW_MS
    windows[last] = windows.get(last, 0.0) + (finish - last * WINDOW_MS)


def jain_per_window(spans: list[list[tuple[float, float]]], window_ms: list[dict[int, float]],
                     policies: list[TenantPolicy]) -> list[float]:
    """Jain's index of worker time / weight over the tenants backlogged through each whole window, for
    the windows with at least two such tenants."""
    backlogged: dict[int, list[int]] = {}
    for tenant, tenant_spans in enumerate(spans):
        for start, end in tenant_spans:
            for window in range(math.ceil(start / WINDOW_MS), math.floor(end / WINDOW_MS)):
                backlogged.setdefault(window, []).append(tenant)
    indices = []
    for window, members in sorted(backlogged.items()):
        if len(members) < 2:
            continue
        shares = [window_ms[t].get(window, 0.0) / policies[t].weight for t in members]
        squares = sum(share * share for share in shares)
        indices.append(sum(shares) ** 2 / (len(shares) * squares) if squares else 1.0)
    return indices


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1)]


def close_backlog_spans(since: list[float | None], spans: list[list[tuple[float, float]]], now: float) -> None:
    """End, at `now`, the backlogged span of every tenant still backlogged (`since` its start)."""
    for n, started in enumerate(since):
        if started is not None:
            spans[n].append((started, now))


def next_arrival_after(rng: random.Random, now: float, rate: float, until: float) -> float:
    """The next Poisson arrival after `now` at `rate` per ms, or infinity past `until`."""
    arrival = now + rng.expovariate(rate)
    return arrival if arrival <= until else math.inf

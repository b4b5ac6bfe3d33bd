"""The simulated workloads: the issue's bulk scenario, the weights scenario and the small scenarios.

Scenario "bulk" (the issue's): 100 workers; tenant `bulk` enqueues 2,000,000 jobs at t=0 (`--jobs`
scales that) and has a cap of 80 that must flex whenever no small job is due; 50 small tenants submit
jobs as Poisson processes, together asking for SMALL_LOAD of the pool, for as long as bulk alone would
take to drain (so every small job arrives while bulk is backlogged). Durations are heavy-tailed: Pareto,
alpha 1.5 (infinite variance), mean 1 s; the longest of two million runs for hours. The same small
arrivals are run again with bulk absent (the "without bulk" baseline), and once more with a reference
oracle, SMALL_FIRST, that always serves a small tenant's due job first: no non-preemptive,
work-conserving dispatcher can give small tenants shorter waits while bulk keeps the pool busy.

Scenario "weights": three tenants with weights 1:2:4 and backlogs that outlast the run (always
backlogged) and different job sizes (mean 2 s, 1 s, 0.5 s: shares are of worker TIME, not of job
counts), for 20 minutes of simulated time (10 with a reduced `--jobs`).

Small scenarios (seconds; top-level keys of the JSON, details under `scenarios`):
- `returning_tenant_share`: five ways a tenant returns to a pool that tenant `busy` has used alone for an
  hour, each of which let the returning tenant `back` take the whole pool for about an hour under the old
  floor. Both weight 1, 10 workers (one in `one_worker`), both backlogged through the hour after `back`
  returns; measured: `back`'s share of the worker time in that hour (fair 0.5). `kept_one_long_job`: `back`
  held one 3-hour job all along (it has a job running); `busy_has_running_none_waiting`: busy's last wave
  of 60 s jobs is running and nothing of it waits (its next backlog comes 20 s later);
  `pool_idle_after_busy_hour`: busy's jobs all end at 1:00, the pool idles 10 minutes, both return;
  `one_worker`; `all_finish_together`: busy's 60 s jobs run in waves, all ten end at 1:00 just as `back`
  arrives (every event of one instant is applied before a worker is given out). Other jobs: Pareto, mean
  10 s. The same patterns run with clock 0.0 at every decision (nobody lifted) show the hole.
- `low_band_max_wait_s`: one tenant, 10 workers; band 9 always has 100 jobs due (one more each time one
  starts: more than the pool can ever run), band-0 jobs arrive about every 30 s, for 30 minutes. A free
  worker serves the first band of `band_order` (aging: a job gains a band per AGING_MS it waits), so a
  band-0 job waits about 9 * AGING_MS plus band 9's own wait. Strict priority never starts one.
- `shard_wait_p99_ratio`: one tenant with 4 ready shards, 10 workers, Poisson arrivals at the pool's
  capacity (a backlog forms and wanders) hashed to shards at random, for an hour; a free worker serves
  the shard whose oldest due job is oldest (the store reads the head of each of the tenant's ready queues
  and serves the highest aged priority: within a band, the oldest due job). Slowest shard's p99 wait over
  the fastest's (1.0 to 1.01 over seeds 1-10); the old shard-0-first order (165 to 1,700), and a plain
  rotation (least recently served shard) for comparison: it gives every backlogged shard the same service
  whatever its backlog, so a shard that drew more arrivals waits longer (1.2 to 2.2).
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from bench.fairness.simulator import MEAN_DURATION_MS, WINDOW_MS, WORKERS, Scenario, TenantSpec, pareto_ms, percentile
from onward.domain.dispatch import (
    AGING_MS,
    TenantLoad,
    TenantPolicy,
    Usage,
    advance_clock,
    band_order,
    dispatch_order,
    on_claim,
    on_end,
)

BULK_JOBS = 2_000_000
SMALL_TENANTS = 50
SMALL_LOAD = 0.25  # the small tenants' demand, as a fraction of the pool
BULK_CAP = 80
WEIGHTS = (1.0, 2.0, 4.0)
WEIGHT_MEANS_MS = (2000.0, 1000.0, 500.0)
WEIGHTS_MINUTES = 20
REDUCED_BELOW = 500_000  # bulk jobs: below this, the weights scenario runs for half as long


def bulk_scenario(bulk_jobs: int, seed: int, *, with_bulk: bool = True) -> Scenario:
    """The issue's scenario: `bulk` with `bulk_jobs` due at t=0, 50 small tenants with Poisson arrivals."""
    small = tuple(TenantSpec(f"small-{n:02d}", TenantPolicy(), small=True) for n in range(SMALL_TENANTS))
    bulk = TenantSpec("bulk", TenantPolicy(cap=BULK_CAP), backlog_at_start=bulk_jobs)
    return Scenario(
        tenants=((bulk,) if with_bulk else ()) + small,
        arrival_rate_per_ms=SMALL_LOAD * WORKERS / MEAN_DURATION_MS,
        arrivals_until_ms=bulk_jobs * MEAN_DURATION_MS / WORKERS,  # how long bulk alone would take
        seed=seed,
    )


def weights_scenario(seed: int, minutes: int = WEIGHTS_MINUTES) -> Scenario:
    """Three always-backlogged tenants, weights 1:2:4, different job sizes."""
    horizon_ms = minutes * WINDOW_MS
    tenants = tuple(
        TenantSpec(f"weight-{weight:g}", TenantPolicy(weight=weight),
                   backlog_at_start=int(2 * horizon_ms * WORKERS / mean), mean_duration_ms=mean)
        for weight, mean in zip(WEIGHTS, WEIGHT_MEANS_MS, strict=True)
    )
    return Scenario(tenants=tenants, stop_at_ms=horizon_ms, seed=seed)


# --- returning tenants, priority bands, shards (small scenarios, seconds) --------------------------------

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
RETURNING_WORKERS = 10
RETURNING_MEAN_MS = 10_000.0
TARGET_RETURNING_SHARE = 0.6  # fair is 0.5

PRIORITY_WORKERS = 10
PRIORITY_MEAN_MS = 1000.0
HIGH_BAND, LOW_BAND = 9, 0
HIGH_BAND_DUE = 100  # band-9 jobs due at every moment (one more each time one starts): the pool never catches up
LOW_BAND_EVERY_MS = 30_000.0  # band-0 jobs: Poisson arrivals, one per 30 s on average
PRIORITY_RUN_MS = 30 * MINUTE_MS
TARGET_LOW_BAND_WAIT_S = (HIGH_BAND - LOW_BAND) * AGING_MS / 1000 + 30  # aging, plus band 9's own queueing

SHARDS = 4
SHARD_WORKERS = 10
SHARD_MEAN_MS = 1000.0
SHARD_LOAD = 1.0  # arrivals / capacity: a backlog forms and wanders
SHARD_RUN_MS = HOUR_MS
TARGET_SHARD_RATIO = 1.5


@dataclass(frozen=True)
class Batch:
    """`jobs` jobs of one tenant, all due at `at_ms`, each running `duration_ms` or, with `pareto`, a seeded
    Pareto draw of that mean."""

    tenant_id: str
    at_ms: float
    jobs: int
    duration_ms: float
    pareto: bool = False


@dataclass(frozen=True)
class Returning:
    """A returning-tenant pattern: tenants `busy` and `back` (weight 1, no cap) submit `batches`; what is
    measured is `back`'s share of the worker time used in the hour from `returns_at_ms`."""

    name: str
    batches: tuple[Batch, ...]
    returns_at_ms: float
    workers: int = RETURNING_WORKERS


def _backlog(tenant_id: str, at_ms: float, until_ms: float, workers: int = RETURNING_WORKERS) -> Batch:
    """Pareto jobs due at `at_ms`, enough to keep `workers` busy well past `until_ms`."""
    return Batch(tenant_id, at_ms, int(2 * workers * (until_ms - at_ms) / RETURNING_MEAN_MS), RETURNING_MEAN_MS,
                 pareto=True)


def returning_patterns() -> tuple[Returning, ...]:
    """The five ways a tenant returned to a pool `busy` had used alone for an hour that each let it take the
    whole pool for about an hour under the old floor (which lifted a returning tenant only when it had
    nothing running and another backlogged tenant had jobs running)."""
    hour, minute, end = HOUR_MS, MINUTE_MS, 2 * HOUR_MS
    idle_end = hour + 10 * minute + hour
    return (
        Returning("kept_one_long_job", (  # `back` holds one worker the whole time: it has a job running
            Batch("back", 0.0, 1, 3 * hour), _backlog("busy", 0.0, end), _backlog("back", hour, end)), hour),
        Returning("busy_has_running_none_waiting", (  # busy's waves of 60 s jobs: the last runs to 1:00:30
            Batch("busy", 30_000.0, 600, minute), _backlog("back", hour, end), _backlog("busy", hour + 20_000, end)),
            hour),
        Returning("pool_idle_after_busy_hour", (  # busy's jobs all end at 1:00; nothing runs until 1:10
            Batch("busy", 0.0, 600, minute), _backlog("busy", hour + 10 * minute, idle_end),
            _backlog("back", hour + 10 * minute, idle_end)), hour + 10 * minute),
        Returning("one_worker", (
            _backlog("busy", 0.0, end, workers=1), _backlog("back", hour, end, workers=1)), hour, workers=1),
        Returning("all_finish_together", (  # 60 s jobs in waves: all ten end at 1:00, when `back` arrives
            Batch("busy", 0.0, int(2 * RETURNING_WORKERS * end / minute), minute), _backlog("back", hour, end)),
            hour),
    )


class ReturningOutcome(NamedTuple):
    """`share`: `back`'s share of the worker time used in the hour after it returned. `running` / `waiting`:
    each tenant's jobs running and waiting at that instant, once its events are applied (before a worker
    is given out); `ended`: attempts that ended at that very instant."""

    share: float
    running: dict[str, int]
    waiting: dict[str, int]
    ended: int


def simulate_returning(pattern: Returning, seed: int = 1, *, clock_advances: bool = True) -> ReturningOutcome:
    """Run `pattern` with onward.domain.dispatch choosing the tenant, lifting and advancing the clock as the claim
    does. Every event of one instant (attempts ending, batches arriving) is applied before a worker is
    given out. `clock_advances=False` passes clock 0.0 to every decision, so nobody is ever lifted: the
    policy without its clock."""
    start, stop = pattern.returns_at_ms, pattern.returns_at_ms + HOUR_MS
    names = sorted({batch.tenant_id for batch in pattern.batches})
    policy = TenantPolicy()
    rngs = {name: random.Random(f"{seed}:{pattern.name}:{name}") for name in names}
    usage = {name: Usage() for name in names}
    due: dict[str, deque[list[Any]]] = {name: deque() for name in names}  # [jobs left, batch], oldest first
    waiting = dict.fromkeys(names, 0)
    measured = dict.fromkeys(names, 0.0)
    arrivals = sorted(pattern.batches, key=lambda batch: batch.at_ms)
    finishing: list[tuple[float, int, str, float]] = []
    free, clock, now, claims, next_batch = pattern.workers, 0.0, 0.0, 0, 0
    at_return: tuple[dict[str, int], dict[str, int], int] | None = None
    returned: dict[str, bool] = dict.fromkeys(names, True)

    while True:
        while next_batch < len(arrivals) and arrivals[next_batch].at_ms <= now:
            batch = arrivals[next_batch]
            due[batch.tenant_id].append([batch.jobs, batch])
            if not waiting[batch.tenant_id]:  # it returns: lifted to the clock if below (QueueEntry.returned_at)
                returned[batch.tenant_id] = True
            waiting[batch.tenant_id] += batch.jobs
            next_batch += 1
        ended = 0
        while finishing and finishing[0][0] <= now:
            _, _, name, claimed_at = heapq.heappop(finishing)
            usage[name] = usage[name].apply(on_end(claimed_at, now))
            free += 1
            ended += 1
        if at_return is None and now >= start:
            at_return = ({name: usage[name].running for name in names}, dict(waiting), ended)
        while free and any(waiting.values()):
            loads = [TenantLoad(name, policy, usage[name], waiting[name], returning=returned[name])
                     for name in names if waiting[name]]
            chosen, _flexed = dispatch_order(loads, now, clock if clock_advances else 0.0).first()  # type: ignore[misc]
            name = chosen.tenant_id
            if chosen.lift_offset_ms is not None:
                usage[name] = usage[name].lifted(chosen.lift_offset_ms)
            if clock_advances:
                clock = advance_clock(clock, chosen)
            returned[name] = False  # served: it stays backlogged until its queue empties
            head = due[name][0]
            head[0] -= 1
            batch = head[1]
            if not head[0]:
                due[name].popleft()
            waiting[name] -= 1
            duration = pareto_ms(rngs[name], batch.duration_ms) if batch.pareto else batch.duration_ms
            usage[name] = usage[name].apply(on_claim(now))
            heapq.heappush(finishing, (now + duration, claims, name, now))
            measured[name] += max(0.0, min(now + duration, stop) - max(now, start))
            claims += 1
            free -= 1
        upcoming = arrivals[next_batch].at_ms if next_batch < len(arrivals) else math.inf
        now = min(upcoming, finishing[0][0] if finishing else math.inf)
        if now >= stop:
            break
    total = sum(measured.values())
    running, waiting_then, ended_then = at_return or ({}, {}, 0)
    return ReturningOutcome(measured["back"] / total if total else 0.0, running, waiting_then, ended_then)


def simulate_priority(seed: int = 1, *, aging: bool = True) -> dict[str, Any]:
    """One tenant, PRIORITY_WORKERS workers: band 9 always has HIGH_BAND_DUE jobs due (more than the pool
    can ever run), band-0 jobs arrive now and then. A free worker serves the first band of `band_order`
    over the bands' oldest due jobs (`aging`), or the highest band (strict priority). Band-0 jobs still
    waiting at the end count with the wait so far."""
    duration_rng = random.Random(f"{seed}:priority:duration")
    arrival_rng = random.Random(f"{seed}:priority:arrivals")
    bands: dict[int, deque[float]] = {HIGH_BAND: deque([0.0] * HIGH_BAND_DUE), LOW_BAND: deque()}
    waits: dict[int, list[float]] = {HIGH_BAND: [], LOW_BAND: []}
    finishing: list[float] = []
    free, now = PRIORITY_WORKERS, 0.0
    next_low = arrival_rng.expovariate(1 / LOW_BAND_EVERY_MS)
    while now < PRIORITY_RUN_MS:
        while free:
            heads = {band: queue[0] for band, queue in bands.items() if queue}
            band = band_order(heads, int(now))[0] if aging else max(heads)
            waits[band].append(now - bands[band].popleft())
            if band == HIGH_BAND:
                bands[HIGH_BAND].append(now)
            heapq.heappush(finishing, now + pareto_ms(duration_rng, PRIORITY_MEAN_MS))
            free -= 1
        if finishing[0] <= next_low:
            now = heapq.heappop(finishing)
            free += 1
        else:
            now = next_low
            bands[LOW_BAND].append(now)
            next_low = now + arrival_rng.expovariate(1 / LOW_BAND_EVERY_MS)
    end = min(now, PRIORITY_RUN_MS)
    low = waits[LOW_BAND] + [end - due_at for due_at in bands[LOW_BAND]]
    return {
        "low_band_jobs": len(low),
        "low_band_never_started": len(bands[LOW_BAND]),
        "low_band_p50_wait_s": percentile(sorted(low), 0.5) / 1000,
        "low_band_max_wait_s": max(low, default=0.0) / 1000,
        "high_band_max_wait_s": max(waits[HIGH_BAND], default=0.0) / 1000,
        "simulated_min": PRIORITY_RUN_MS / MINUTE_MS,
    }


class ShardOrder(StrEnum):
    OLDEST_DUE_FIRST = "oldest_due_first"  # Onward's: the shard whose oldest due job is oldest
    SHARD0_FIRST = "shard0_first"  # the old order: the lowest-numbered shard with a due job
    ROTATION = "rotation"  # for comparison: the least recently served shard with a due job


def simulate_shards(seed: int = 1, order: ShardOrder = ShardOrder.OLDEST_DUE_FIRST) -> dict[str, Any]:
    """One tenant with SHARDS ready shards, SHARD_WORKERS workers, Poisson arrivals at SHARD_LOAD of the
    pool, each job hashed to a shard at random; within a shard jobs go in due order, and a free worker
    serves the shard `order` picks among those with a due job. Waits per shard, and the slowest shard's
    p99 over the fastest's."""
    duration_rng = random.Random(f"{seed}:shards:duration")
    arrival_rng = random.Random(f"{seed}:shards:arrivals")
    rate = SHARD_LOAD * SHARD_WORKERS / SHARD_MEAN_MS
    queues: list[deque[float]] = [deque() for _ in range(SHARDS)]
    waits: list[list[float]] = [[] for _ in range(SHARDS)]
    served_at = [0] * SHARDS  # claim number of each shard's last claim
    finishing: list[float] = []
    free, claims, now = SHARD_WORKERS, 0, 0.0
    next_arrival = arrival_rng.expovariate(rate)
    while now < SHARD_RUN_MS:
        while free and any(queues):
            ready = [shard for shard in range(SHARDS) if queues[shard]]
            if order is ShardOrder.ROTATION:
                shard = min(ready, key=served_at.__getitem__)
            elif order is ShardOrder.SHARD0_FIRST:
                shard = ready[0]
            else:
                shard = min(ready, key=lambda ready_shard: queues[ready_shard][0])
            claims += 1
            served_at[shard] = claims
            waits[shard].append(now - queues[shard].popleft())
            heapq.heappush(finishing, now + pareto_ms(duration_rng, SHARD_MEAN_MS))
            free -= 1
        if finishing and finishing[0] <= next_arrival:
            now = heapq.heappop(finishing)
            free += 1
        else:
            now = next_arrival
            queues[int(arrival_rng.random() * SHARDS)].append(now)
            next_arrival = now + arrival_rng.expovariate(rate)
    p99 = [percentile(sorted(shard_waits), 0.99) / 1000 for shard_waits in waits]
    return {
        "p50_wait_s": [round(percentile(sorted(shard_waits), 0.5) / 1000, 3) for shard_waits in waits],
        "p99_wait_s": [round(value, 3) for value in p99],
        "p99_ratio": max(p99) / min(p99) if min(p99) else (1.0 if max(p99) == 0 else None),
        "jobs": sum(len(shard_waits) for shard_waits in waits),
    }


def run_scenarios(seed: int = 1) -> dict[str, Any]:
    """The returning-tenant patterns (with the clock, and without it to show the hole), the priority
    scenario (aged bands, and strict priority) and the shard scenario (each order), summarised."""
    started = time.perf_counter()
    patterns = returning_patterns()
    return {
        "returning": {
            "share": {pattern.name: simulate_returning(pattern, seed).share for pattern in patterns},
            "share_without_clock": {pattern.name: simulate_returning(pattern, seed, clock_advances=False).share
                                    for pattern in patterns},
        },
        "priority": {"aged": simulate_priority(seed), "strict": simulate_priority(seed, aging=False)},
        "shards": {order.value: simulate_shards(seed, order) for order in ShardOrder},
        "wall_s": round(time.perf_counter() - started, 2),
    }

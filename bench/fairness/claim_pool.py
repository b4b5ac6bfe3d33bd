"""Onward's side of the fairness bench: the REAL claim (onward.store.claims) on a simulated pool of worker processes.

Each simulated worker process is its own JobStore (its own `active` head cache, settings cache, shared
counters and a copy of the clock), all over ONE in-memory table (onward.store.memory's MemoryRecorder), so what
a claim sees is what it would see on DynamoDB: the window of CANDIDATE_TENANTS, the head cache, the lift, the
re-keying, caps that flex. The clock is simulated (each process's ManualClock is set to the simulated moment
before it claims or reports), so hours of durations cost only the store's own work.

The pool: the scenario's 100 workers in processes of WORKERS_PER_PROCESS (25 processes), 4 per process
because that is `onward worker --concurrency`'s default: a deployment scales out ECS tasks of a few
workers each (`--processes` takes another split; 10 of 10 is reported in docs/performance.md). A free
worker claims at once; a worker whose claim found nothing polls again after `onward worker`'s idle delay
(0.5 s doubling to 2 s, jittered), as a real one does.

What differs from the scenarios' ideal simulation (bench/fairness/simulator.py), and why it does not change
what is measured: a tenant with a backlog due at t=0 too large for the memory store (2,000,000 jobs) gets
its backlog topped up instead: back to TOP_UP_BELOW waiting jobs or more after each round of claims (more
than the pool can claim in one), each created due at t=0 (the API process's clock copy reads t=0 when it
creates them), so it is backlogged the whole run as its 2,000,000 would keep it; and the run stops when
the small tenants' arrivals are over and each small job has started (or at the scenario's stop time),
after at most ONWARD_MAX_MS of simulated time. The small tenants' arrivals are the same Poisson process as
the ideal simulation's (the same seed), cut short there.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from bench.fairness.simulator import (
    Outcome,
    Scenario,
    charge_windows,
    close_backlog_spans,
    jain_per_window,
    next_arrival_after,
    pareto_ms,
)
from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import ManualClock
from onward.domain.models import Lease, NewJob
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import Tenant
from onward.store.service import JobStore

WORKERS_PER_PROCESS = 4  # `onward worker --concurrency`'s default
IDLE_S, IDLE_MAX_S = 0.5, 2.0  # `onward worker`'s idle polling (onward.runtime.worker.Worker's defaults)
LEASE_S = 7 * 24 * 3600.0  # longer than any simulated attempt (no reaper runs here)
TOP_UP_BELOW = 150  # a topped-up backlog's waiting jobs after each round of claims, at least
TOP_UP_BATCH = 50
ONWARD_MAX_MS = 10 * 60_000  # the real claim's run is at most this long (simulated)
START_MS = 1_800_000_000_000  # the simulated t=0, as epoch ms
WORK = NewJob(type="fair.work", params={})


@dataclass
class _Process:
    store: JobStore
    clock: ManualClock

    def at(self, now: float) -> JobStore:
        self.clock.now = START_MS + int(now)
        return self.store


def simulate_claims(scenario: Scenario, *, processes: int | None = None, max_ms: float = ONWARD_MAX_MS) -> Outcome:
    """Run `scenario` with Onward's real claim choosing every job (see the module's docstring): the same
    measures as `simulate`, over at most `max_ms` of simulated time."""
    workers = scenario.workers
    processes = processes or max(1, workers // WORKERS_PER_PROCESS)
    table = MemoryRecorder()
    clocks = [ManualClock(START_MS) for _ in range(processes)]
    pool = [_Process(JobStore.in_memory(clock=clock, recorder=table, rng=random.Random(f"{scenario.seed}:p{n}")), clock)
            for n, clock in enumerate(clocks)]
    api_clock = ManualClock(START_MS)  # the API process's, which creates the jobs
    api = _Process(JobStore.in_memory(clock=api_clock, recorder=table), api_clock)
    tenants = scenario.tenants
    count = len(tenants)
    index_of = {spec.tenant_id: n for n, spec in enumerate(tenants)}
    for spec in tenants:
        api.store.register_tenant(Tenant(spec.tenant_id, spec.policy))
    small_ids = [n for n in range(count) if tenants[n].small]
    topped = [spec.backlog_at_start > 0 for spec in tenants]
    duration_rngs = [random.Random(f"{scenario.seed}:duration:{n}") for n in range(count)]
    idle = BackoffPolicy(base_s=IDLE_S, cap_s=IDLE_MAX_S)
    idle_rng = random.Random(f"{scenario.seed}:idle")

    arrival_rng = random.Random(f"{scenario.seed}:arrivals")
    rate = scenario.arrival_rate_per_ms
    until = min(scenario.arrivals_until_ms, max_ms)
    stop_at = scenario.stop_at_ms if small_ids else min(scenario.stop_at_ms, max_ms)
    next_arrival = arrival_rng.expovariate(rate) if rate > 0 and small_ids else math.inf
    if next_arrival > until:
        next_arrival = math.inf

    waiting = [0] * count
    created_at: dict[str, float] = {}  # small jobs: job id -> created (due) at

    def top_up() -> None:
        for n in range(count):
            while topped[n] and waiting[n] < TOP_UP_BELOW:
                store = api.at(0.0)
                for _ in range(TOP_UP_BATCH):
                    store.create(tenants[n].tenant_id, WORK)
                waiting[n] += TOP_UP_BATCH

    # Events: (time, kind, sequence, worker, lease): kind 0 an attempt ends (its lease), 1 an idle worker polls.
    events: list[tuple[float, int, int, int, Lease | None]] = []
    free: list[int] = list(range(workers))  # workers to give a claim now
    empty_claims = [0] * workers
    running: set[int] = set()
    out = Outcome(workers=workers, worker_ms=[0.0] * count)
    backlog_since: list[float | None] = [0.0 if topped[n] else None for n in range(count)]
    spans: list[list[tuple[float, float]]] = [[] for _ in range(count)]
    window_ms: list[dict[int, float]] = [{} for _ in range(count)]
    small_waiting = 0
    now = last = 0.0
    sequence = 0
    top_up()

    while True:
        for worker in free:
            process = pool[worker * processes // workers]
            lease = process.at(now).claim(f"p{worker * processes // workers}-w{worker}", LEASE_S)
            if lease is None:
                empty_claims[worker] += 1
                sequence += 1
                poll = now + 1000 * idle.delay(empty_claims[worker], idle_rng)
                heapq.heappush(events, (poll, 1, sequence, worker, None))
                continue
            empty_claims[worker] = 0
            tenant = index_of[lease.job.tenant_id]
            waiting[tenant] -= 1
            if tenants[tenant].small:
                out.small_waits_ms.append(now - created_at.pop(lease.job_id))
                small_waiting -= 1
            if not waiting[tenant] and not topped[tenant]:
                spans[tenant].append((backlog_since[tenant], now))  # type: ignore[arg-type]  # it was waiting
                backlog_since[tenant] = None
            finish = now + pareto_ms(duration_rngs[tenant], tenants[tenant].mean_duration_ms)
            cut = min(finish, stop_at)
            charge_windows(window_ms[tenant], now, cut)
            out.worker_ms[tenant] += max(0.0, cut - now)
            sequence += 1
            heapq.heappush(events, (finish, 0, sequence, worker, lease))
            running.add(worker)
            out.jobs += 1
        free = []
        top_up()

        arrivals_over = next_arrival == math.inf
        if arrivals_over and small_ids and not small_waiting:
            break  # every small job has started: what is measured is over
        upcoming = events[0][0] if events else math.inf
        now = min(upcoming, next_arrival)
        if now == math.inf or now > stop_at:
            now = stop_at if stop_at != math.inf else last
            _integrate(out, len(running), now - last, sum(waiting))
            break
        _integrate(out, len(running), now - last, sum(waiting))
        last = now
        while events and events[0][0] <= now:
            _, _, _, worker, lease = heapq.heappop(events)
            if lease is not None:
                pool[worker * processes // workers].at(now).complete(lease)
                running.discard(worker)
            free.append(worker)
        if next_arrival <= now:
            tenant = small_ids[int(arrival_rng.random() * len(small_ids))]
            created = api.at(now).create(tenants[tenant].tenant_id, WORK)
            created_at[created.job.job_id] = now
            if not waiting[tenant]:
                backlog_since[tenant] = now
            waiting[tenant] += 1
            small_waiting += 1
            next_arrival = next_arrival_after(arrival_rng, now, rate, until)

    close_backlog_spans(backlog_since, spans, now)
    out.end_ms = now
    out.jain = jain_per_window(spans, window_ms, [spec.policy for spec in tenants])
    return out


def _integrate(out: Outcome, busy: int, span: float, waiting: int) -> None:
    """Utilisation's sums over `span`, counted while a job waits."""
    if span > 0 and waiting:
        out.due_ms += span
        out.busy_while_due_ms += busy * span


"""Rate limits (issue 37): a rate-limited job type under a burst beside unlimited work, and what a limit costs a
claim in DynamoDB read and write units at 10 and 10,000 keys. The real store (onward.store.service over the
in-memory recorder, the same conditions as on DynamoDB) on a simulated clock and pool of worker slots.

    .venv/bin/python -m bench.rate_limits [--json] [--jobs N] [--limit N] [--period-s S] [--workers N]

The burst: N jobs of a type limited to `limit` per `period_s`, created at once beside as many jobs of an
unlimited type; every tick (TICK_MS) each free worker slot claims, and a job runs RUN_MS. Reports the most
limited starts in any window of one period against what GCRA allows (limit + floor(w / T)), the rate over the
run against the limit (the burst of `limit` left out), and whether the workers stayed busy while unlimited
work waited.

The cost: one tenant's jobs spread over K keys, each limited (2 jobs a key: one takes a token at once, one
reserves its own), claimed to the end. Each recorder call is priced as DynamoDB bills it for items under 1 KB:
a definition read 0.5 read units a key (eventually consistent BatchGetItem), a bucket read 1 a key (strongly
consistent), 2 write units per bucket a transaction writes, and a reservation's job row 2 and its `ready`
index entry move 2 (a delete and a put: the due time is the index's sort key).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Collection
from typing import Any

from onward.domain.clock import ManualClock
from onward.domain.models import NewJob
from onward.domain.rate_limits import Gcra, max_starts
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import CommitOutcome, TransitionWrite
from onward.store.ports.rate_buckets import RateLimitDefinition, Reservation, ReserveOutcome
from onward.store.service import JobStore

TICK_MS = 5
RUN_MS = 20
LIMITED, FREE = "bench.limited", "bench.free"


class MeteredRecorder(MemoryRecorder):
    """The in-memory recorder, pricing its rate limit calls in DynamoDB units (the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.units: Counter[str] = Counter()

    def rate_limits_of(self, tenant_id: str, keys: Collection[str]) -> dict[str, RateLimitDefinition]:
        self.units["read_units"] += 0.5 * len(keys)
        return super().rate_limits_of(tenant_id, keys)

    def bucket_tats(self, tenant_id: str, keys: Collection[str]) -> dict[str, int]:
        self.units["read_units"] += len(keys)
        return super().bucket_tats(tenant_id, keys)

    def reserve(self, reservation: Reservation) -> ReserveOutcome:
        self.units["write_units"] += 2 + 2 + 2 * len(reservation.moves)  # (also paid when refused)
        return super().reserve(reservation)

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        if write.rate is not None:
            self.units["write_units"] += 2 * len(write.rate.moves)
        outcome = super().commit(write)
        if outcome is CommitOutcome.COMMITTED and write.change.open_run is not None:
            self.units["claims"] += 1
        return outcome


def burst(jobs: int = 600, limit: int = 50, period_s: float = 1.0, workers: int = 16) -> dict[str, Any]:
    """The burst scenario (the module's docstring)."""
    clock = ManualClock()
    store = JobStore.in_memory(clock=clock)
    store.rate_limits.put("acme", f"type:{LIMITED}", limit, period_s)
    for job_type in (LIMITED, FREE):
        for at in range(0, jobs, 100):
            store.create_batch("acme", [(NewJob(type=job_type), None) for _ in range(min(100, jobs - at))])
    running: list[tuple[int, object]] = []  # (ends at, lease)
    starts: list[int] = []
    free_started = idle_while_waiting = 0
    while len(starts) < jobs:
        for lease in [lease for ends, lease in running if ends <= clock.now]:
            store.complete(lease)  # type: ignore[arg-type]
        running = [(ends, lease) for ends, lease in running if ends > clock.now]
        while len(running) < workers and (lease := store.claim("w", 30)) is not None:
            running.append((clock.now + RUN_MS, lease))
            if lease.job.type == LIMITED:
                starts.append(clock.now)
            else:
                free_started += 1
        idle_while_waiting += int(len(running) < workers and free_started < jobs)
        clock.now += TICK_MS
    gcra = Gcra(limit, period_s)
    period_ms = period_s * 1000
    most = max(sum(1 for other in starts if start <= other <= start + period_ms) for start in starts)
    run_s = (starts[-1] - starts[0]) / 1000
    rate = (jobs - limit) / run_s if run_s else float("inf")
    nominal = limit / period_s
    return {"jobs": jobs, "limit": limit, "period_s": period_s, "workers": workers,
            "most_starts_in_a_period": most, "allowed_in_a_period": max_starts(gcra, period_ms),
            "rate_per_s": round(rate, 2), "limit_per_s": nominal, "rate_vs_limit": round(rate / nominal, 4),
            "never_over": all(sum(1 for other in starts if start <= other <= start + w) <= max_starts(gcra, w)
                              for start in starts for w in (period_ms / 4, period_ms, 2 * period_ms)),
            "ticks_with_an_idle_slot_while_unlimited_work_waited": idle_while_waiting}


def cost(keys: int, jobs_per_key: int = 2) -> dict[str, Any]:
    """What the limits cost per claim with `keys` keys of one tenant, each limited to 1 per second."""
    clock = ManualClock()
    recorder = MeteredRecorder()
    store = JobStore.in_memory(clock=clock, recorder=recorder)
    for key in range(keys):
        store.rate_limits.put("acme", f"key-{key}", 1, 1.0)
    entries = [(NewJob(type=LIMITED, rate_limit_key=f"key-{key}"), None) for key in range(keys)
               for _ in range(jobs_per_key)]
    for at in range(0, len(entries), 100):
        store.create_batch("acme", entries[at:at + 100])
    recorder.units.clear()
    while recorder.units["claims"] < len(entries):
        while (lease := store.claim("w", 30)) is not None:
            store.complete(lease)
        clock.now += 250
    claims = recorder.units["claims"]
    return {"keys": keys, "claims": claims,
            "read_units_per_claim": round(recorder.units["read_units"] / claims, 3),
            "write_units_per_claim": round(recorder.units["write_units"] / claims, 3),
            "reservations": store.rate_limits.limiter.reservations}


def run(jobs: int = 600, limit: int = 50, period_s: float = 1.0, workers: int = 16,
        keys: tuple[int, ...] = (10, 10_000)) -> dict[str, Any]:
    return {"burst": burst(jobs, limit, period_s, workers), "cost": [cost(count) for count in keys]}


def _table(report: dict[str, Any]) -> str:
    burst_ = report["burst"]
    lines = [f"burst of {burst_['jobs']} jobs limited to {burst_['limit']} per {burst_['period_s']} s "
             f"beside as many unlimited, {burst_['workers']} worker slots:",
             f"  most starts in any period {burst_['most_starts_in_a_period']} (GCRA allows "
             f"{burst_['allowed_in_a_period']}); never over: {burst_['never_over']}",
             f"  rate {burst_['rate_per_s']}/s against {burst_['limit_per_s']}/s: x{burst_['rate_vs_limit']}",
             f"  ticks with an idle slot while unlimited work waited: "
             f"{burst_['ticks_with_an_idle_slot_while_unlimited_work_waited']}",
             "cost per claim (2 jobs a key, each key 1 per second):"]
    lines += [f"  {row['keys']:>6} keys: {row['read_units_per_claim']} read units, {row['write_units_per_claim']} "
              f"write units per claim ({row['claims']} claims, {row['reservations']} reservations)"
              for row in report["cost"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rate_limits", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--period-s", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.jobs, args.limit, args.period_s, args.workers)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

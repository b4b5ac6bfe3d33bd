"""Concurrency keys (issue 37, item 2): 10,000 keys of one tenant with limit 1 (2 jobs each) beside a bulk tenant,
and what a key costs a claim in DynamoDB read and write units at 10 and 10,000 keys. The real store
(onward.store.service over the in-memory recorder, the same conditions as on DynamoDB) on a simulated clock and
pool of worker slots.

    .venv/bin/python -m bench.concurrency_keys [--json] [--keys N] [--bulk N] [--workers N]

The mix: tenant `keyed` creates 2 jobs on each of K keys (limit 1; the two jobs of a key next to each other in due
order, so a claim meets the second while the first runs and holds it), tenant `bulk` as many jobs with no key; both of
weight 1. Every tick (TICK_MS) each free worker slot claims, and a job runs RUN_MS. Reports the ticks that ended
with a free slot while runnable work waited (a bulk job, or a keyed job whose key had no job running: what a
claim could have started), the most jobs of one key ever running at once, and each tenant's share of the starts
while both had runnable work (fair share: about half each).

The cost: K keys of one tenant, 2 jobs a key, claimed in rounds (claims until none is left to start, then every
attempt ends), so each key's second job is held once and put back once. Each recorder call of the keys is priced as
DynamoDB bills it for items under 1 KB: the end's read of the key's item 1 read unit (strongly consistent GetItem);
when jobs are held, the held entries' Query 1 and the held row's GetItem 1; 2 write units per item a transaction
writes: the key's item in a claim and in an end, the held row and its entry in an end that puts one back, and a
hold's 4 items (the row, its held entry, its queue entry, the key's item). The rest of a claim (the job row, the
run record, the counters, the outbox event) is what any claim costs and is not counted here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from onward.domain.clock import ManualClock
from onward.domain.concurrency import ConcurrencyRule, KeyCount
from onward.domain.models import Lease, NewJob
from onward.domain.pauses import Pause
from onward.store.held_jobs import HeldJob
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import CommitOutcome, TransitionWrite
from onward.store.ports.concurrency_keys import KeyLimit, SlotReturn, SlotTake
from onward.store.ports.rows import JobRow
from onward.store.service import JobStore

TICK_MS = 5
RUN_MS = 20
JOB_TYPE = "bench.keyed"
BATCH = 100
MAX_TICKS = 1_000_000  # a mix that has not ended by then left jobs that never run


class MeteredRecorder(MemoryRecorder):
    """The in-memory recorder, pricing its concurrency key calls in DynamoDB units (the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.units: Counter[str] = Counter()
        held_jobs = self.held_jobs
        units = self.units

        class MeteredHeldJobs:
            def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None,
                     while_at_limit: KeyLimit | None = None) -> bool:
                units["write_units"] += 2 * 4 if while_at_limit is not None else 0  # (also paid when refused)
                units["holds"] += while_at_limit is not None
                return held_jobs.hold(row, hold_key, while_paused, while_at_limit)

            def held(self, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
                units["read_units"] += 1
                return held_jobs.held(hold_key, tenant_id, limit)

            def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
                units["read_units"] += 1
                return held_jobs.held_in(partition, tenant_id, limit)

            def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:
                return held_jobs.release(job_id, hold_key, clock, entry)

        self.held_jobs = MeteredHeldJobs()  # type: ignore[assignment]

    def key_count(self, tenant_id: str, key: str) -> KeyCount:
        self.units["read_units"] += 1
        return super().key_count(tenant_id, key)

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        slot = write.concurrency
        if isinstance(slot, SlotTake):
            self.units["write_units"] += 2
        elif isinstance(slot, SlotReturn):
            self.units["write_units"] += 2 + (2 * 2 if slot.release is not None else 0)
            self.units["read_units"] += 1 if slot.release is not None else 0  # (the held row's read)
        outcome = super().commit(write)
        if outcome is CommitOutcome.COMMITTED and write.change.open_run is not None:
            self.units["claims"] += 1
        return outcome


def _keyed_jobs(keys: int) -> list[tuple[NewJob, str | None]]:
    return [(NewJob(type=JOB_TYPE, concurrency=ConcurrencyRule(key=f"key-{key}", limit=1)), None)
            for key in range(keys) for _ in range(2)]


def _create(store: JobStore, tenant: str, entries: list[tuple[NewJob, str | None]]) -> None:
    for at in range(0, len(entries), BATCH):
        store.create_batch(tenant, entries[at:at + BATCH])


def mix(keys: int = 10_000, bulk: int | None = None, workers: int = 32) -> dict[str, Any]:
    """The mix scenario (the module's docstring)."""
    clock = ManualClock()
    store = JobStore.in_memory(clock=clock)
    bulk = 2 * keys if bulk is None else bulk
    keyed = _keyed_jobs(keys)
    for at in range(0, len(keyed), 2):  # (a key's two jobs next to each other in due order, each key a ms later)
        store.create_batch("keyed", keyed[at:at + 2])
        clock.now += 1
    _create(store, "bulk", [(NewJob(type="bench.bulk"), None) for _ in range(bulk)])
    left = Counter({f"key-{key}": 2 for key in range(keys)})  # keyed jobs not yet started, per key
    runnable = set(left)  # keys with a job not started and none running: what a claim could start
    running_keys: Counter[str] = Counter()
    running: list[tuple[int, Lease]] = []
    bulk_left = bulk
    idle_ticks = most_per_key = 0
    shares: Counter[str] = Counter()  # starts while both tenants had runnable work
    ticks = 0
    while bulk_left or left or running:
        ticks += 1
        if ticks > MAX_TICKS:
            raise RuntimeError(f"jobs never ran: {len(left)} keys with jobs not started")
        for _, lease in [(ends, lease) for ends, lease in running if ends <= clock.now]:
            store.complete(lease)
            if (key := lease.job.concurrency_key) is not None:
                running_keys[key] -= 1
                if left[key] and not running_keys[key]:
                    runnable.add(key)
        running = [(ends, lease) for ends, lease in running if ends > clock.now]
        while len(running) < workers:
            both = bulk_left > 0 and bool(runnable)
            lease = store.claim("w", 30)
            if lease is None:
                break
            running.append((clock.now + RUN_MS, lease))
            key = lease.job.concurrency_key
            if key is None:
                bulk_left -= 1
            else:
                left[key] -= 1
                running_keys[key] += 1
                runnable.discard(key)
                most_per_key = max(most_per_key, running_keys[key])
                if not left[key]:
                    del left[key]
            if both:
                shares[lease.job.tenant_id] += 1
        if len(running) < workers and (bulk_left or runnable):
            idle_ticks += 1
        clock.now += TICK_MS
    both_total = sum(shares.values())
    return {"keys": keys, "bulk_jobs": bulk, "workers": workers, "jobs": 2 * keys + bulk,
            "ticks_with_an_idle_slot_while_runnable_work_waited": idle_ticks,
            "most_running_of_one_key": most_per_key, "holds": store.concurrency.holds,
            "keyed_share_while_both_had_work": round(shares["keyed"] / both_total, 3) if both_total else None,
            "bulk_share_while_both_had_work": round(shares["bulk"] / both_total, 3) if both_total else None}


def cost(keys: int) -> dict[str, Any]:
    """What the keys cost per claim with `keys` keys of one tenant, limit 1, 2 jobs each: every round claims all
    it can (each key's second job is held), then every attempt ends (each puts its key's held job back)."""
    clock = ManualClock()
    recorder = MeteredRecorder()
    store = JobStore.in_memory(clock=clock, recorder=recorder)
    entries = _keyed_jobs(keys)
    _create(store, "acme", entries)
    recorder.units.clear()
    while recorder.units["claims"] < len(entries):
        leases = []
        while (lease := store.claim("w", 30)) is not None:
            leases.append(lease)
        for lease in leases:
            store.complete(lease)
        clock.now += TICK_MS
    claims = recorder.units["claims"]
    return {"keys": keys, "claims": claims, "holds": recorder.units["holds"],
            "read_units_per_claim": round(recorder.units["read_units"] / claims, 3),
            "write_units_per_claim": round(recorder.units["write_units"] / claims, 3)}


def run(keys: int = 10_000, bulk: int | None = None, workers: int = 32,
        cost_keys: tuple[int, ...] = (10, 10_000)) -> dict[str, Any]:
    return {"mix": mix(keys, bulk, workers), "cost": [cost(count) for count in cost_keys]}


def _table(report: dict[str, Any]) -> str:
    mix_ = report["mix"]
    lines = [f"{mix_['keys']} keys of limit 1 (2 jobs each) beside {mix_['bulk_jobs']} bulk jobs, "
             f"{mix_['workers']} worker slots:",
             f"  ticks with an idle slot while runnable work waited: "
             f"{mix_['ticks_with_an_idle_slot_while_runnable_work_waited']}",
             f"  most running of one key: {mix_['most_running_of_one_key']}; holds: {mix_['holds']}",
             f"  shares of starts while both had work: keyed {mix_['keyed_share_while_both_had_work']}, "
             f"bulk {mix_['bulk_share_while_both_had_work']}",
             "cost per claim (limit 1, 2 jobs a key; keys' items only):"]
    lines += [f"  {row['keys']:>6} keys: {row['read_units_per_claim']} read units, {row['write_units_per_claim']} "
              f"write units per claim ({row['claims']} claims, {row['holds']} holds)" for row in report["cost"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency_keys", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--bulk", type=int, default=None)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.keys, args.bulk, args.workers)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

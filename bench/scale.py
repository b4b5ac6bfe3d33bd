"""The AWS ceiling of the job store: the hottest partition key per job, by DynamoDB's per-partition limits.

    .venv/bin/python -m bench.scale [--json] [--jobs N] [--tenants N]

Runs the job store's whole path for each job (create, claim, complete: what the API and the workers do)
against the embedded endpoint with its meter (infra/onward_infra/metering.py), which charges every read and write unit
to the partition key of the table or index that pays it, as DynamoDB bills them. DynamoDB serves at most
1,000 write units and 3,000 read units per second per partition, so the platform's ceiling is where the
hottest key reaches one of them:

    aws_ceiling_jobs_per_s = min(1,000 / hottest_key_write_units_per_job, 3,000 / hottest_key_read_units_per_job)

Two workloads: `many_tenants` (1,000 tenants, a few jobs each, created interleaved) and `one_tenant` (one
tenant with 8 ready shards, every job its), on the deployed topology (template.yaml's ActiveShards). Settings
registration is setup, not per-job work, and is not metered. Reads a process makes once per period whatever
its rate (the head of the `active` index, every HEAD_CACHE_MS; the system clock, CLOCK_REFRESH_MS; a
tenant's settings, TENANT_CACHE_MS) cost per job what they cost at the process's rate: the store runs on a
clock that advances 1 / PROCESS_JOBS_PER_S per job (a busy worker process), not on this machine's, where
the embedded endpoint runs a hundred times slower than DynamoDB and every period would hold a few jobs.

`realistic`: the same two workloads as they run (bench/scale_realistic.py): jobs arrive at a steady rate while
others are claimed, take 100 ms - 1 s each on a virtual clock, complete with a result, and the relay and the
projector carry their events to the status view through their real handlers. Every table, index and stream
shard they touch is counted per key (bench/scale_limits.py): `aws_ceiling_jobs_per_s` is the least ceiling
over every DynamoDB partition (1,000 write / 3,000 read units a second) and every shard of the events stream
as template.yaml deploys it (1,000 records / 1 MiB a second), `limited_by` names that resource;
`write_units_by_item` says what pays its write units per job (bench/scale_items.py: the job row, its run
records, the tenant's queue entries and RUNNING counters, outbox events, each index, ...). Its cost
(bench/scale_cost.py) at on-demand list prices: `usd_per_million_jobs` and its breakdown (the many-tenants
run's at top level; each run's in its section).

`claim_read_units`: the read units of one claim by a process with cold caches (the worst case: every
read it can make), with 10, 1,000 and 10,000 registered tenants of which 10 have jobs waiting, and
`claim_read_units_backlogged` with 10 and 1,000 tenants all with jobs waiting. Targets: ceiling >= 10,000
jobs/s for many tenants and >= 1,000 for one tenant (both for the realistic workloads too), claim read units flat
within 1.5x, write units per job <= 40, under $20 per million jobs. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from typing import Any

from bench.scale_cost import usd_per_million_jobs
from bench.scale_limits import summary
from bench.scale_realistic import Simulation, Workload, seeded_job_ids
from onward.domain.models import NewJob
from onward.settings import Settings
from onward.store.ports import Tenant
from onward.store.service import JobStore
from onward_infra.endpoint import REGION, EmbeddedEndpoint
from onward_infra.metering import Meter, MeterReading
from onward_infra.template import load_template

PARTITION_WRITE_UNITS = 1_000
PARTITION_READ_UNITS = 3_000
TARGET_MANY_TENANTS = 10_000
TARGET_ONE_TENANT = 1_000
TARGET_FLATNESS = 1.5
TARGET_WRITE_UNITS = 40
TARGET_USD_PER_MILLION_JOBS = 20.0
MANY_TENANTS = 1_000
JOBS_PER_TENANT = 3
ONE_TENANT_JOBS = 3_000
ONE_TENANT_SHARDS = 8
CLAIMS_MEASURED = 5
AWS_ACTIVE_SHARDS = int(load_template()["Parameters"]["ActiveShards"]["Default"])  # as `sam deploy` sets it
PROCESS_JOBS_PER_S = 200
REALISTIC_JOBS = 3_000
REALISTIC_RATE_PER_S = 200.0  # arrivals; 4 processes of 32 slots running jobs of 0.55 s on average keep up
REALISTIC_PROCESSES = 4
REALISTIC_SLOTS = 32
NOOP = NewJob(type="demo.echo", params={"n": 1})


class Stack:
    """A fresh stack of template.yaml on the metered endpoint."""

    def __init__(self, endpoint: EmbeddedEndpoint, meter: Meter, name: str) -> None:
        self.endpoint, self.meter = endpoint, meter
        deployed = Settings.from_environment(endpoint.deploy(name).environment)
        self.settings = dataclasses.replace(deployed, active_shards=AWS_ACTIVE_SHARDS)

    def store(self, clock: ProcessClock | None = None, rng: random.Random | None = None) -> JobStore:
        """A store with cold caches, as a new process has; with `rng`, its job ids drawn from it."""
        ids = {"new_job_id": seeded_job_ids(rng)} if rng is not None else {}
        return JobStore(self.settings, client=self.endpoint.client("dynamodb"), clock=clock or ProcessClock(), **ids)


class ProcessClock:
    """Epoch ms that advance by one job's share of a second at PROCESS_JOBS_PER_S each time `tick()` is
    called (once per job created and once per job run)."""

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now

    def tick(self) -> None:
        self.now += max(1, 1000 // PROCESS_JOBS_PER_S)


def _per_job(reading: MeterReading, jobs: int) -> dict[str, Any]:
    hot_write_key, hot_write = reading.hottest("write")
    hot_read_key, hot_read = reading.hottest("read")
    write_per_job, read_per_job = hot_write / jobs, hot_read / jobs
    ceiling = min(PARTITION_WRITE_UNITS / write_per_job if write_per_job else float("inf"),
                  PARTITION_READ_UNITS / read_per_job if read_per_job else float("inf"))
    return {
        "jobs": jobs,
        "hottest_write_key": hot_write_key,
        "hottest_key_write_units_per_job": round(write_per_job, 4),
        "hottest_read_key": hot_read_key,
        "hottest_key_read_units_per_job": round(read_per_job, 4),
        "aws_ceiling_jobs_per_s": round(ceiling),
        "write_units_per_job": round((reading.table_write_units + reading.index_write_units) / jobs, 2),
        "read_units_per_job": round(reading.read_units / jobs, 2),
        "requests_per_job": round(sum(reading.requests.values()) / jobs, 2),
    }


def _drain(store: JobStore, clock: ProcessClock, jobs: int) -> None:
    done = 0
    while done < jobs:
        clock.tick()
        lease = store.claim("bench-worker", 60)
        if lease is None:
            raise RuntimeError(f"a claim found nothing with {jobs - done} jobs left")
        store.complete(lease, {"ok": True})
        done += 1


def many_tenants(stack: Stack, tenants: int, per_tenant: int, rng: random.Random,
                 ids: random.Random) -> dict[str, Any]:
    clock = ProcessClock()
    store = stack.store(clock, ids)
    names = [f"t{n:05d}" for n in range(tenants)]
    for name in names:
        store.register_tenant(Tenant(name))
    order = [name for name in names for _ in range(per_tenant)]
    rng.shuffle(order)
    stack.meter.reset()
    for name in order:
        clock.tick()
        store.create(name, NOOP)
    _drain(store, clock, len(order))
    return _per_job(stack.meter.reset(), len(order))


def one_tenant(stack: Stack, jobs: int, ids: random.Random) -> dict[str, Any]:
    clock = ProcessClock()
    store = stack.store(clock, ids)
    store.register_tenant(Tenant("solo", ready_shards=ONE_TENANT_SHARDS))
    stack.meter.reset()
    for _ in range(jobs):
        clock.tick()
        store.create("solo", NOOP)
    _drain(store, clock, jobs)
    return _per_job(stack.meter.reset(), jobs)


def claim_read_units(stack: Stack, registered: int, backlogged: int) -> float:
    """Mean read units of a claim (and the complete that frees its worker is not counted) by a store with
    cold caches, with `registered` tenants of which `backlogged` have 2 jobs waiting each."""
    store = stack.store()
    for n in range(registered):
        store.register_tenant(Tenant(f"r{n:05d}"))
    for n in range(backlogged):
        for _ in range(2):
            store.create(f"r{n:05d}", NOOP)
    units = []
    for _ in range(CLAIMS_MEASURED):
        cold = stack.store()
        stack.meter.reset()
        lease = cold.claim("bench-worker", 60)
        units.append(stack.meter.reset().read_units)
        assert lease is not None, "a claim with jobs waiting found none"
    return round(sum(units) / len(units), 2)


@dataclasses.dataclass(frozen=True)
class Realistic:
    """The realistic workloads' size: jobs each, their arrival rate, worker processes and slots per process."""

    jobs: int = REALISTIC_JOBS
    rate_per_s: float = REALISTIC_RATE_PER_S
    processes: int = REALISTIC_PROCESSES
    slots: int = REALISTIC_SLOTS


def _deployed_settings(environment: dict[str, str]) -> Settings:
    return dataclasses.replace(Settings.from_environment(environment), active_shards=AWS_ACTIVE_SHARDS)


def realistic(endpoint: EmbeddedEndpoint, meter: Meter, stack_names: Any, tenants: int, size: Realistic,
              rng: random.Random) -> dict[str, Any]:
    """Both realistic workloads, each on a fresh stack: their ceilings over every resource, and their cost
    with the events stream sized for the workload's target rate."""
    workloads = (
        (Workload("many_tenants", tuple(f"t{n:05d}" for n in range(tenants)), 1, size.jobs, size.rate_per_s,
                  size.processes, size.slots), TARGET_MANY_TENANTS),
        (Workload("one_tenant", ("solo",), ONE_TENANT_SHARDS, size.jobs, size.rate_per_s, size.processes,
                  size.slots), TARGET_ONE_TENANT),
    )
    figures = {}
    for workload, target_rate in workloads:
        run = Simulation(endpoint, meter, next(stack_names), _deployed_settings, workload, rng).run()
        cost = usd_per_million_jobs(run, target_rate)
        figures[workload.name] = {**summary(run), "usd_per_million_jobs": cost.pop("usd_per_million_jobs"),
                                  "cost": cost}
    return figures


REGISTERED = (10, 1_000, 10_000)
BACKLOGGED = (10, 1_000)


def run(tenants: int = MANY_TENANTS, one_tenant_jobs: int = ONE_TENANT_JOBS, seed: int = 1, *,
        registered: tuple[int, ...] = REGISTERED, backlogged: tuple[int, ...] = BACKLOGGED,
        realistic_size: Realistic = Realistic()) -> dict[str, Any]:
    started = time.perf_counter()
    rng = random.Random(seed)
    meter = Meter(REGION)
    report: dict[str, Any] = {}
    with EmbeddedEndpoint(meter=meter) as endpoint:
        stacks = iter(range(100))
        names = (f"scale-{n}" for n in stacks)

        def fresh() -> Stack:
            return Stack(endpoint, meter, next(names))

        ids = random.Random(seed + 1_000)  # the easy workloads' job ids (rng's draws stay the realistic runs')
        report["many_tenants"] = many_tenants(fresh(), tenants, JOBS_PER_TENANT, rng, ids)
        report["one_tenant"] = one_tenant(fresh(), one_tenant_jobs, ids)
        report["claim_read_units"] = {str(n): claim_read_units(fresh(), n, min(10, n)) for n in registered}
        report["claim_read_units_backlogged"] = {str(n): claim_read_units(fresh(), n, n) for n in backlogged}
        report["realistic"] = realistic(endpoint, meter, names, tenants, realistic_size, rng)
    report["usd_per_million_jobs"] = report["realistic"]["many_tenants"]["usd_per_million_jobs"]
    report["usd_per_million_jobs_breakdown"] = report["realistic"]["many_tenants"]["cost"]["breakdown"]
    report["targets"] = targets(report)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    return report


def _flatness(units: dict[str, float]) -> float:
    return max(units.values()) / min(units.values())


def _at_least(value: float, bound: float) -> dict[str, Any]:
    return {"value": value, "at_least": bound, "met": value >= bound}


def targets(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    many, one = report["many_tenants"], report["one_tenant"]
    real_many, real_one = report["realistic"]["many_tenants"], report["realistic"]["one_tenant"]
    flat, flat_backlogged = _flatness(report["claim_read_units"]), _flatness(report["claim_read_units_backlogged"])
    worst_writes = max(many["write_units_per_job"], one["write_units_per_job"])
    return {
        "many_tenants_ceiling": {"value": many["aws_ceiling_jobs_per_s"], "at_least": TARGET_MANY_TENANTS,
                                 "met": many["aws_ceiling_jobs_per_s"] >= TARGET_MANY_TENANTS},
        "one_tenant_ceiling": {"value": one["aws_ceiling_jobs_per_s"], "at_least": TARGET_ONE_TENANT,
                               "met": one["aws_ceiling_jobs_per_s"] >= TARGET_ONE_TENANT},
        "claim_read_units_flat": {"value": round(flat, 3), "at_most": TARGET_FLATNESS, "met": flat <= TARGET_FLATNESS},
        "claim_read_units_backlogged_flat": {"value": round(flat_backlogged, 3), "at_most": TARGET_FLATNESS,
                                             "met": flat_backlogged <= TARGET_FLATNESS},
        "write_units_per_job": {"value": worst_writes, "at_most": TARGET_WRITE_UNITS,
                                "met": worst_writes <= TARGET_WRITE_UNITS},
        "realistic_many_tenants_ceiling": _at_least(real_many["aws_ceiling_jobs_per_s"], TARGET_MANY_TENANTS),
        "realistic_one_tenant_ceiling": _at_least(real_one["aws_ceiling_jobs_per_s"], TARGET_ONE_TENANT),
        "usd_per_million_jobs": {"value": report["usd_per_million_jobs"], "at_most": TARGET_USD_PER_MILLION_JOBS,
                                 "met": report["usd_per_million_jobs"] < TARGET_USD_PER_MILLION_JOBS},
    }


def _table(report: dict[str, Any]) -> str:
    lines = [f"{'':36}{'many_tenants':>16}{'one_tenant':>16}"]
    lines += [f"{key:36}{report['many_tenants'][key]:>16,}{report['one_tenant'][key]:>16,}"
              for key in ("jobs", "hottest_key_write_units_per_job", "hottest_key_read_units_per_job",
                          "aws_ceiling_jobs_per_s", "write_units_per_job", "read_units_per_job", "requests_per_job")]
    for workload in ("many_tenants", "one_tenant"):
        figures = report[workload]
        lines.append(f"{workload}: hottest write key {figures['hottest_write_key']}, "
                     f"hottest read key {figures['hottest_read_key']}")
    lines.append("claim read units (cold caches) by registered tenants (10 backlogged): "
                 + ", ".join(f"{n}: {units}" for n, units in report["claim_read_units"].items()))
    lines.append("claim read units by backlogged tenants: "
                 + ", ".join(f"{n}: {units}" for n, units in report["claim_read_units_backlogged"].items()))
    for workload, figures in report["realistic"].items():
        lines.append(f"realistic {workload}: {figures['jobs']:,} jobs arriving at {figures['arrival_rate_per_s']:g}/s, "
                     f"{figures['worker_slots']} slots in {figures['processes']} processes: AWS ceiling "
                     f"{figures['aws_ceiling_jobs_per_s']:,} jobs/s, limited by {figures['limited_by']}")
        lines += [f"    {found['resource']}: {found['per_job']} per job -> {found['ceiling_jobs_per_s']:,} jobs/s"
                  for found in figures["lowest_ceilings"][:4]]
        cost = figures["cost"]
        lines.append(f"    ${figures['usd_per_million_jobs']} per million jobs (mostly {cost['dominated_by']}): "
                     + ", ".join(f"{line} {usd}" for line, usd in cost["breakdown"].items()))
    for name, target in report["targets"].items():
        bound = f"<= {target['at_most']}" if "at_most" in target else f">= {target['at_least']}"
        lines.append(f"target {name}: {target['value']} {bound}: {'met' if target['met'] else 'MISSED'}")
    lines.append(f"in {report['wall_s']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--tenants", type=int, default=MANY_TENANTS, help="tenants of the many-tenants workload")
    parser.add_argument("--jobs", type=int, default=ONE_TENANT_JOBS, help="jobs of the one-tenant workload")
    args = parser.parse_args(argv)
    report = run(args.tenants, args.jobs)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0 if all(target["met"] for target in report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Where a paused type's holds write: jobs of one type of many tenants created while the type is paused, held aside
by the claims that meet them, then resumed, on a fresh stack of template.yaml on the embedded endpoint with its
meter; run twice side by side, with the held entries in one partition per hold key (as before the shards:
`HELD#paused#<type>`) and spread over the shards (onward.store.held_partitions: `HELD#paused#<type>#<n>`).

    .venv/bin/python -m bench.held_spread [--json] [--jobs N] [--tenants N]

Reports, for the holds and for the resume's release sweep, the write units the held entries' partitions took (a
hold's put and a release's delete, 2 units each in their transactions), over how many partitions, the hottest
one's share of them (1 / HELD_SHARDS when even) and the rate of holds of one type it allows at DynamoDB's 1,000
write units a second per partition; and the sweep's Queries of the held partitions.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from contextlib import ExitStack
from typing import Any
from unittest import mock

from bench.scale import ProcessClock, Stack
from bench.scale_limits import PARTITION_WRITE_UNITS
from onward.domain.models import NewJob
from onward.domain.pauses import Pause
from onward.store.dynamo import held_jobs as dynamo_held_jobs
from onward.store.ports.index_shards import HELD_SHARDS
from onward.store.service import JobStore
from onward_infra.endpoint import REGION, EmbeddedEndpoint
from onward_infra.metering import Meter, MeterReading

JOB_TYPE = "bench.paused"
HELD_MARK = "|HELD#"  # a held entry's partition in a meter key ("<table>|HELD#<partition>")


def held_units(by_key: Counter[str], jobs: int) -> dict[str, Any]:
    """The held partitions' units: in all, per job, over how many partitions, the hottest's share, and the rate
    of jobs of one type that partition allows."""
    held = {key.split(HELD_MARK, 1)[1]: units for key, units in by_key.items() if HELD_MARK in key}
    total = sum(held.values())
    if not total:
        return {"units_per_job": 0.0, "partitions": 0, "hottest_share": 0.0, "ceiling_jobs_per_s": None}
    hottest = max(held.values())
    return {"units_per_job": round(total / jobs, 2), "partitions": len(held),
            "hottest_share": round(hottest / total, 3),
            "ceiling_jobs_per_s": round(PARTITION_WRITE_UNITS / (hottest / jobs))}


def one_layout(endpoint: EmbeddedEndpoint, meter: Meter, name: str, jobs: int, tenants: int, seed: int,
               sharded: bool) -> dict[str, Any]:
    """Hold `jobs` jobs of a paused type (`tenants` tenants in turn), then resume it, on a fresh stack."""
    stack = Stack(endpoint, meter, name)
    rng = random.Random(seed)
    clock = ProcessClock()
    store = JobStore(stack.settings, client=endpoint.client("dynamodb"), clock=clock,
                     new_job_id=lambda: f"{rng.getrandbits(128):032x}")
    paused = Pause(job_type=JOB_TYPE)
    store.flow.pause(paused)
    for n in range(jobs):
        clock.tick()
        store.create(f"t{n % tenants:03d}", NewJob(type=JOB_TYPE, params={}))
    with ExitStack() as layout:
        if not sharded:  # (the hold as the release before the shards wrote it)
            layout.enter_context(mock.patch.object(dynamo_held_jobs, "entry_partition", lambda key, job_id: key))
        meter.reset()
        if store.claim("bench-worker", 60) is not None:
            raise RuntimeError("a claim started a job of a paused type")
        holding = meter.reset()
    released = store.flow.resume_and_release(paused)[1]
    sweeping = meter.reset()
    if released.released != jobs or released.more:
        raise RuntimeError(f"the resume put back {released.released} of {jobs} held jobs")
    return {"holds": held_units(holding.write_units_by_key, jobs),
            "releases": held_units(sweeping.write_units_by_key, jobs),
            "sweep_queries": _held_queries(sweeping)}


def _held_queries(reading: MeterReading) -> int:
    return reading.requests["dynamodb.Query"]


def run(jobs: int = 640, tenants: int = 20, seed: int = 1) -> dict[str, Any]:
    meter = Meter(REGION)
    with EmbeddedEndpoint(meter=meter) as endpoint:
        report: dict[str, Any] = {"jobs": jobs, "tenants": tenants, "shards": HELD_SHARDS}
        for layout, sharded in (("one_partition", False), ("sharded", True)):
            report[layout] = one_layout(endpoint, meter, f"held-{layout}", jobs, tenants, seed, sharded)
    report["ceiling_ratio"] = round(report["sharded"]["holds"]["ceiling_jobs_per_s"]
                                    / report["one_partition"]["holds"]["ceiling_jobs_per_s"], 1)
    return report


def _table(report: dict[str, Any]) -> str:
    lines = [f"{report['jobs']:,} jobs of one paused type, {report['tenants']} tenants; {report['shards']} shards"]
    for layout in ("one_partition", "sharded"):
        for step in ("holds", "releases"):
            figures = report[layout][step]
            lines.append(f"{layout:13} {step:8} {figures['units_per_job']} units/job over {figures['partitions']} "
                         f"partition(s), hottest {figures['hottest_share']:.1%} -> "
                         f"{figures['ceiling_jobs_per_s']:,} jobs/s of one type")
        lines.append(f"{layout:13} sweep    {report[layout]['sweep_queries']} Queries")
    lines.append(f"the shards raise the ceiling {report['ceiling_ratio']}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.held_spread", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=640)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.jobs, args.tenants)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

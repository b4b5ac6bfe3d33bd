"""What a tag costs: the one-tenant realistic workload (bench/scale_realistic.py) run twice side by side, its jobs
without tags and then every job carrying the same tags (env=prod: the tag every job of a tenant carries), each on
a fresh stack of template.yaml on the embedded endpoint with its meter.

    .venv/bin/python -m bench.tag_cost [--json] [--jobs N] [--tags N]

Reports write units per job with and without the tags (their difference per tag per job: what each tag adds),
the status table's share (view rows and tag entries) and the `by_tag` index's, the hottest `by_tag` partition's
write units per job and the ceiling it allows (DynamoDB's 1,000 write units a second per partition), the run's
ceiling over every resource and what limits it, and the cost per million jobs (bench/scale_cost.py) of both.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from typing import Any

from bench.scale import ONE_TENANT_SHARDS, TARGET_ONE_TENANT, Realistic, _deployed_settings
from bench.scale_cost import usd_per_million_jobs
from bench.scale_limits import PARTITION_WRITE_UNITS, billed, logical_names, readable, summary
from bench.scale_realistic import Run, Simulation, Workload
from onward_infra.endpoint import REGION, EmbeddedEndpoint
from onward_infra.metering import Meter

TAG_INDEX_MARK = ".by_tag|"


def tag_index_figures(run: Run) -> dict[str, Any]:
    """The `by_tag` index's write units per job (all its partitions) and its hottest partition's, with the
    ceiling that partition allows."""
    names = logical_names(run.environment)
    by_key = {readable(key, names): units for key, units in billed(run.reading.write_units_by_key).items()
              if TAG_INDEX_MARK in readable(key, names)}
    jobs = run.workload.jobs
    if not by_key:
        return {"write_units_per_job": 0.0, "partitions": 0, "hottest_partition": None,
                "hottest_write_units_per_job": 0.0, "hottest_ceiling_jobs_per_s": None}
    hottest = max(by_key, key=lambda key: by_key[key])
    per_job = by_key[hottest] / jobs
    return {"write_units_per_job": round(sum(by_key.values()) / jobs, 3), "partitions": len(by_key),
            "hottest_partition": hottest, "hottest_write_units_per_job": round(per_job, 3),
            "hottest_ceiling_jobs_per_s": round(PARTITION_WRITE_UNITS / per_job)}


def run(jobs: int = 1_000, tags: int = 1, seed: int = 1, size: Realistic | None = None) -> dict[str, Any]:
    """Both runs and their difference. `tags`: how many tags every job carries in the second (env=prod first);
    `size`: the arrival rate, processes and slots (bench.scale's realistic ones by default)."""
    size = size or Realistic()
    chosen = (("env", "prod"), *((f"k{n}", "v") for n in range(1, tags)))
    base = Workload("one_tenant", ("solo",), ONE_TENANT_SHARDS, jobs, size.rate_per_s, size.processes, size.slots)
    report: dict[str, Any] = {"jobs": jobs, "tags_per_job": tags}
    meter = Meter(REGION)
    with EmbeddedEndpoint(meter=meter) as endpoint:
        for name, workload in (("untagged", base), ("tagged", dataclasses.replace(base, tags=chosen))):
            simulated = Simulation(endpoint, meter, f"tags-{name}", _deployed_settings, workload,
                                   random.Random(seed)).run()
            figures = summary(simulated)
            status = {table: units for table, units in figures["by_table"].items() if table.split(".")[0] == "status"}
            report[name] = {"write_units_per_job": figures["write_units_per_job"], "status_table": status,
                            "by_tag": tag_index_figures(simulated),
                            "aws_ceiling_jobs_per_s": figures["aws_ceiling_jobs_per_s"],
                            "limited_by": figures["limited_by"],
                            "usd_per_million_jobs": usd_per_million_jobs(simulated, TARGET_ONE_TENANT)[
                                "usd_per_million_jobs"]}
    added = report["tagged"]["write_units_per_job"] - report["untagged"]["write_units_per_job"]
    report["write_units_per_tag_per_job"] = round(added / tags, 2)
    report["usd_per_million_jobs_per_tag"] = round(
        (report["tagged"]["usd_per_million_jobs"] - report["untagged"]["usd_per_million_jobs"]) / tags, 3)
    return report


def _table(report: dict[str, Any]) -> str:
    lines = [f"one tenant, {report['jobs']:,} jobs; tagged: {report['tags_per_job']} tag(s) on every job"]
    for name in ("untagged", "tagged"):
        figures = report[name]
        tag = figures["by_tag"]
        lines.append(f"{name:9} write units/job {figures['write_units_per_job']}, status table "
                     f"{json.dumps(figures['status_table'])}, ceiling {figures['aws_ceiling_jobs_per_s']:,} jobs/s "
                     f"({figures['limited_by']}), ${figures['usd_per_million_jobs']} per million jobs")
        if tag["partitions"]:
            lines.append(f"          by_tag: {tag['write_units_per_job']} units/job over {tag['partitions']} "
                         f"partitions; hottest {tag['hottest_partition']} "
                         f"{tag['hottest_write_units_per_job']} units/job -> "
                         f"{tag['hottest_ceiling_jobs_per_s']:,} jobs/s")
    lines.append(f"each tag adds {report['write_units_per_tag_per_job']} write units and "
                 f"${report['usd_per_million_jobs_per_tag']} per million jobs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tag_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--tags", type=int, default=1, help="tags on every job of the tagged run (1 to 10)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.jobs, args.tags)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every resource a realistic run touched, per key and per shard, against its AWS limit: the ceiling is the
lowest, and names its resource.

DynamoDB serves at most 1,000 write units and 3,000 read units a second per partition: each partition key of
each table and global secondary index the meter charged (onward_infra.metering.charge_key) is one resource
of each kind. A Kinesis shard takes at most 1,000 records and 1 MiB (data and partition keys) a second: each
shard of the events stream the meter counted records on is one resource of each kind. A resource's ceiling is
its limit over what one job costs it; the run's ceiling is the least of them.

The local event source mappings keep their own positions in the checkpoint table ("local-mapping:..."): on
AWS Lambda keeps them itself, so those keys are left out. What a process reads once per period is charged
per job at the run's process rate (bench/scale_realistic.py), so a ceiling holds as long as processes keep
that rate (more jobs a second, more processes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.scale_items import write_units_by_item
from bench.scale_realistic import Run

PARTITION_WRITE_UNITS = 1_000
PARTITION_READ_UNITS = 3_000
SHARD_RECORDS = 1_000
SHARD_BYTES = 1024 * 1024
LOCAL_ONLY = "|local-mapping:"  # the local mappings' positions (Lambda keeps its own on AWS)
SHOWN = 8  # resources listed in the report, lowest ceiling first


@dataclass(frozen=True)
class Resource:
    """One partition or shard and one of its limits: what a job costs it, and the rate that reaches the limit."""

    name: str
    per_job: float
    limit_per_s: float

    @property
    def ceiling_jobs_per_s(self) -> float:
        return self.limit_per_s / self.per_job if self.per_job else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.name, "per_job": round(self.per_job, 4), "limit_per_s": self.limit_per_s,
                "ceiling_jobs_per_s": round(self.ceiling_jobs_per_s)}


def logical_names(environment: dict[str, str]) -> dict[str, str]:
    """Physical table and stream names -> their names in the stack's environment (JOBS_TABLE -> "jobs",
    EVENTS_STREAM -> "events"), so that a resource reads the same on every stack."""
    names = {value: variable.removesuffix("_TABLE").lower()
             for variable, value in environment.items() if variable.endswith("_TABLE")}
    if "EVENTS_STREAM" in environment:
        names[environment["EVENTS_STREAM"]] = "events"
    return names


def readable(key: str, names: dict[str, str]) -> str:
    """A meter key ("<table>[.<index>]|<partition>", "<stream>|<shard>") with the logical table name."""
    table, _, partition = key.partition("|")
    base, dot, index = table.partition(".")
    return f"{names.get(base, base)}{dot}{index}|{partition}"


def billed(by_key: Counter[str]) -> Counter[str]:
    """The keys AWS would bill: without the local mappings' own positions."""
    return Counter({key: units for key, units in by_key.items() if LOCAL_ONLY not in key})


def resources(run: Run) -> list[Resource]:
    """Every resource of the run, lowest ceiling first."""
    reading, jobs, names = run.reading, run.workload.jobs, logical_names(run.environment)
    found = [Resource(f"dynamodb write units {readable(key, names)}", units / jobs, PARTITION_WRITE_UNITS)
             for key, units in billed(reading.write_units_by_key).items()]
    found += [Resource(f"dynamodb read units {readable(key, names)}", units / jobs, PARTITION_READ_UNITS)
              for key, units in billed(reading.read_units_by_key).items()]
    found += [Resource(f"kinesis records {readable(key, names)}", records / jobs, SHARD_RECORDS)
              for key, records in reading.kinesis_records_by_shard.items()]
    found += [Resource(f"kinesis bytes {readable(key, names)}", size / jobs, SHARD_BYTES)
              for key, size in reading.kinesis_bytes_by_shard.items()]
    return sorted(found, key=lambda resource: (resource.ceiling_jobs_per_s, resource.name))


def by_table(run: Run) -> dict[str, dict[str, float]]:
    """Write and read units per job of each table and index (all its partitions together)."""
    names, jobs = logical_names(run.environment), run.workload.jobs
    totals: dict[str, dict[str, float]] = {}
    for kind, by_key in (("write_units_per_job", run.reading.write_units_by_key),
                         ("read_units_per_job", run.reading.read_units_by_key)):
        for key, units in billed(by_key).items():
            table = readable(key, names).partition("|")[0]
            entry = totals.setdefault(table, {"write_units_per_job": 0.0, "read_units_per_job": 0.0})
            entry[kind] += units / jobs
    return {table: {kind: round(value, 3) for kind, value in entry.items()} for table, entry in sorted(totals.items())}


def kinesis(run: Run) -> dict[str, Any]:
    """The events stream: its shards as deployed from template.yaml, records and bytes per job, the hottest
    shard's share."""
    reading, jobs = run.reading, run.workload.jobs
    shards = run.events_stream["open_shards"]
    hottest = max(reading.kinesis_records_by_shard.values(), default=0)
    mean = reading.kinesis_records / shards if shards else 0
    return {"stream_shards": shards, "stream_mode": run.events_stream["mode"],
            "records_per_job": round(reading.kinesis_records / jobs, 3),
            "bytes_per_job": round(reading.kinesis_bytes / jobs, 1),
            "payload_units_per_job": round(reading.kinesis_payload_units / jobs, 3),
            "hottest_shard_over_mean": round(hottest / mean, 3) if mean else 1.0}


def summary(run: Run) -> dict[str, Any]:
    """The realistic workload's figures: its ceiling and limiting resource, and the breakdown behind them."""
    workload, reading, jobs = run.workload, run.reading, run.workload.jobs
    found = resources(run)
    lowest = found[0]
    requests = reading.requests
    return {
        "jobs": jobs,
        "tenants": len(workload.tenants),
        "ready_shards": workload.ready_shards,
        "arrival_rate_per_s": workload.rate_per_s,
        "processes": workload.processes,
        "worker_slots": workload.processes * workload.slots,
        "virtual_s": round(run.virtual_s, 1),
        "empty_claims_per_job": round(run.empty_claims / jobs, 3),
        "aws_ceiling_jobs_per_s": round(lowest.ceiling_jobs_per_s),
        "limited_by": lowest.name,
        "lowest_ceilings": [resource.to_json() for resource in found[:SHOWN]],
        "by_table": by_table(run),
        "write_units_per_job": round(sum(billed(reading.write_units_by_key).values()) / jobs, 2),
        "write_units_by_item": write_units_by_item(billed(reading.write_units_by_key), reading.write_units_by_sort_key,
                                                   logical_names(run.environment), jobs),
        "read_units_per_job": round(sum(billed(reading.read_units_by_key).values()) / jobs, 2),
        "kinesis": kinesis(run),
        "dynamodb_streams_get_records_per_job": round(requests["dynamodbstreams.GetRecords"] / jobs, 3),
        "lambda": {name: {"invocations_per_job": round(calls.count / jobs, 4),
                          "records_per_invocation": round(calls.records / calls.count, 1) if calls.count else 0.0,
                          "requests_per_invocation": round(calls.requests / calls.count, 1) if calls.count else 0.0}
                   for name, calls in (("relay", run.relay), ("projector", run.projector))},
        "api_requests_per_create": round(run.api.requests / run.api.count, 2) if run.api.count else 0.0,
    }

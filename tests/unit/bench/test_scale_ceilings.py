"""bench/scale_limits.py and bench/scale_cost.py over a made-up realistic run: the ceiling is the least over
every partition and shard with its resource named, the local mappings' own positions are neither a ceiling
nor a cost, and the cost lines are the counts times the prices, the events stream sized for the rate."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.scale_cost import PRICES_USD, stream_shards_for, usd_per_million_jobs
from bench.scale_limits import resources, summary
from bench.scale_realistic import Invocations, Run, Workload
from onward_infra.metering import MeterReading

ENVIRONMENT = {"JOBS_TABLE": "stack-Jobs-1", "STATUS_TABLE": "stack-Status-2", "CHECKPOINT_TABLE": "stack-Cp-3",
               "EVENTS_STREAM": "stack-Events-4"}
JOBS = 100


def a_run(**counts: Counter[str]) -> Run:
    reading = MeterReading(
        write_units_by_key=counts.get("writes", Counter()), read_units_by_key=counts.get("reads", Counter()),
        kinesis_records_by_shard=counts.get("records", Counter()),
        kinesis_bytes_by_shard=counts.get("bytes", Counter()),
        requests=Counter({"dynamodbstreams.GetRecords": 40}))
    reading.kinesis_records = sum(reading.kinesis_records_by_shard.values())
    reading.kinesis_bytes = sum(reading.kinesis_bytes_by_shard.values())
    reading.kinesis_payload_units = reading.kinesis_records
    workload = Workload("w", ("a", "b"), 1, JOBS, 10.0, 1, 4)
    return Run(workload, reading, 10.0, 5, Invocations(3, 300, 6), Invocations(2, 300, 40),
               Invocations(JOBS, JOBS, JOBS), ENVIRONMENT, {"open_shards": 2, "mode": "PROVISIONED"})


def test_the_ceiling_is_the_least_over_partitions_and_shards_and_names_it():
    """A view index key at 2.5 write units per job (400 jobs/s) limits below a shard at 1.5 records per job
    (666 jobs/s) and a jobs partition at 0.5 (2,000): the ceiling is 400 and names the view's index key, by
    its logical table name."""
    run = a_run(writes=Counter({"stack-Status-2.by_tenant|solo": 250, "stack-Jobs-1|TENANT#solo": 50}),
                records=Counter({"stack-Events-4|shardId-0": 150, "stack-Events-4|shardId-1": 150}),
                bytes=Counter({"stack-Events-4|shardId-0": 50_000, "stack-Events-4|shardId-1": 50_000}))
    figures = summary(run)
    assert figures["aws_ceiling_jobs_per_s"] == 400
    assert figures["limited_by"] == "dynamodb write units status.by_tenant|solo"
    assert [r["ceiling_jobs_per_s"] for r in figures["lowest_ceilings"][:3]] == [400, 667, 667]
    assert figures["lowest_ceilings"][1]["resource"] == "kinesis records events|shardId-0"


def test_a_shard_limits_when_it_is_the_hottest_resource():
    """With the DynamoDB keys cold, the hottest Kinesis shard (by bytes here: 200 KB per job on 1 MiB/s)
    is the limit."""
    run = a_run(writes=Counter({"stack-Jobs-1|x": 10}), records=Counter({"stack-Events-4|shardId-1": 300}),
                bytes=Counter({"stack-Events-4|shardId-1": 200 * 1024 * JOBS}))
    figures = summary(run)
    assert figures["limited_by"] == "kinesis bytes events|shardId-1"
    assert figures["aws_ceiling_jobs_per_s"] == 5


def test_the_local_mappings_positions_are_neither_a_ceiling_nor_a_cost():
    """The local pollers keep their positions in the checkpoint table; Lambda keeps its own on AWS, so a hot
    "local-mapping:" key must not be named as the limit nor billed."""
    local = Counter({"stack-Cp-3|local-mapping:projector": 10_000})
    run = a_run(writes=local + Counter({"stack-Jobs-1|x": 100}), reads=Counter({"stack-Cp-3|local-mapping:relay": 500}))
    assert all("local-mapping" not in resource.name for resource in resources(run))
    cost = usd_per_million_jobs(run, 100.0)
    assert cost["breakdown"]["dynamodb_writes"] == pytest.approx(1 * PRICES_USD["dynamodb_write_request_unit"] * 1e6)
    assert cost["breakdown"]["dynamodb_reads"] == 0


def test_the_cost_lines_are_counts_times_prices():
    """30 write and 8 read units per job, 3 records of one payload unit each; the stream's GetRecords free
    (read by Lambda); the total is the sum of the lines and the largest line is named."""
    run = a_run(writes=Counter({"stack-Jobs-1|x": 30 * JOBS}), reads=Counter({"stack-Jobs-1|y": 8 * JOBS}),
                records=Counter({"stack-Events-4|shardId-0": 150, "stack-Events-4|shardId-1": 150}),
                bytes=Counter({"stack-Events-4|shardId-0": 50_000, "stack-Events-4|shardId-1": 50_000}))
    cost = usd_per_million_jobs(run, 1_000.0)
    breakdown = cost["breakdown"]
    assert breakdown["dynamodb_writes"] == pytest.approx(30 * 0.625)
    assert breakdown["dynamodb_reads"] == pytest.approx(8 * 0.125)
    assert breakdown["kinesis_put_payload_units"] == pytest.approx(3 * 0.014)
    assert breakdown["dynamodb_streams_reads"] == 0
    assert cost["usd_per_million_jobs"] == pytest.approx(sum(breakdown.values()), abs=0.01)
    assert cost["dominated_by"] == "dynamodb_writes"


def test_the_stream_is_sized_for_the_rate_with_the_runs_skew():
    """3 records per job at 1,000 jobs/s is 3,000 records/s: 3 shards if evenly spread, 4 when the hottest
    shard took 1.2x the mean in the run (the shard-hours follow)."""
    even = a_run(records=Counter({"stack-Events-4|shardId-0": 150, "stack-Events-4|shardId-1": 150}),
                 bytes=Counter({"stack-Events-4|shardId-0": 100, "stack-Events-4|shardId-1": 100}))
    skewed = a_run(records=Counter({"stack-Events-4|shardId-0": 180, "stack-Events-4|shardId-1": 120}),
                   bytes=Counter({"stack-Events-4|shardId-0": 100, "stack-Events-4|shardId-1": 100}))
    assert stream_shards_for(even, 1_000.0) == 3
    assert stream_shards_for(skewed, 1_000.0) == 4
    hours = usd_per_million_jobs(skewed, 1_000.0)["breakdown"]["kinesis_shard_hours"]
    assert hours == pytest.approx(4 * 0.015 / 3600 * 1e6 / 1_000, abs=1e-4)  # the breakdown is rounded to 4 places

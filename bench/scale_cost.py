"""What a job costs on AWS, from a realistic run's metered counts, at on-demand list prices (us-east-1; the
prices and the date they were read are in docs/performance.md).

- DynamoDB: every write and read request unit the meter charged (tables and indexes; the local mappings'
  own positions left out), on demand.
- DynamoDB Streams: the relay's GetRecords are made by Lambda's event source mapping, which is not charged.
- Kinesis (provisioned): PUT payload units (25 KB each, per record), and shard-hours of a stream sized for the
  workload's target rate: the shards that carry its records and bytes with the run's hottest-shard skew.
- Lambda (template.yaml's architecture and memory, read now): a request per invocation of the relay and the
  projector as their mappings formed the batches, and GB-seconds of a duration modelled as the handler's AWS
  requests one after another at REQUEST_MS each (an upper bound: the projector writes a batch's jobs at once).
- The API: one HTTP API request and one Lambda invocation per job created (a batch of creates shares them),
  its duration modelled alike.

Left out: the workers' compute (the jobs' own handlers, on ECS or Lambda), storage, CloudWatch, data transfer.
"""

from __future__ import annotations

import math
from typing import Any

from bench.scale_limits import SHARD_BYTES, SHARD_RECORDS, billed
from bench.scale_realistic import Invocations, Run
from onward_infra.template import load_template

PRICES_USD = {  # us-east-1, on-demand list prices (docs/performance.md: read on, and where)
    "dynamodb_write_request_unit": 0.625 / 1e6,
    "dynamodb_read_request_unit": 0.125 / 1e6,
    "dynamodb_streams_read_by_lambda": 0.0,
    "kinesis_shard_hour": 0.015,
    "kinesis_put_payload_unit": 0.014 / 1e6,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "lambda_gb_second_x86_64": 0.0000166667,
    "http_api_request": 1.00 / 1e6,
}
REQUEST_MS = 10  # one AWS request inside a Lambda invocation, in the modelled duration
MILLION = 1_000_000


def lambda_configuration(function: str) -> tuple[float, str]:
    """(memory in GB, architecture) of a function of template.yaml, its own settings over the Globals'."""
    template = load_template()
    defaults = template.get("Globals", {}).get("Function", {})
    own = template["Resources"][function]["Properties"]
    memory_mb = int(own.get("MemorySize", defaults.get("MemorySize", 128)))
    architectures = own.get("Architectures", defaults.get("Architectures", ["x86_64"]))
    return memory_mb / 1024, str(architectures[0])


def _lambda_usd(calls: Invocations, function: str) -> float:
    memory_gb, architecture = lambda_configuration(function)
    gb_seconds = memory_gb * calls.requests * REQUEST_MS / 1000
    return calls.count * PRICES_USD["lambda_request"] + gb_seconds * PRICES_USD[f"lambda_gb_second_{architecture}"]


def stream_shards_for(run: Run, jobs_per_s: float) -> int:
    """The events stream's shards that carry `jobs_per_s` with this run's records and bytes per job, the
    hottest shard taking what it took here over the mean."""
    reading, jobs, deployed = run.reading, run.workload.jobs, run.events_stream["open_shards"]
    mean = reading.kinesis_records / deployed if deployed else 0
    skew = max(reading.kinesis_records_by_shard.values(), default=0) / mean if mean else 1.0
    load = max(reading.kinesis_records / jobs / SHARD_RECORDS, reading.kinesis_bytes / jobs / SHARD_BYTES)
    return max(1, math.ceil(jobs_per_s * load * skew))


def usd_per_million_jobs(run: Run, jobs_per_s: float) -> dict[str, Any]:
    """The cost of a million jobs like the run's, by line, with the stream sized for `jobs_per_s`."""
    reading, jobs = run.reading, run.workload.jobs
    shards = stream_shards_for(run, jobs_per_s)
    per_job = {
        "dynamodb_writes": sum(billed(reading.write_units_by_key).values()) / jobs
        * PRICES_USD["dynamodb_write_request_unit"],
        "dynamodb_reads": sum(billed(reading.read_units_by_key).values()) / jobs
        * PRICES_USD["dynamodb_read_request_unit"],
        "dynamodb_streams_reads": reading.requests["dynamodbstreams.GetRecords"] / jobs
        * PRICES_USD["dynamodb_streams_read_by_lambda"],
        "kinesis_put_payload_units": reading.kinesis_payload_units / jobs * PRICES_USD["kinesis_put_payload_unit"],
        "kinesis_shard_hours": shards * PRICES_USD["kinesis_shard_hour"] / (jobs_per_s * 3600),
        "lambda_relay": _lambda_usd(run.relay, "RelayFunction") / jobs,
        "lambda_projector": _lambda_usd(run.projector, "ProjectorFunction") / jobs,
        "api_requests": PRICES_USD["http_api_request"] + _lambda_usd(run.api, "ApiFunction") / jobs,
    }
    breakdown = {line: round(usd * MILLION, 4) for line, usd in per_job.items()}
    total = sum(per_job.values()) * MILLION
    return {"usd_per_million_jobs": round(total, 2), "breakdown": breakdown,
            "dominated_by": max(breakdown, key=lambda line: breakdown[line]),
            "priced_at_jobs_per_s": jobs_per_s, "events_stream_shards_at_that_rate": shards}

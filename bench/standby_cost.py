"""What a standby Region costs a month while no job runs, by docs/regional-recovery.md's design: computed
from template.yaml's resources under a profile's parameters with bench/idle_cost.py's prices.

    .venv/bin/python -m bench.standby_cost [--profile default|starter] [--json]

What runs in a standby: the events stream (the same shards as home, or its on-demand stream), the relay and
the projector (warm: they carry the home's heartbeats, replicated into the standby's outbox, so the standby's
view proves itself current), the alarms. What is off: the reaper, the scheduler, the workers (ECS desired 0,
the Lambda worker's backstop schedule disabled), the archiver's and the webhook matcher's mappings (else a
job would be archived and delivered twice), and no API traffic reaches it. What replication adds while idle:
every heartbeat slot item the home writes is written again in the standby, one replicated write unit each,
priced as a write unit ("Replicated write units (rWCUs and rWRUs) are priced the same as single-Region write
units", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/global-tables-billing.html), and the
standby's own checkpoints; cross-Region transfer of those items is under a cent a month and left out. The fence
reconciler's mapping on the jobs table's stream is created disabled (ReconcilerEnabled) until a failover makes
the Region home: no invocation, idle or under load, and Lambda's reads of a DynamoDB stream it is triggered by
are not billed.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

from bench.idle_cost import (
    ALARM_METRIC_MONTH,
    BILLED_SECONDS,
    CUSTOM_METRIC_MONTH,
    DYNAMODB_PER_MILLION_WRITE_UNITS,
    HEARTBEAT_SLOTS_PER_SHARD,
    HOURS_PER_MONTH,
    KINESIS_ON_DEMAND_STREAM_HOUR,
    KINESIS_SHARD_HOUR,
    LAMBDA_ARM_GB_SECOND,
    LAMBDA_PER_MILLION_REQUESTS,
    LOG_KB_PER_INVOCATION,
    LOGS_INGESTED_GB,
    ON_DEMAND_INITIAL_SHARDS,
    OUTBOX_STREAM_SHARDS,
    XRAY_PER_MILLION_TRACES,
    Deployment,
    Line,
    alarm_metrics,
    bill_command,
)
from onward_infra.template import load_template

STANDBY_METRICS = ("ReplicatedHeartbeatAgeSeconds",)  # published by the standby's projector on each beat


def as_standby(deployment: Deployment) -> Deployment:
    """The same parameters deployed as template.yaml's standby (RegionRole=standby): its own alarms
    (HomeRegionLost, ReplicatedHeartbeatAge, ReplicationLagHigh) are among its resources, counted, not assumed."""
    return Deployment({**deployment.parameters, "RegionRole": "standby"}, load_template(role=None))


def standby_bill(deployment: Deployment) -> list[Line]:
    deployment = as_standby(deployment)
    on_demand = deployment.parameters["EventsStreamMode"] == "ON_DEMAND"
    shards = ON_DEMAND_INITIAL_SHARDS if on_demand else deployment.sizing("Shards")
    beats = deployment.runs_per_month("ReaperSchedule")  # the home's reaper beats; the standby carries them
    invocations = {"RelayFunction": beats * OUTBOX_STREAM_SHARDS, "ProjectorFunction": beats * shards}
    memory_gb = int(deployment.template["Globals"]["Function"]["MemorySize"]) / 1024
    requests = sum(invocations.values())
    gb_seconds = sum(count * BILLED_SECONDS[name] * memory_gb for name, count in invocations.items())
    alarms = sum(alarm_metrics(alarm) for alarm in deployment.of_type("AWS::CloudWatch::Alarm").values())
    replicated = beats * HEARTBEAT_SLOTS_PER_SHARD * OUTBOX_STREAM_SHARDS
    checkpoints = beats * (OUTBOX_STREAM_SHARDS + shards)
    functions = "AWS::Serverless::Function"
    lines = [
        Line("events stream, on demand" if on_demand else "events stream, provisioned shards", "AWS::Kinesis::Stream",
             HOURS_PER_MONTH if on_demand else shards * HOURS_PER_MONTH,
             "stream-hours" if on_demand else "shard-hours",
             KINESIS_ON_DEMAND_STREAM_HOUR if on_demand else KINESIS_SHARD_HOUR, 0.0),
        Line("alarms (the home's, and replication's)", "AWS::CloudWatch::Alarm", alarms,
             "alarm metrics", ALARM_METRIC_MONTH, 0.0),
        Line("custom metrics published while idle", functions, 1 + len(STANDBY_METRICS), "metrics",
             CUSTOM_METRIC_MONTH, 0.0),
        Line("relay and projector invocations on replicated heartbeats", functions, requests, "requests",
             LAMBDA_PER_MILLION_REQUESTS / 1e6, 0.0),
        Line("their duration (512 MB, arm64)", functions, round(gb_seconds), "GB-seconds", LAMBDA_ARM_GB_SECOND, 0.0),
        Line("their X-Ray traces (Tracing: Active)", functions, requests, "traces", XRAY_PER_MILLION_TRACES / 1e6, 0.0),
        Line("their log lines", "AWS::Logs::LogGroup", round(requests * LOG_KB_PER_INVOCATION / 1024 ** 2, 2), "GB",
             LOGS_INGESTED_GB, 0.0),
        Line("replicated writes: the home's heartbeat slots", "AWS::DynamoDB::GlobalTable", replicated,
             "replicated write units", DYNAMODB_PER_MILLION_WRITE_UNITS / 1e6, 0.0),
        Line("the standby's checkpoints", "AWS::DynamoDB::Table", checkpoints, "write units",
             DYNAMODB_PER_MILLION_WRITE_UNITS / 1e6, 0.0),
    ]
    return [Line(**{**asdict(line), "monthly": round(line.quantity * line.unit_price, 2)}) for line in lines]


def main(argv: list[str] | None = None) -> int:
    return bill_command("python -m bench.standby_cost", (__doc__ or "").split("\n")[0], standby_bill, argv)


if __name__ == "__main__":
    sys.exit(main())

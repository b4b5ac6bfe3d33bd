"""What a deployment of template.yaml costs a month while no job runs, line by line, at list prices.

    .venv/bin/python -m bench.idle_cost [--profile default|starter] [--json]

Reads the template (its resources under the profile's parameters, conditions resolved) and prices what runs
with no traffic: the events stream's shards, the alarms' metrics, the dashboard, the alarm topic's key, the
custom metrics the functions publish on every scheduled run, the schedules' invocations (reaper, scheduler,
the Lambda worker's backstop) and the heartbeat each reaper run sends down the pipeline (relay and projector
invocations, their DynamoDB requests, X-Ray traces and log lines), and the ECS worker tasks kept running.
docs/costs.md is this module's table; tests/unit/project/test_idle_cost.py fails when a resource type the
template gains has no line there, and when the table's numbers are not this module's.

Prices: on-demand list prices of us-east-1 (PRICES_AS_OF), no free tier. Request counts per run are estimates
from the code's request pattern (stated with each constant), not metered.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from onward.domain.stream_sizing import ON_DEMAND_INITIAL_SHARDS
from onward_infra.template import load_template

PRICES_AS_OF = "2026-12-04"
HOURS_PER_MONTH = 730
MINUTES_PER_MONTH = HOURS_PER_MONTH * 60

KINESIS_SHARD_HOUR = 0.015  # provisioned
KINESIS_ON_DEMAND_STREAM_HOUR = 0.04
ALARM_METRIC_MONTH = 0.10  # standard resolution; a metric-math alarm pays for each metric it reads
DASHBOARD_MONTH = 3.00
CUSTOM_METRIC_MONTH = 0.30  # first 10,000 metrics; billed for the hours a metric is published
KMS_KEY_MONTH = 1.00
LAMBDA_PER_MILLION_REQUESTS = 0.20
LAMBDA_ARM_GB_SECOND = 0.0000133334
XRAY_PER_MILLION_TRACES = 5.00
LOGS_INGESTED_GB = 0.50
DYNAMODB_PER_MILLION_WRITE_UNITS = 0.625  # on demand
DYNAMODB_PER_MILLION_READ_UNITS = 0.125
FARGATE_ARM_VCPU_HOUR = 0.03238
FARGATE_ARM_GB_HOUR = 0.00356

FREE_AT_IDLE = {  # resource types that cost nothing while no job runs, and why
    "AWS::DynamoDB::Table": "on demand: requests are priced on the heartbeat and schedule lines; an idle "
                            "deployment stores a few MB ($0.25/GB-month, backups $0.20/GB-month)",
    "AWS::SQS::Queue": "per request; nothing sends to an on-failure queue while nothing fails",
    "AWS::Logs::LogGroup": "per GB ingested (the log lines are on the invocation lines) and stored",
    "AWS::Logs::ResourcePolicy": "no charge",
    "AWS::IAM::Role": "no charge",
    "AWS::IAM::ManagedPolicy": "no charge",
    "AWS::Cognito::UserPool": "per monthly active user; none while idle",
    "AWS::Cognito::UserPoolGroup": "no charge",
    "AWS::Cognito::UserPoolResourceServer": "no charge",
    "AWS::Cognito::UserPoolClient": "no charge",
    "AWS::Cognito::UserPoolDomain": "no charge",
    "AWS::Serverless::HttpApi": "per request",
    "AWS::Serverless::Function": "per invocation: the scheduled ones and the heartbeat's are priced lines",
    "AWS::ECS::Cluster": "no charge",
    "AWS::ECS::TaskDefinition": "no charge",
    "AWS::ECS::Service": "its running tasks are the Fargate line",
    "AWS::EC2::SecurityGroup": "no charge",
    "AWS::ApplicationAutoScaling::ScalableTarget": "no charge",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "no charge (its alarm is on the alarms line)",
    "AWS::SNS::Topic": "per notification; alarms notify only when they change state",
    "AWS::SNS::TopicPolicy": "no charge",
    "AWS::SNS::Subscription": "email notifications: the first 1,000 a month are free",
    "AWS::Events::Rule": "events of AWS services to rules are free",
    "AWS::S3::Bucket": "per GB-month stored and per request: the archive's cost per million jobs is in "
                       "docs/archive.md; an empty archive costs nothing",
    "AWS::S3::BucketPolicy": "no charge",
    "AWS::KinesisFirehose::DeliveryStream": "per GB put, converted and partitioned, and per object delivered; "
                                            "no hourly charge (Direct PUT)",
    "AWS::Glue::Database": "the first million Data Catalog objects and requests a month are free",
    "AWS::Glue::Table": "the first million Data Catalog objects and requests a month are free",
    "AWS::Athena::WorkGroup": "per TB scanned by a query (10 MB at least); none while idle",
    "AWS::Logs::LogStream": "no charge",
}
PRICED = {  # resource types with a line of their own
    "AWS::Kinesis::Stream", "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard", "AWS::KMS::Key"}

# Per run, estimated from the code (onward/entrypoints, onward/pipeline/heartbeat_writer.py):
OUTBOX_STREAM_SHARDS = 4  # an idle on-demand table's stream; the beat puts 16 slot items in each
HEARTBEAT_SLOTS_PER_SHARD = 16
LEASES_PARTITIONS = 32  # the reaper's lapsed-lease query, one Query per `leases` partition
REAPER_OTHER_READS = 4  # the backlog counts and the table's stream description
SCHEDULER_READS = 2  # the due schedules' query and the clock's
LOG_KB_PER_INVOCATION = 1.0  # START, END, REPORT and one structured line
BILLED_SECONDS = {"ReaperFunction": 1.0, "SchedulerFunction": 0.2, "WorkerFunction": 0.5,
                  "RelayFunction": 0.2, "ProjectorFunction": 0.2}
IDLE_METRICS = {  # sent on every run whatever the traffic; counts are sent only when not zero
    "ReaperFunction": ("OldestDueAgeSeconds", "BacklogDue", "JobsRunning"),  # (onward.telemetry.add_count)
    "ProjectorFunction": ("PipelineHeartbeats",),
}
PROFILES: dict[str, dict[str, str]] = {
    "default": {},
    # A team starting out: one shard, workers on Lambda (no tasks, no network to pay), the essential alarms
    # and no dashboard, a heartbeat every 4 minutes (an idle view says "updates delayed" after 4.5 minutes),
    # the backstop as often, 4 `active` partitions (raise ActiveShards later, never lower it).
    "starter": {"TargetJobsPerSecond": "250", "WorkerRuntime": "lambda", "Monitoring": "essential", "ActiveShards": "4",
                "ReaperSchedule": "rate(4 minutes)", "HeartbeatIntervalSeconds": "240",
                "WorkerSchedule": "rate(4 minutes)"},
}


@dataclass(frozen=True)
class Line:
    item: str
    resource_types: str
    quantity: float
    unit: str
    unit_price: float
    monthly: float


class Deployment:
    """template.yaml's resources under given parameters (the rest at their defaults), conditions resolved."""

    def __init__(self, parameters: dict[str, str], template: dict[str, Any] | None = None) -> None:
        self.template = template or load_template()
        self.parameters = {name: str(spec.get("Default", "")) for name, spec in self.template["Parameters"].items()}
        self.parameters.update(parameters)
        self.resources = {name: resource for name, resource in self.template["Resources"].items()
                          if "Condition" not in resource or self.holds(resource["Condition"])}

    def holds(self, condition: str) -> bool:
        return bool(self._evaluate(self.template["Conditions"][condition]))

    def _evaluate(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        ((function, argument),) = node.items()
        if function == "Ref":
            return self.parameters[argument]
        if function == "Condition":
            return self.holds(argument)
        values = [self._evaluate(item) for item in argument]
        operations = {"Fn::Equals": lambda: str(values[0]) == str(values[1]), "Fn::Not": lambda: not values[0],
                      "Fn::And": lambda: all(values), "Fn::Or": lambda: any(values)}
        return operations[function]()

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {name: r for name, r in self.resources.items() if r["Type"] == resource_type}

    def sizing(self, column: str) -> int:
        row: dict[str, int] = self.template["Mappings"]["EventsStreamSizing"][self.parameters["TargetJobsPerSecond"]]
        return row[column]

    def runs_per_month(self, schedule_parameter: str) -> float:
        match = re.fullmatch(r"rate\((\d+) minutes?\)", self.parameters[schedule_parameter])
        if not match:
            raise ValueError(f"{schedule_parameter}: only rate(N minutes) is priced")
        return MINUTES_PER_MONTH / int(match.group(1))


def alarm_metrics(alarm: dict[str, Any]) -> int:
    properties = alarm["Properties"]
    return 1 if "MetricName" in properties else sum(1 for m in properties["Metrics"] if "MetricStat" in m)


def idle_bill(deployment: Deployment) -> list[Line]:
    on_demand = deployment.parameters["EventsStreamMode"] == "ON_DEMAND"
    shards = ON_DEMAND_INITIAL_SHARDS if on_demand else deployment.sizing("Shards")
    lines = [Line("events stream, on demand" if on_demand else "events stream, provisioned shards",
                  "AWS::Kinesis::Stream", HOURS_PER_MONTH if on_demand else shards * HOURS_PER_MONTH,
                  "stream-hours" if on_demand else "shard-hours",
                  KINESIS_ON_DEMAND_STREAM_HOUR if on_demand else KINESIS_SHARD_HOUR, 0.0)]
    alarms = sum(alarm_metrics(alarm) for alarm in deployment.of_type("AWS::CloudWatch::Alarm").values())
    lines.append(Line("alarms", "AWS::CloudWatch::Alarm", alarms, "alarm metrics", ALARM_METRIC_MONTH, 0.0))
    lines.append(Line("dashboard", "AWS::CloudWatch::Dashboard",
                      len(deployment.of_type("AWS::CloudWatch::Dashboard")), "dashboards", DASHBOARD_MONTH, 0.0))
    lines.append(Line("alarm topic's key", "AWS::KMS::Key", len(deployment.of_type("AWS::KMS::Key")), "keys",
                      KMS_KEY_MONTH, 0.0))
    metrics = sum(len(names) for function, names in IDLE_METRICS.items() if function in deployment.resources)
    lines.append(Line("custom metrics published while idle", "AWS::Serverless::Function", metrics, "metrics",
                      CUSTOM_METRIC_MONTH, 0.0))
    lines.extend(_invocation_lines(deployment, shards))
    tasks = int(deployment.parameters["WorkerMinTasks"]) if "EcsWorkerService" in deployment.resources else 0
    task_hour = (int(deployment.parameters["WorkerTaskCpu"]) / 1024 * FARGATE_ARM_VCPU_HOUR
                 + int(deployment.parameters["WorkerTaskMemory"]) / 1024 * FARGATE_ARM_GB_HOUR)
    lines.append(Line("ECS worker tasks kept running (WorkerMinTasks)", "AWS::ECS::Service",
                      tasks * HOURS_PER_MONTH, "task-hours", round(task_hour, 5), 0.0))
    return [Line(**{**asdict(line), "monthly": round(line.quantity * line.unit_price, 2)}) for line in lines]


def _invocation_lines(deployment: Deployment, events_shards: int) -> list[Line]:
    beats = deployment.runs_per_month("ReaperSchedule")
    invocations = {"ReaperFunction": beats, "SchedulerFunction": float(MINUTES_PER_MONTH),
                   "RelayFunction": beats * OUTBOX_STREAM_SHARDS, "ProjectorFunction": beats * events_shards}
    if "WorkerFunction" in deployment.resources:
        invocations["WorkerFunction"] = deployment.runs_per_month("WorkerSchedule")
    memory_gb = int(deployment.template["Globals"]["Function"]["MemorySize"]) / 1024
    total = sum(invocations.values())
    gb_seconds = sum(count * BILLED_SECONDS[name] * memory_gb for name, count in invocations.items())
    active_reads = int(deployment.parameters["ActiveShards"])
    reads = (beats * (LEASES_PARTITIONS + active_reads + REAPER_OTHER_READS) + MINUTES_PER_MONTH * SCHEDULER_READS
             + invocations.get("WorkerFunction", 0.0) * active_reads)
    writes = beats * (HEARTBEAT_SLOTS_PER_SHARD * OUTBOX_STREAM_SHARDS + OUTBOX_STREAM_SHARDS + events_shards)
    functions = "AWS::Serverless::Function"
    return [
        Line("scheduled and heartbeat invocations", functions, total, "requests",
             LAMBDA_PER_MILLION_REQUESTS / 1e6, 0.0),
        Line("their duration (512 MB, arm64)", functions, round(gb_seconds), "GB-seconds", LAMBDA_ARM_GB_SECOND, 0.0),
        Line("their X-Ray traces (Tracing: Active)", functions, total, "traces", XRAY_PER_MILLION_TRACES / 1e6, 0.0),
        Line("their log lines", "AWS::Logs::LogGroup", round(total * LOG_KB_PER_INVOCATION / 1024 ** 2, 2), "GB",
             LOGS_INGESTED_GB, 0.0),
        Line("DynamoDB writes: heartbeat slots, checkpoints", "AWS::DynamoDB::Table", writes, "write units",
             DYNAMODB_PER_MILLION_WRITE_UNITS / 1e6, 0.0),
        Line("DynamoDB reads: reaper, scheduler, backstop claims", "AWS::DynamoDB::Table", reads, "read units",
             DYNAMODB_PER_MILLION_READ_UNITS / 1e6, 0.0),
    ]


def total(lines: list[Line]) -> float:
    return round(sum(line.monthly for line in lines), 2)


def markdown(lines: list[Line]) -> str:
    rows = ["| item | resources | quantity a month | unit price (USD) | USD a month |", "|---|---|---|---|---|"]
    rows += [f"| {line.item} | `{line.resource_types}` | {line.quantity:,.2f} {line.unit} | {line.unit_price:.8g} "
             f"| {line.monthly:.2f} |" for line in lines]
    rows.append(f"| **total** | | | | **{total(lines):.2f}** |")
    return "\n".join(rows)


def bill_command(prog: str, description: str, bill: Callable[[Deployment], list[Line]],
                 argv: list[str] | None = None) -> int:
    """A bill's command line: `--profile`, `--json` (this module's and bench.standby_cost's)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    lines = bill(Deployment(PROFILES[args.profile]))
    if args.json:
        print(json.dumps({"profile": args.profile, "prices_as_of": PRICES_AS_OF, "total": total(lines),
                          "lines": [asdict(line) for line in lines]}))
    else:
        print(markdown(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    return bill_command("python -m bench.idle_cost", __doc__.split("\n")[0], idle_bill, argv)


if __name__ == "__main__":
    sys.exit(main())

"""What template.yaml sizes from its one throughput number (TargetJobsPerSecond -> EventsStreamSizing): every
column of every row is onward/domain/stream_sizing.py's arithmetic (which `onward capacity
--target-jobs-per-second` prints), so the template, the CLI and docs/deploy.md's table cannot drift; every
tier's shards carry its rate within Kinesis's per-shard limits with a quarter of headroom, the default carries
the 10,000 jobs/s the docs claim, the Lambda worker's reserved concurrency is what its wake-up mapping runs plus
the backstop in either stream mode, and the stream's alarms follow the target."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from onward.domain import stream_sizing
from onward.domain.models import MAX_INLINE_RESULT_BYTES
from onward_infra.template import load_template

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
TIERS: dict[str, dict[str, int]] = TEMPLATE["Mappings"]["EventsStreamSizing"]
TARGET = TEMPLATE["Parameters"]["TargetJobsPerSecond"]
SHARD_BYTES_PER_S = 1_000_000  # Kinesis: bytes a shard takes a second
GOLDEN_EVENT = Path(__file__).parents[2] / "events" / "outbox_event_v1.json"
DEPLOY_DOC = Path(__file__).parents[3] / "docs" / "deploy.md"


def sized(column: str) -> dict[str, Any]:
    return {"Fn::FindInMap": ["EventsStreamSizing", {"Ref": "TargetJobsPerSecond"}, column]}


def test_the_parameter_offers_exactly_the_tiers_and_defaults_to_10000_jobs_per_second() -> None:
    """A value without a row would fail the deploy (FindInMap); the docs' 10,000 jobs/s is the default."""
    assert [int(value) for value in TARGET["AllowedValues"]] == list(stream_sizing.TARGET_TIERS)
    assert sorted(TIERS, key=int) == TARGET["AllowedValues"]
    assert TARGET["Default"] == "10000"
    assert RESOURCES["EventsStream"]["Properties"]["ShardCount"] == {
        "Fn::If": ["OnDemandEvents", {"Ref": "AWS::NoValue"}, sized("Shards")]}
    # One number: the old names are gone, nothing else sizes the stream or the worker's concurrency.
    assert not {"PeakJobsPerSecond", "EventsStreamShards", "LambdaWorkerReservedConcurrency"} & set(
        TEMPLATE["Parameters"])


@pytest.mark.parametrize("tier", stream_sizing.TARGET_TIERS)
def test_every_row_of_the_mapping_is_the_sizing_arithmetic(tier: int) -> None:
    """Edit onward/domain/stream_sizing.py and regenerate the mapping from it, never one alone."""
    assert TIERS[str(tier)] == stream_sizing.size_for(tier).as_dict()


def test_every_tier_carries_its_rate_in_records_with_a_quarter_of_headroom() -> None:
    """A shard takes 1,000 records/s; each job puts 3 on the stream; job ids spread evenly over the shards."""
    for target, row in TIERS.items():
        per_shard = stream_sizing.EVENTS_PER_JOB * int(target) / row["Shards"]
        assert per_shard <= 0.75 * stream_sizing.SHARD_RECORDS_PER_S, target
        assert row["Shards"] == math.ceil(stream_sizing.EVENTS_PER_JOB * int(target) / 750), target  # none more


def test_every_tier_carries_its_rate_in_bytes_even_when_every_job_returns_an_inline_result() -> None:
    """A shard takes 1 MB/s: the golden event (which has a result) for each event of a job, plus the largest
    inline result on its ending event, stays within the same headroom."""
    event_bytes = len(json.dumps(json.loads(GOLDEN_EVENT.read_text()), separators=(",", ":")))
    job_bytes = stream_sizing.EVENTS_PER_JOB * event_bytes + MAX_INLINE_RESULT_BYTES
    for target, row in TIERS.items():
        assert int(target) * job_bytes / row["Shards"] <= 0.75 * SHARD_BYTES_PER_S, target


def test_the_projector_takes_a_shards_peak_second_in_two_batches() -> None:
    """One invocation per shard at a time (ParallelizationFactor 1, for the heartbeats): its batches must be
    large enough that a shard at its tier's rate needs at most two invocations a second."""
    mapping: dict[str, Any] = RESOURCES["ProjectorFunction"]["Properties"]["Events"]["Events"]
    properties = mapping["Properties"]
    assert properties["ParallelizationFactor"] == 1
    for target, row in TIERS.items():
        assert 2 * properties["BatchSize"] >= stream_sizing.EVENTS_PER_JOB * int(target) / row["Shards"], target


def test_the_lambda_workers_reserved_concurrency_is_what_its_mapping_runs_plus_the_backstop() -> None:
    """On-demand starts at 4 shards and grows: with the provisioned row's invocations per shard its mapping
    would run more invocations than reserved, and the Throttles alarm would stay on. Each mode has its own
    columns; at every shard count an on-demand stream passes through on its way to the target the mapping fits."""
    function = RESOURCES["WorkerFunction"]["Properties"]
    assert function["ReservedConcurrentExecutions"] == {
        "Fn::If": ["OnDemandEvents", sized("OnDemandWorkerReservedConcurrency"), sized("WorkerReservedConcurrency")]}
    assert function["Events"]["Wake"]["Properties"]["ParallelizationFactor"] == {
        "Fn::If": ["OnDemandEvents", sized("OnDemandWakeInvocationsPerShard"), sized("WakeInvocationsPerShard")]}
    for target, row in TIERS.items():
        assert row["Shards"] * row["WakeInvocationsPerShard"] + 1 == row["WorkerReservedConcurrency"], target
        assert 1 <= row["WakeInvocationsPerShard"] <= 10 and 1 <= row["OnDemandWakeInvocationsPerShard"] <= 10
        assert row["OnDemandShards"] >= stream_sizing.ON_DEMAND_INITIAL_SHARDS
        for shards in range(stream_sizing.ON_DEMAND_INITIAL_SHARDS, row["OnDemandShards"] + 1):
            assert shards * row["OnDemandWakeInvocationsPerShard"] + 1 <= row["OnDemandWorkerReservedConcurrency"]


def test_kinesis_write_throttling_and_a_load_above_the_target_alarm() -> None:
    """Throttled writes mean a shard past its limits (the relay retries, statuses show late); the above-target
    alarm's threshold is the target's events a minute, so it moves with the one number."""
    throttled = RESOURCES["EventsStreamWriteThrottleAlarm"]["Properties"]
    assert (throttled["Namespace"], throttled["MetricName"]) == ("AWS/Kinesis", "WriteProvisionedThroughputExceeded")
    assert throttled["Dimensions"] == [{"Name": "StreamName", "Value": {"Ref": "EventsStream"}}]
    assert (throttled["Threshold"], throttled["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    above = RESOURCES["EventsAboveTargetAlarm"]["Properties"]
    assert (above["Namespace"], above["MetricName"], above["Statistic"], above["Period"]) == (
        "AWS/Kinesis", "IncomingRecords", "Sum", 60)
    assert above["Threshold"] == sized("EventsPerMinuteAtTarget")
    for target, row in TIERS.items():
        assert row["EventsPerMinuteAtTarget"] == stream_sizing.EVENTS_PER_JOB * int(target) * 60


def test_the_deploy_docs_table_is_the_mapping() -> None:
    """docs/deploy.md's sizing table, row by row: target, shards, invocations per shard, reserved concurrency,
    on-demand shards, invocations per shard and reserved concurrency."""
    rows = re.findall(r"^\| ([\d,]+)(?: \(default\))? \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$",
                      DEPLOY_DOC.read_text(), flags=re.MULTILINE)
    documented = {row[0].replace(",", ""): [int(value) for value in row[1:]] for row in rows}
    assert documented == {target: [row["Shards"], row["WakeInvocationsPerShard"], row["WorkerReservedConcurrency"],
                                   row["OnDemandShards"], row["OnDemandWakeInvocationsPerShard"],
                                   row["OnDemandWorkerReservedConcurrency"]]
                          for target, row in TIERS.items()}

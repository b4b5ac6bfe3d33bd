"""What one number, the platform's target job rate (all tenants together), sizes on AWS (pure).

template.yaml's TargetJobsPerSecond picks a row of its EventsStreamSizing mapping (CloudFormation cannot do
arithmetic on a parameter); every column of that mapping is this module's arithmetic for the row's rate, and
tests/unit/project/test_template_stream_sizing.py fails when the two drift. `onward capacity
--target-jobs-per-second` prints it.

- Provisioned shards: each job puts 3 events on the events stream (created, claimed, ended) and a shard takes
  1,000 records a second, so ceil(3 x rate / 750): a quarter of headroom below the record limit.
- On-demand shards: Kinesis starts an on-demand stream at 4 shards' capacity and scales it to twice the peak it
  has seen, so at the target up to ceil(2 x 3 x rate / 1,000) shards, never fewer than 4.
- The Lambda worker's wake-up mapping runs shards x invocations per shard at once; the invocations per shard
  (ParallelizationFactor, 1 to 10) keep that near 40 wake-ups in flight. Its reserved concurrency is exactly
  that plus 1 for the backstop schedule's invocation: with less, wake-ups are throttled and the function's
  Throttles alarm stays on; with more, the workers take account concurrency the mapping can never use.
- The above-target alarm's threshold: the events a minute at the target rate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

EVENTS_PER_JOB = 3  # created, claimed, ended
SHARD_RECORDS_PER_S = 1_000  # Kinesis: records a shard takes a second
HEADROOM = 0.75  # a provisioned stream is sized to use at most this share of its record limit at the target
ON_DEMAND_INITIAL_SHARDS = 4  # an on-demand stream's capacity when created (4 MB/s, 4,000 records/s)
ON_DEMAND_PEAK_FACTOR = 2  # an on-demand stream scales to twice the highest rate it has seen
WAKE_INVOCATIONS_GOAL = 40  # wake-up invocations in flight the Lambda worker's mapping aims at
MAX_INVOCATIONS_PER_SHARD = 10  # Lambda's ParallelizationFactor range is 1 to 10
BACKSTOP_INVOCATIONS = 1  # the worker's schedule invokes it once per period besides the mapping
TARGET_TIERS = (250, 500, 1_000, 2_500, 5_000, 10_000, 20_000)  # TargetJobsPerSecond's allowed values


@dataclass(frozen=True)
class StreamSizing:
    """One row of template.yaml's EventsStreamSizing mapping, named as its columns are."""

    Shards: int  # provisioned shards of the events stream
    WakeInvocationsPerShard: int  # the worker mapping's ParallelizationFactor on a provisioned stream
    WorkerReservedConcurrency: int  # the Lambda worker's reserved concurrency on a provisioned stream
    OnDemandShards: int  # the most shards an on-demand stream grows to at the target
    OnDemandWakeInvocationsPerShard: int
    OnDemandWorkerReservedConcurrency: int
    EventsPerMinuteAtTarget: int  # the above-target alarm's threshold

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def provisioned_shards(jobs_per_s: int) -> int:
    return math.ceil(EVENTS_PER_JOB * jobs_per_s / (HEADROOM * SHARD_RECORDS_PER_S))


def on_demand_shards(jobs_per_s: int) -> int:
    peak_records_per_s = ON_DEMAND_PEAK_FACTOR * EVENTS_PER_JOB * jobs_per_s
    return max(ON_DEMAND_INITIAL_SHARDS, math.ceil(peak_records_per_s / SHARD_RECORDS_PER_S))


def wake_invocations_per_shard(shards: int) -> int:
    return min(MAX_INVOCATIONS_PER_SHARD, max(1, WAKE_INVOCATIONS_GOAL // shards))


def worker_reserved_concurrency(shards: int) -> int:
    return shards * wake_invocations_per_shard(shards) + BACKSTOP_INVOCATIONS


def size_for(jobs_per_s: int) -> StreamSizing:
    """The events stream and what follows it, for a platform whose peak is `jobs_per_s` jobs a second."""
    if jobs_per_s < 1:
        raise ValueError("the target job rate must be at least 1 job a second")
    shards, on_demand = provisioned_shards(jobs_per_s), on_demand_shards(jobs_per_s)
    return StreamSizing(
        Shards=shards,
        WakeInvocationsPerShard=wake_invocations_per_shard(shards),
        WorkerReservedConcurrency=worker_reserved_concurrency(shards),
        OnDemandShards=on_demand,
        OnDemandWakeInvocationsPerShard=wake_invocations_per_shard(on_demand),
        OnDemandWorkerReservedConcurrency=worker_reserved_concurrency(on_demand),
        EventsPerMinuteAtTarget=EVENTS_PER_JOB * jobs_per_s * 60,
    )


def tier_for(jobs_per_s: float) -> int:
    """The smallest of TargetJobsPerSecond's values that carries `jobs_per_s` (ValueError above the largest)."""
    for tier in TARGET_TIERS:
        if jobs_per_s <= tier:
            return tier
    raise ValueError(f"above {TARGET_TIERS[-1]:,} jobs/s: no tier; run several stacks or raise the tiers")

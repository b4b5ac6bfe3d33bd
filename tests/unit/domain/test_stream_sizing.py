"""The sizing arithmetic (onward/domain/stream_sizing.py) that template.yaml's EventsStreamSizing mapping is made
of, and `onward capacity --target-jobs-per-second`, which prints it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onward.cli.main import main
from onward.domain.stream_sizing import TARGET_TIERS, size_for, tier_for


def test_the_default_target_is_40_shards_one_wake_up_each_and_the_backstop() -> None:
    sizing = size_for(10_000)
    assert (sizing.Shards, sizing.WakeInvocationsPerShard, sizing.WorkerReservedConcurrency) == (40, 1, 41)
    assert sizing.EventsPerMinuteAtTarget == 1_800_000


def test_a_starting_team_needs_one_shard_and_on_demand_starts_at_four() -> None:
    sizing = size_for(250)
    assert (sizing.Shards, sizing.WakeInvocationsPerShard, sizing.WorkerReservedConcurrency) == (1, 10, 11)
    assert (sizing.OnDemandShards, sizing.OnDemandWakeInvocationsPerShard) == (4, 10)
    assert sizing.OnDemandWorkerReservedConcurrency == 41


@given(st.integers(min_value=1, max_value=50_000))
def test_the_shards_carry_the_rate_and_the_reservation_covers_the_mapping(jobs_per_s: int) -> None:
    sizing = size_for(jobs_per_s)
    assert 3 * jobs_per_s / sizing.Shards <= 750
    assert sizing.OnDemandShards >= max(4, 6 * jobs_per_s / 1_000)
    for shards, per_shard, reserved in ((sizing.Shards, sizing.WakeInvocationsPerShard,
                                         sizing.WorkerReservedConcurrency),
                                        (sizing.OnDemandShards, sizing.OnDemandWakeInvocationsPerShard,
                                         sizing.OnDemandWorkerReservedConcurrency)):
        assert 1 <= per_shard <= 10
        assert reserved == shards * per_shard + 1


def test_a_rate_picks_the_smallest_tier_that_carries_it() -> None:
    assert [tier_for(rate) for rate in (1, 250, 251, 9_999.5, 20_000)] == [250, 250, 500, 10_000, 20_000]
    assert list(TARGET_TIERS) == sorted(TARGET_TIERS)
    with pytest.raises(ValueError, match="20,000"):
        tier_for(20_001)
    with pytest.raises(ValueError, match="at least 1"):
        size_for(0)


def test_onward_capacity_prints_the_tier_and_its_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--target-jobs-per-second", "300", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"TargetJobsPerSecond": 500, **size_for(500).as_dict()}
    assert main(["capacity", "--target-jobs-per-second", "300"]) == 0
    assert "WorkerReservedConcurrency          21" in capsys.readouterr().out


def test_onward_capacity_without_a_target_needs_the_consumer_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--slots", "3"]) == 2
    assert "--arrival-rate, --write-ms, --recovered-write-ms" in capsys.readouterr().err
    assert main(["capacity", "--target-jobs-per-second", "30000"]) == 2

"""onward.operator.lag.assess (pure): processing age, backlog, rates, drain time and retention cover."""

from __future__ import annotations

from onward.operator.lag import Commit, Snapshot, assess
from onward.pipeline.shards import Shard

MAX_HASH = 2**128 - 1
ONE_SHARD = [Shard("shard-0", 0, MAX_HASH)]
T0 = 1_800_000_000_000


def commits(start_ms: int, count: int, spacing_ms: int) -> list[Commit]:
    return [Commit(f"{n:032x}", start_ms + n * spacing_ms) for n in range(count)]


def test_a_backlog_that_drains_gives_drain_time_and_envelope() -> None:
    history = commits(T0, 3_200, 5)  # 200 events/s for 16 s
    before = Snapshot(T0 + 11_000, {"shard-0": T0 + 5_000}, T0)
    after = Snapshot(T0 + 16_000, {"shard-0": T0 + 14_000}, T0 + 15_000)  # catching up: 9 s of commits in 5 s
    report = assess(before, after, ONE_SHARD, history, outbox_retention_s=7 * 86400, stream_retention_s=86400)
    assert report.backlog == 399  # commits after the watermark: 14,005 .. 15,995 ms
    assert report.service_rate_per_s == 1_800 / 5  # the watermark moved past 1,800 commits in 5 s
    assert report.arrival_rate_per_s == 999 / 5  # commits at 11,005 .. 15,995 ms
    assert report.processing_age_s == 2.0
    assert report.relay_age_s == 1.0
    assert report.drain_s == round(399 / (360 - 199.8), 3)
    assert report.envelope_s == round(2.0 + 399 / (360 - 199.8), 3)
    assert report.outbox_covers and report.stream_covers


def test_arrivals_outrunning_service_never_drain_and_nothing_covers() -> None:
    history = commits(T0, 2_000, 10)  # 100/s for 20 s
    before = Snapshot(T0 + 5_000, {"shard-0": T0 + 1_000}, None)
    after = Snapshot(T0 + 10_000, {"shard-0": T0 + 1_500}, None)  # 50 events projected in 5 s: 10/s
    report = assess(before, after, ONE_SHARD, history, outbox_retention_s=3600, stream_retention_s=3600)
    assert report.service_rate_per_s == 10.0 and report.arrival_rate_per_s == 100.0
    assert report.drain_s is None and report.envelope_s is None
    assert not report.outbox_covers and not report.stream_covers
    assert report.relay_age_s is None


def test_an_idle_caught_up_pipeline_has_no_backlog_and_covers() -> None:
    before = Snapshot(T0, {"a": T0 - 1_000, "b": T0 - 1_000}, T0 - 1_000)
    after = Snapshot(T0 + 5_000, {"a": T0 + 4_000, "b": T0 + 4_500}, T0 + 4_500)  # heartbeats moved them
    shards = [Shard("a", 0, MAX_HASH // 2), Shard("b", MAX_HASH // 2 + 1, MAX_HASH)]
    report = assess(before, after, shards, [], outbox_retention_s=86400, stream_retention_s=86400)
    assert (report.backlog, report.drain_s, report.processing_age_s) == (0, 0.0, 1.0)
    assert report.outbox_covers and report.stream_covers


def test_a_shard_that_was_never_projected_makes_the_age_unknown_and_counts_its_commits() -> None:
    shards = [Shard("a", 0, MAX_HASH // 2), Shard("b", MAX_HASH // 2 + 1, MAX_HASH)]
    history = commits(T0, 100, 10)
    on_b = sum(1 for c in history if shards[1].holds(c.job_id))
    after = Snapshot(T0 + 2_000, {"a": T0 + 2_000}, None)
    report = assess(Snapshot(T0, {}, None), after, shards, history, 86400, 86400)
    assert report.processing_age_s is None and report.envelope_s is None
    assert report.backlog == on_b and 0 < on_b < 100

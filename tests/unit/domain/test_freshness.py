"""onward.domain.freshness (pure): a status's age and the view's lag bound from the projector's watermarks, one per
Kinesis shard, each the oldest heartbeat slot's commit time (onward.pipeline.checkpoints). A bound that errs the safe
way: the oldest shard's watermark, never when the projector last ran. The open shards a caller lists
(`shards`: a shard never projected, a child of a reshard) are tested in test_heartbeat_slots.py."""

from __future__ import annotations

from onward.domain.clock import iso
from onward.domain.freshness import freshness, view_lag
from onward.pipeline.checkpoints import Watermark

NOW = 1_800_000_000_000


def mark(shard: str, newest_s_ago: float, processed_s_ago: float = 0, parents: tuple[str, ...] = ()) -> Watermark:
    return Watermark(shard, iso(NOW - int(newest_s_ago * 1000)), iso(NOW - int(processed_s_ago * 1000)), parents)


def test_age_and_lag_from_the_oldest_shard_watermark() -> None:
    f = freshness(iso(NOW - 12_000), [mark("a", 2), mark("b", 5)], NOW, stale_after_s=30)
    assert f.as_of == iso(NOW - 12_000)
    assert f.age_s == 12.0
    assert f.view_lag_s == 5.0
    assert f.watermark == iso(NOW - 5_000)
    assert f.stale is False


def test_a_busy_projector_far_behind_is_stale_even_if_it_just_processed_a_batch() -> None:
    f = freshness(iso(NOW - 1_000), [mark("a", newest_s_ago=600, processed_s_ago=0)], NOW, stale_after_s=30)
    assert f.view_lag_s == 600.0
    assert f.stale is True


def test_lag_over_threshold_is_stale_and_at_threshold_is_not() -> None:
    assert freshness(iso(NOW), [mark("a", 30)], NOW, stale_after_s=30).stale is False
    assert freshness(iso(NOW), [mark("a", 30.001)], NOW, stale_after_s=30).stale is True


def test_no_watermark_means_unknown_lag_and_stale() -> None:
    f = freshness(iso(NOW - 1_000), [], NOW)
    assert f.view_lag_s is None and f.watermark is None and f.stale is True


def test_clock_skew_never_gives_negative_ages() -> None:
    f = freshness(iso(NOW + 5_000), [mark("a", -3)], NOW)
    assert f.age_s == 0.0 and f.view_lag_s == 0.0


def test_view_lag_is_the_oldest_shards_bound_and_unknown_without_watermarks() -> None:
    lag = view_lag([mark("a", 1), mark("b", 4)], NOW, stale_after_s=3)
    assert (lag.view_lag_s, lag.watermark, lag.stale, lag.shards) == (4.0, iso(NOW - 4_000), True, 2)
    empty = view_lag([], NOW, stale_after_s=3)
    assert (empty.view_lag_s, empty.watermark, empty.stale, empty.shards) == (None, None, True, 0)
    assert empty.measured_at == iso(NOW) and empty.stale_after_s == 3


def test_a_drained_parent_shard_stops_bounding_the_lag_once_a_child_names_it() -> None:
    """After a reshard the parent gets nothing more: its watermark stays at its last event. Without the
    retirement the view would read as delayed forever; a child names its parents only once it was read,
    which a consumer does only after the parents were drained."""
    before = [mark("p", 600), mark("q", 1)]
    assert view_lag(before, NOW, stale_after_s=30).stale is True  # the child has no heartbeat yet: p counts
    after = [mark("p", 600), mark("q", 1), mark("c1", 2, parents=("p",)), mark("c2", 3, parents=("p",))]
    lag = view_lag(after, NOW, stale_after_s=30)
    assert (lag.view_lag_s, lag.stale, lag.shards) == (3.0, False, 3)
    merged = [mark("a", 900), mark("b", 800), mark("m", 5, parents=("a", "b"))]  # a merge names two parents
    assert view_lag(merged, NOW, stale_after_s=30).view_lag_s == 5.0

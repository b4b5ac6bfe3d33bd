"""The status view's lag per events-stream shard, for operators (pure): which shards bound the view, what
each is confirmed through and how (its own watermark, its parents' after a reshard, or unknown), and how far
behind that is now. The whole view's lag (onward.domain.freshness.view_lag) is the worst of these."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from onward.domain.clock import EpochMs
from onward.domain.freshness import ShardLineage, ShardWatermark, shard_bounds


class BoundedBy(StrEnum):
    OWN = "own"  # the shard's own watermark: the projector confirmed it through a full beat
    PARENTS = "parents"  # a child of a reshard with no watermark yet: its parents' (drained before it is read)
    UNKNOWN = "unknown"  # never confirmed: the view's lag cannot be known while it counts


class _Watermark(ShardWatermark, Protocol):
    @property
    def processed_at(self) -> str: ...
    @property
    def slots(self) -> int: ...


@dataclass(frozen=True)
class ShardLag:
    shard_id: str
    parents: tuple[str, ...]
    bounded_by: BoundedBy
    confirmed_through: EpochMs | None  # every commit before it is in the view, as far as this shard goes
    lag_s: float | None  # now - confirmed_through; None when unknown
    stale: bool  # unknown, or over the threshold
    processed_at: str | None  # when the projector last passed a heartbeat on from this shard
    slots: int  # heartbeat slots of the newest beat it saw


def shard_lags(watermarks: Iterable[_Watermark], shards: Iterable[ShardLineage] | None, now_ms: EpochMs,
               stale_after_s: float) -> list[ShardLag]:
    """One row per shard that bounds the view (onward.domain.freshness.shard_bounds), in shard id order."""
    marks = list(watermarks)
    listed = list(shards or ())
    own = {mark.shard_id: mark for mark in marks}
    parents = {shard.shard_id: shard.parents for shard in listed}
    rows: list[ShardLag] = []
    for shard_id, confirmed in sorted(shard_bounds(marks, listed).items()):
        mark = own.get(shard_id)
        if confirmed is None:
            bounded_by = BoundedBy.UNKNOWN
        elif mark is not None and mark.newest_event_at is not None:
            bounded_by = BoundedBy.OWN
        else:
            bounded_by = BoundedBy.PARENTS
        lag_s = None if confirmed is None else round(max(0.0, (now_ms - confirmed) / 1000), 3)
        rows.append(ShardLag(
            shard_id=shard_id, parents=parents.get(shard_id, mark.parents if mark else ()), bounded_by=bounded_by,
            confirmed_through=confirmed, lag_s=lag_s, stale=lag_s is None or lag_s > stale_after_s,
            processed_at=mark.processed_at if mark else None, slots=mark.slots if mark else 0))
    return rows

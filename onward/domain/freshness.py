"""How fresh the status view is (pure).

A status is always shown with when it became true (`as_of`, the transition's commit time) and with how far
behind the view may be (`view_lag_s`), so a reader can tell "this job has not changed for 5 minutes" from
"the view has not heard anything for 5 minutes".

The choice of view_lag_s. The projector keeps, per Kinesis shard, a watermark (onward.pipeline.checkpoints): every
commit before it has been projected from that shard, in every partition of the outbox (the heartbeat slots
of onward.pipeline.heartbeats). Measuring the lag from when the projector last ran would lie in the dangerous
direction (a projector that keeps finishing batches ten minutes behind the stream looks fresh); measuring
from the watermarks can only err the safe way:

    view_lag_s = now - min over the events stream's shards of their watermark

Every shard counts: one the projector has not confirmed through a full beat yet (never projected, or not
heard from in every slot) has no watermark of its own; it is bounded by its parents' (a child of a reshard
is read only after its parents are drained), or, with none, makes the lag unknown (None) and the view
stale. An idle system stays fresh because heartbeats move every watermark; a stopped relay or projector
stops them too. `stale` is true when the lag exceeds the threshold, or cannot be known.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from onward.domain.clock import EpochMs, epoch_ms, iso
from onward.domain.models import Freshness, ReplicationState, ViewLag
from onward.domain.replication_status import still_unreconciled

STALE_AFTER_S = 30.0


class ShardWatermark(Protocol):
    """What freshness reads of a watermark (onward.pipeline.checkpoints.Watermark)."""

    @property
    def shard_id(self) -> str: ...
    @property
    def newest_event_at(self) -> str | None: ...
    @property
    def parents(self) -> tuple[str, ...]: ...


class ShardLineage(Protocol):
    """What freshness reads of a shard (onward.pipeline.shards.Shard)."""

    @property
    def shard_id(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...


_W = TypeVar("_W", bound=ShardWatermark)


def live_watermarks(watermarks: Iterable[_W]) -> list[_W]:
    """The watermarks that still bound the view: all but those of shards another one names as its parent
    (a child shard is read only once its parents are drained, so a named parent receives nothing more)."""
    marks = list(watermarks)
    retired = {parent for mark in marks for parent in mark.parents}
    return [mark for mark in marks if mark.shard_id not in retired]


def shard_bounds(watermarks: Iterable[ShardWatermark],
                 shards: Iterable[ShardLineage] | None = None) -> dict[str, EpochMs | None]:
    """Per shard that bounds the view, the commit time it is confirmed through (None: unknown). The live
    watermarks, and every open shard in `shards` (None: only the watermarks are known): one with no
    confirmed watermark of its own counts as its oldest parent's, or as unknown."""
    marks = list(watermarks)
    confirmed = {mark.shard_id: epoch_ms(mark.newest_event_at) for mark in marks if mark.newest_event_at}
    bounds: dict[str, EpochMs | None] = {mark.shard_id: confirmed.get(mark.shard_id)
                                         for mark in live_watermarks(marks)}
    for shard in shards or ():
        if shard.shard_id in confirmed:
            bounds[shard.shard_id] = confirmed[shard.shard_id]
            continue
        inherited = [confirmed[parent] for parent in shard.parents if parent in confirmed]
        complete = bool(inherited) and len(inherited) == len(shard.parents)
        bounds[shard.shard_id] = min(inherited) if complete else None
        for parent in shard.parents:
            bounds.pop(parent, None)  # counted through its child
    return bounds


def view_lag(watermarks: Iterable[ShardWatermark], now_ms: EpochMs, stale_after_s: float = STALE_AFTER_S,
             shards: Iterable[ShardLineage] | None = None, replication: ReplicationState | None = None) -> ViewLag:
    """The whole view's lag bound: from the oldest shard's watermark (onward.domain.freshness), over every open
    shard of `shards` when the caller lists them (a shard never projected then makes it unknown). After a
    failover, `replication` (onward.domain.replication_status) rides along and keeps it stale until reconciled."""
    bounds = shard_bounds(watermarks, shards)
    if not bounds or None in bounds.values():
        return ViewLag(measured_at=iso(now_ms), view_lag_s=None, watermark=None, stale=True,
                       stale_after_s=stale_after_s, shards=len(bounds), replication=replication)
    confirmed = min(at for at in bounds.values() if at is not None)
    lag_s = round(max(0.0, (now_ms - confirmed) / 1000), 3)
    return ViewLag(measured_at=iso(now_ms), view_lag_s=lag_s, watermark=iso(confirmed),
                   stale=lag_s > stale_after_s or still_unreconciled(replication),
                   stale_after_s=stale_after_s, shards=len(bounds), replication=replication)


def freshness(
    occurred_at: str,
    watermarks: Iterable[ShardWatermark],
    now_ms: EpochMs,
    stale_after_s: float = STALE_AFTER_S,
) -> Freshness:
    """One shown status: when it became true, and the view's lag bound."""
    return freshness_of(occurred_at, view_lag(watermarks, now_ms, stale_after_s), now_ms)


def freshness_of(occurred_at: str, lag: ViewLag, now_ms: EpochMs) -> Freshness:
    """One shown status, with the view's lag already measured (one measure serves a whole page)."""
    age_s = round(max(0.0, (now_ms - epoch_ms(occurred_at)) / 1000), 3)
    return Freshness(as_of=occurred_at, age_s=age_s, view_lag_s=lag.view_lag_s, watermark=lag.watermark,
                     stale=lag.stale or still_unreconciled(lag.replication), replication=lag.replication)

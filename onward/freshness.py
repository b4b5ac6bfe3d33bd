"""How fresh the status view is (pure).

A status is always shown with when it became true (`as_of`, the transition's commit time) and with how far
behind the view may be (`view_lag_s`), so a reader can tell "this job has not changed for 5 minutes" from
"the view has not heard anything for 5 minutes".

The choice of view_lag_s. The projector keeps, per Kinesis shard, a watermark: `newest_event_at` (the newest
commit time it has projected from that shard) and `processed_at` (when it last finished a batch). Measuring
the lag from `processed_at` would lie in the dangerous direction: a projector that keeps finishing batches
but is ten minutes behind the stream (high iterator age) looks fresh. Measuring from `newest_event_at` can
only err the safe way: the view is confirmed complete up to the OLDEST shard's newest projected commit, so

    view_lag_s = now - min over shards of newest_event_at      (None when no shard has a watermark yet)

is an upper bound on how far behind the view is. An idle system would make that bound grow without end;
pipeline heartbeats (onward.heartbeat) pass through the same path on a schedule and move every shard's
watermark, so an idle healthy system reads as fresh (lag about one heartbeat interval) while a stopped relay
or projector stops them too. `stale` is true when the lag exceeds the threshold, or cannot be known.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from onward.clock import EpochMs, epoch_ms, iso
from onward.models import Freshness, ViewLag

STALE_AFTER_S = 30.0


class _Watermark(Protocol):
    @property
    def shard_id(self) -> str: ...
    @property
    def newest_event_at(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...


_W = TypeVar("_W", bound=_Watermark)


def live_watermarks(watermarks: Iterable[_W]) -> list[_W]:
    """The watermarks that still bound the view: all but those of shards another one names as its parent
    (a child shard is read only once its parents are drained, so a named parent receives nothing more)."""
    marks = list(watermarks)
    retired = {parent for mark in marks for parent in mark.parents}
    return [mark for mark in marks if mark.shard_id not in retired]


def view_lag(watermarks: Iterable[_Watermark], now_ms: EpochMs, stale_after_s: float = STALE_AFTER_S) -> ViewLag:
    """The whole view's lag bound from the projector's per-shard watermarks: the oldest live one (a drained
    parent shard's watermark stays at its last event and would otherwise read as delayed forever)."""
    marks = [epoch_ms(mark.newest_event_at) for mark in live_watermarks(watermarks)]
    if not marks:
        return ViewLag(measured_at=iso(now_ms), view_lag_s=None, watermark=None, stale=True,
                       stale_after_s=stale_after_s, shards=0)
    confirmed = min(marks)
    lag_s = round(max(0.0, (now_ms - confirmed) / 1000), 3)
    return ViewLag(measured_at=iso(now_ms), view_lag_s=lag_s, watermark=iso(confirmed), stale=lag_s > stale_after_s,
                   stale_after_s=stale_after_s, shards=len(marks))


def freshness(
    occurred_at: str,
    watermarks: Iterable[_Watermark],
    now_ms: EpochMs,
    stale_after_s: float = STALE_AFTER_S,
) -> Freshness:
    """One shown status: when it became true, and the view's lag bound."""
    return freshness_of(occurred_at, view_lag(watermarks, now_ms, stale_after_s), now_ms)


def freshness_of(occurred_at: str, lag: ViewLag, now_ms: EpochMs) -> Freshness:
    """One shown status, with the view's lag already measured (one measure serves a whole page)."""
    age_s = round(max(0.0, (now_ms - epoch_ms(occurred_at)) / 1000), 3)
    return Freshness(as_of=occurred_at, age_s=age_s, view_lag_s=lag.view_lag_s, watermark=lag.watermark,
                     stale=lag.stale)

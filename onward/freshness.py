"""How fresh a status shown from the status view is (pure).

A status is always shown with when it became true (`as_of`, the transition's commit time) and with how far
behind the view may be (`view_lag_s`), so a reader can tell "this job has not changed for 5 minutes" from
"the view has not heard anything for 5 minutes".

The choice of view_lag_s. The projector keeps, per Kinesis shard, a watermark: `newest_event_at` (the newest
commit time it has projected from that shard) and `processed_at` (when it last finished a batch). Measuring
the lag from `processed_at` would lie in the dangerous direction: a projector that keeps finishing batches
but is ten minutes behind the stream (high iterator age) looks fresh. Measuring from `newest_event_at` can
only err the safe way: the view is confirmed complete up to the OLDEST shard's newest projected event, so

    view_lag_s = now - min over shards of newest_event_at      (None when no shard has a watermark yet)

is an upper bound on how far behind the view is. Its price: when nothing is committed for a while (an idle
stream) the bound keeps growing and the status reads as possibly delayed. That is a false alarm, never a
false reassurance; the cure is a periodic heartbeat event through the outbox per shard, which moves every
watermark while the system is idle. `stale` is true when the lag exceeds the threshold, or when it cannot be
known (no watermark at all).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from onward.clock import EpochMs, iso

STALE_AFTER_S = 30.0


class _Watermark(Protocol):
    newest_event_at: str
    processed_at: str


class Freshness(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    as_of: str  # when the shown status became true (commit time of its transition)
    age_s: float  # now - as_of
    view_lag_s: float | None  # upper bound of how far behind the view is; None when unknown
    watermark: str | None  # the view is confirmed complete up to this commit time
    stale: bool


def epoch_ms(moment: str) -> EpochMs:
    """ISO-8601 (with Z) -> epoch milliseconds."""
    return int(datetime.fromisoformat(moment).timestamp() * 1000)


def freshness(
    occurred_at: str,
    watermarks: Iterable[_Watermark],
    now_ms: EpochMs,
    stale_after_s: float = STALE_AFTER_S,
) -> Freshness:
    age_s = max(0.0, (now_ms - epoch_ms(occurred_at)) / 1000)
    marks = [epoch_ms(mark.newest_event_at) for mark in watermarks]
    if not marks:
        return Freshness(as_of=occurred_at, age_s=round(age_s, 3), view_lag_s=None, watermark=None, stale=True)
    confirmed = min(marks)
    lag_s = max(0.0, (now_ms - confirmed) / 1000)
    return Freshness(as_of=occurred_at, age_s=round(age_s, 3), view_lag_s=round(lag_s, 3),
                     watermark=iso(confirmed), stale=lag_s > stale_after_s)

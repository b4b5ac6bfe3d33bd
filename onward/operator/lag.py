"""`onward lag`: the event path's live lag, and whether retention covers it.

Two samples of the pipeline's own telemetry, `window` seconds apart: the projector's per-shard watermarks
(newest projected commit time; heartbeats keep them moving while idle), the relay's checkpoints, and the
outbox itself (every committed event, with its commit time). From them:

- processing age: now - the oldest shard's watermark (how old the newest thing the view may be missing is);
- commit times: the outbox keeps no commit time, so an event's decision time (`occurred_at`, earlier by its
  commit's duration: milliseconds, unless the commit was retried) stands in for it; a backlog counted here
  can be short by the events committed just after a watermark but decided just before it;
- backlog per shard: events committed after that shard's watermark (each job's events go to the shard its
  job id hashes to, as Kinesis places them);
- arrival rate: events committed during the window; service rate: events the watermarks moved past;
- drain time: backlog / (service - arrival), None while arrivals outrun service;
- envelope: processing age + drain time, to compare with the outbox's and the stream's retention.

`assess` is pure; `LagProbe` reads the telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from onward.domain.clock import Clock, EpochMs, epoch_ms, iso, system_clock
from onward.domain.freshness import live_watermarks
from onward.pipeline.checkpoints import OUTBOX_STREAM, PROJECTOR_CONSUMER, RELAY_CONSUMER, CheckpointStore
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.shards import Shard, open_shards

RETENTION_MARGIN = 2.0  # retention should be at least twice the envelope


@dataclass(frozen=True)
class Commit:
    """An outbox event as lag needs it."""

    job_id: str
    at: EpochMs


@dataclass(frozen=True)
class Snapshot:
    taken_at: EpochMs
    watermarks: dict[str, EpochMs]  # shard id -> newest projected commit time
    relay_reached: EpochMs | None  # the relay's watermark: every commit before it was published


@dataclass(frozen=True)
class ShardLag:
    shard_id: str
    watermark: str | None
    age_s: float | None
    backlog: int


@dataclass(frozen=True)
class LagReport:
    measured_at: str
    window_s: float
    processing_age_s: float | None  # None: no shard projected yet
    relay_age_s: float | None
    backlog: int
    arrival_rate_per_s: float
    service_rate_per_s: float
    drain_s: float | None  # None: arrivals outrun service, the backlog does not drain
    envelope_s: float | None  # processing age + drain time
    outbox_retention_s: float
    stream_retention_s: float
    outbox_covers: bool  # retention >= RETENTION_MARGIN x the envelope
    stream_covers: bool
    shards: tuple[ShardLag, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def assess(before: Snapshot, after: Snapshot, shards: Sequence[Shard], commits: Sequence[Commit],
           outbox_retention_s: float, stream_retention_s: float) -> LagReport:
    """The lag report from two snapshots and the commits since the older snapshot's oldest watermark."""
    window_s = max(0.001, (after.taken_at - before.taken_at) / 1000)
    per_shard: list[ShardLag] = []
    backlog = served = 0
    for shard in shards:
        mark = after.watermarks.get(shard.shard_id)
        earlier = before.watermarks.get(shard.shard_id)
        mine = [commit for commit in commits if shard.holds(commit.job_id)]
        waiting = sum(1 for commit in mine if mark is None or commit.at > mark)
        if mark is not None:
            served += sum(1 for commit in mine if (earlier is None or commit.at > earlier) and commit.at <= mark)
        backlog += waiting
        per_shard.append(ShardLag(shard.shard_id, None if mark is None else iso(mark),
                                  None if mark is None else max(0.0, (after.taken_at - mark) / 1000), waiting))
    ages = [s.age_s for s in per_shard if s.age_s is not None]
    processing_age = max(ages) if ages and len(ages) == len(per_shard) else None
    arrivals = sum(1 for commit in commits if before.taken_at < commit.at <= after.taken_at)
    arrival_rate, service_rate = arrivals / window_s, served / window_s
    if backlog == 0:
        drain: float | None = 0.0
    else:
        drain = backlog / (service_rate - arrival_rate) if service_rate > arrival_rate else None
    envelope = None if drain is None or processing_age is None else processing_age + drain
    relay_age = None if after.relay_reached is None else max(0.0, (after.taken_at - after.relay_reached) / 1000)

    def covers(retention_s: float) -> bool:
        return envelope is not None and retention_s >= RETENTION_MARGIN * envelope

    return LagReport(
        measured_at=iso(after.taken_at), window_s=round(window_s, 3),
        processing_age_s=None if processing_age is None else round(processing_age, 3),
        relay_age_s=None if relay_age is None else round(relay_age, 3),
        backlog=backlog, arrival_rate_per_s=round(arrival_rate, 3), service_rate_per_s=round(service_rate, 3),
        drain_s=None if drain is None else round(drain, 3),
        envelope_s=None if envelope is None else round(envelope, 3),
        outbox_retention_s=outbox_retention_s, stream_retention_s=stream_retention_s,
        outbox_covers=covers(outbox_retention_s), stream_covers=covers(stream_retention_s),
        shards=tuple(per_shard),
    )


class LagProbe:
    """Reads the telemetry `assess` needs from the checkpoints, the outbox and the events stream (the bootstrap's
    readers: Deployment.lag_probe)."""

    def __init__(self, checkpoints: CheckpointStore, outbox: OutboxReader, kinesis: Any, stream: str,
                 outbox_retention_s: float, clock: Clock = system_clock,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._checkpoints = checkpoints
        self._outbox = outbox
        self._kinesis = kinesis
        self._stream = stream
        self._outbox_retention_s = outbox_retention_s
        self._clock = clock
        self._sleep = sleep

    def snapshot(self) -> Snapshot:
        marks = {mark.shard_id: epoch_ms(mark.newest_event_at)
                 for mark in live_watermarks(self._checkpoints.watermarks(PROJECTOR_CONSUMER))
                 if mark.newest_event_at is not None}
        relay = self._checkpoints.watermark(RELAY_CONSUMER, OUTBOX_STREAM)
        reached = None if relay is None or relay.newest_event_at is None else epoch_ms(relay.newest_event_at)
        return Snapshot(self._clock(), marks, reached)

    def measure(self, window_s: float) -> LagReport:
        before = self.snapshot()
        self._sleep(window_s)
        after = self.snapshot()
        shards = open_shards(self._kinesis, self._stream)
        oldest = min([*before.watermarks.values(), before.taken_at - 3_600_000])
        commits = [Commit(event.job_id, epoch_ms(event.occurred_at))
                   for event in self._outbox.window(iso(oldest), iso(after.taken_at))]
        summary = self._kinesis.describe_stream_summary(StreamName=self._stream)["StreamDescriptionSummary"]
        return assess(before, after, shards, commits, self._outbox_retention_s,
                      summary["RetentionPeriodHours"] * 3600.0)

"""LagProbe (onward/operator/lag.py) on the real telemetry: checkpoint table, outbox `by_time` index, events stream.

Watermarks are commit times (DynamoDB's clock: the wall clock here), so the store decides on the wall clock
too and the probe's clock is a ManualClock set to wall-clock instants: a window ends at a chosen instant,
and the beat that closes it is committed after that instant.

What breaks without which code: without heartbeats moving the watermarks, the window's service would be
invisible (events move no watermark) and the processing age unknown; without the relay's watermark over
the outbox stream, relay_age_s would be None; without the watermarks holding at the last beat, a commit
never relayed would not show as backlog."""

from __future__ import annotations

import time

import pytest

from onward.domain.clock import epoch_ms, system_clock
from onward.domain.models import NewJob
from onward.operator.lag import LagProbe
from onward.pipeline.checkpoints import CheckpointStore
from onward.pipeline.outbox import OutboxReader
from onward.store.service import JobStore
from tests.integration.pipeline.test_heartbeat import slot_commits, vouched
from tests.support import ManualClock

pytestmark = pytest.mark.integration


def test_a_backlog_projected_during_the_window_is_measured_as_served(pipeline, settings, dynamodb, endpoint):
    store = JobStore(settings, client=dynamodb)  # decided on the wall clock, as committed
    for _ in range(30):
        store.create("acme", NewJob(type="demo.echo"))
    clock = ManualClock(system_clock())  # the probe's: every creation was decided by now
    beats = []

    def window(seconds: float) -> None:  # the pipeline works while the probe waits
        clock.advance(seconds)
        while system_clock() < clock():  # the window's end has passed: the beat below commits after it
            time.sleep(0.01)
        beats.append(pipeline.heartbeats.emit())
        pipeline.drain()

    probe = LagProbe(CheckpointStore(dynamodb, settings.checkpoint_table),
                     OutboxReader(dynamodb, settings.outbox_table), endpoint.client("kinesis"),
                     settings.events_stream, outbox_retention_s=7 * 86400, clock=clock, sleep=window)
    report = probe.measure(1)
    assert report.backlog == 0 and report.drain_s == 0.0
    assert report.service_rate_per_s == 30 / 1  # the 30 creations were projected during the window
    assert report.arrival_rate_per_s == 0.0  # they were committed before it
    assert report.processing_age_s == 0.0  # the beat committed at the window's end reached every shard
    assert report.relay_age_s == 0.0  # and the relay passed every slot of it on
    assert len(report.shards) == 2 and report.stream_retention_s == 24 * 3600
    assert report.outbox_covers and report.stream_covers

    [beat] = beats
    confirmed = epoch_ms(vouched(beat, slot_commits(endpoint, settings.outbox_table, epoch_ms(beat.occurred_at))))
    assert confirmed >= clock()
    store.create("acme", NewJob(type="demo.echo"))  # committed, never relayed: a backlog of one
    stuck_clock = ManualClock(system_clock())
    stuck = LagProbe(CheckpointStore(dynamodb, settings.checkpoint_table),
                     OutboxReader(dynamodb, settings.outbox_table), endpoint.client("kinesis"),
                     settings.events_stream, outbox_retention_s=7 * 86400, clock=stuck_clock,
                     sleep=stuck_clock.advance).measure(5)
    assert stuck.backlog == 1 and stuck.service_rate_per_s == 0.0 and stuck.drain_s is None
    # the watermarks hold at the beat's commit (its listing): the age grows from there, window and all
    assert stuck.processing_age_s == round((stuck_clock() - confirmed) / 1000, 3) >= 5.0
    assert not stuck.stream_covers

"""LagProbe (onward/lag.py) on the real telemetry: checkpoint table, outbox `by_time` index, events stream."""

from __future__ import annotations

import pytest

from onward.heartbeat import HeartbeatEmitter
from onward.lag import LagProbe
from onward.models import NewJob

pytestmark = pytest.mark.integration


def test_a_backlog_projected_during_the_window_is_measured_as_served(pipeline, settings, dynamodb, store, clock,
                                                                     endpoint):
    for _ in range(30):
        store.create("acme", NewJob(type="demo.echo"))

    def window(seconds: float) -> None:  # the pipeline works while the probe waits
        clock.advance(seconds)
        HeartbeatEmitter(dynamodb, settings.outbox_table, clock=clock).emit()
        pipeline.drain()

    probe = LagProbe(dynamodb, endpoint.client("kinesis"), settings.checkpoint_table, settings.outbox_table,
                     settings.events_stream, outbox_retention_s=7 * 86400, clock=clock, sleep=window)
    report = probe.measure(5)
    assert report.backlog == 0 and report.drain_s == 0.0
    assert report.service_rate_per_s == 30 / 5  # the 30 creations were projected during the window
    assert report.arrival_rate_per_s == 0.0  # they were committed before it
    assert report.processing_age_s == 0.0  # the heartbeat at the window's end reached every shard
    assert len(report.shards) == 2 and report.stream_retention_s == 24 * 3600
    assert report.outbox_covers and report.stream_covers

    clock.advance(1)
    store.create("acme", NewJob(type="demo.echo"))  # committed, never relayed: a backlog of one
    stuck = LagProbe(dynamodb, endpoint.client("kinesis"), settings.checkpoint_table, settings.outbox_table,
                     settings.events_stream, outbox_retention_s=7 * 86400, clock=clock,
                     sleep=clock.advance).measure(5)
    assert stuck.backlog == 1 and stuck.service_rate_per_s == 0.0 and stuck.drain_s is None
    assert stuck.processing_age_s == 6.0 and not stuck.stream_covers

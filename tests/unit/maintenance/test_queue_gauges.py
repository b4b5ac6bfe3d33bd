"""The queue gauges of a long-running process (onward.maintenance.queue_gauges.QueueGauges, `onward up`'s reaper
loop): counted by tenant and type at most once per period, and not at all while nothing is exported."""

from __future__ import annotations

import pytest

from onward.maintenance.backlog import Backlog
from onward.maintenance.backlog_types import TypeDepth
from onward.maintenance.queue_gauges import QueueGauges
from onward.observability.tracing import JOB_TYPE, TENANT_ID
from tests.unit.observability.conftest import recorded  # noqa: F401  (the SDK in memory, a fixture)

pytestmark = pytest.mark.fast


class FakeCounter:
    def __init__(self) -> None:
        self.counts = 0

    def count(self, *, by_type: bool = False) -> Backlog:
        self.counts += 1
        assert by_type, "the gauges are by type"
        return Backlog(3, 1, 7, {"acme": 3}, {"acme": {"demo.echo": TypeDepth(3, 4.0)}})


def test_the_gauges_are_recorded_by_tenant_and_type_at_most_once_a_period(recorded):  # noqa: F811
    """Catches the local reaper loop (a pass a second) counting the backlog on every pass, and the gauges not
    recorded at all locally (the issue's `onward up --otlp` gap: only the Lambda handler recorded them)."""
    counter = FakeCounter()
    now = [100.0]
    gauges = QueueGauges(lambda: counter, lambda: 4.0, every_s=5.0, monotonic=lambda: now[0])
    assert gauges.tick() is not None
    now[0] += 4.9
    assert gauges.tick() is None and counter.counts == 1
    now[0] += 0.2
    assert gauges.tick() is not None and counter.counts == 2
    depth = {(a[TENANT_ID], a[JOB_TYPE]): v for a, v in recorded.points("onward.queue.depth")}
    assert depth == {("acme", "demo.echo"): 3}
    assert [v for _, v in recorded.points("onward.queue.oldest_due_age")] == [4.0]


def test_nothing_is_read_while_nothing_is_exported():
    """Catches a backlog count (DynamoDB reads each pass) made for gauges nobody exports."""
    counter = FakeCounter()
    gauges = QueueGauges(lambda: counter, lambda: 0.0, every_s=0.0)
    assert gauges.tick() is None and counter.counts == 0

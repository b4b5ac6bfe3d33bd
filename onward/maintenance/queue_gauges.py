"""The queue gauges through OpenTelemetry (onward.observability.metrics.record_backlog) for a long-running
process: `onward up`'s reaper loop, which runs the reaper's pass without the Lambda handler that records them on
AWS (onward.entrypoints.reaper, each minute). `tick()` counts the backlog by tenant and type and records it at
most once per `every_s`, and only while figures are exported: with OTLP off it reads nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from onward.maintenance.backlog import Backlog, BacklogCounter
from onward.observability.metrics import exporting, record_backlog

DEFAULT_EVERY_S = 5.0  # as `onward up --otlp` exports metrics (OTEL_METRIC_EXPORT_INTERVAL 5000)


class QueueGauges:
    def __init__(self, counter: Callable[[], BacklogCounter], oldest_due_age_s: Callable[[], float],
                 every_s: float = DEFAULT_EVERY_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._counter = counter
        self._oldest_due_age_s = oldest_due_age_s
        self._every_s = every_s
        self._monotonic = monotonic
        self._next = 0.0
        self._lock = threading.Lock()

    def tick(self) -> Backlog | None:
        """Count and record when due (the Backlog recorded), else None."""
        if not exporting():
            return None
        with self._lock:
            now = self._monotonic()
            if now < self._next:
                return None
            self._next = now + self._every_s
        backlog = self._counter().count(by_type=True)
        record_backlog(backlog.due_by_tenant, backlog.running, self._oldest_due_age_s(), backlog.due_by_type)
        return backlog

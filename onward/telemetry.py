"""Powertools metrics that never pile up and stay quiet when there is nothing to say, and the AttemptOverlaps
metric both worker runtimes publish (the Lambda worker per invocation, `onward worker` as it finds them).

With POWERTOOLS_METRICS_DISABLED (on this machine: `onward up`, the tests) Powertools 3.37's flush
prints nothing but also keeps every metric added, so a long local run grows without end and, were
metrics enabled later in the process, an invocation would publish the previous ones' values.
`discard_unflushed` drops whatever the flush left, after each invocation."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

Arguments = ParamSpec("Arguments")
Result = TypeVar("Result")

# Powertools warns on every invocation that adds no metric (an API GET, an idle poll): expected here, and
# on a local run it would print a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


class ClearableMetrics(Protocol):
    def clear_metrics(self) -> None: ...


def discard_unflushed(
        metrics: ClearableMetrics,
) -> Callable[[Callable[Arguments, Result]], Callable[Arguments, Result]]:
    """Decorate OUTSIDE `@metrics.log_metrics`: after the flush, nothing stays buffered."""

    def decorate(handler: Callable[Arguments, Result]) -> Callable[Arguments, Result]:
        @functools.wraps(handler)
        def invoke(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Result:
            try:
                return handler(*args, **kwargs)
            finally:
                metrics.clear_metrics()

        return invoke

    return decorate


# --- counts sent only when not zero ---------------------------------------------------------------------------

# CloudWatch bills a custom metric for every hour it receives a value, a zero as much as any: counts that are zero
# while nothing happens are sent only when not zero, so an idle deployment pays for the few metrics its alarms
# need every minute (docs/costs.md). Their alarms and graphs read a missing value as 0 (FILL, notBreaching).
COUNTS_SENT_WHEN_NOT_ZERO = frozenset({
    "LeasesReaped", "RelayPublished", "RelayRetriedEntries", "RelayParked", "ProjectionParked",
    "ProjectionWritesSaved", "ProjectionGone", "SchedulesFired", "ScheduleFiresSkipped",
    "ArchivedJobs", "ArchiveBytes", "ArchiveSkippedReplayed", "ExpiredBeforeArchive",
    # progress (issue 38): the projector's progress outcomes
    "ProgressApplied", "ProgressDuplicate", "ProgressSuperseded",
    # completion webhooks (issue 38)
    "WebhookDeliveriesQueued", "WebhooksDelivered", "WebhooksFailed", "WebhookRetries"})


def add_count(metrics: MetricSink, name: str, value: int) -> None:
    """Add one of COUNTS_SENT_WHEN_NOT_ZERO, unless it is zero."""
    if name not in COUNTS_SENT_WHEN_NOT_ZERO:
        raise ValueError(f"{name} is not a count sent only when not zero")
    if value:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


# --- AttemptOverlaps: the same metric from both worker runtimes -----------------------------------------------

METRICS_NAMESPACE = "Onward"
WORKER_SERVICE = "worker"  # the `service` dimension of the worker's metrics, on Lambda and in `onward worker`
ATTEMPT_OVERLAPS = "AttemptOverlaps"


class MetricSink(Protocol):
    def add_metric(self, name: str, unit: MetricUnit, value: float) -> None: ...


def add_attempt_overlaps(metrics: MetricSink, pairs: int) -> None:
    """Pairs of attempts of one job found to have run at the same time (onward.domain.overlaps): side effects that may
    have happened twice; `onward overlaps --since` lists the jobs."""
    metrics.add_metric(name=ATTEMPT_OVERLAPS, unit=MetricUnit.Count, value=pairs)


class OverlapsPublisher:
    """AttemptOverlaps for a long-running worker process (`onward worker`, whose pool has no invocation to
    flush at the end of): `publish()` after each attempt, and if the store's count of overlaps found
    (JobStore.stats.overlaps_found, which a fenced late report or a refused lease renewal raises) rose since
    the last call, the rise is printed at once as one EMF line (CloudWatch Logs turns it into the metric),
    namespace Onward, service worker, as the Lambda worker publishes it. Nothing when it has not risen, or
    when POWERTOOLS_METRICS_DISABLED is set. Safe from the pool's threads: each rise is published once."""

    def __init__(self, overlaps_found: Callable[[], int]) -> None:
        self._overlaps_found = overlaps_found
        self._lock = threading.Lock()
        self._published = overlaps_found()

    def publish(self) -> int:
        """Publish the rise since the last call; answers it (0: nothing was published)."""
        with self._lock:
            found = self._overlaps_found()
            rise, self._published = found - self._published, found
        if rise > 0:
            metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service=WORKER_SERVICE)
            add_attempt_overlaps(metrics, rise)
            metrics.flush_metrics()
        return rise

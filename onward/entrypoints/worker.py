"""Lambda entry point for the worker function (WorkerRuntime=lambda): woken by the events stream's `queued`
events (template.yaml's mapping filters the stream down to them) and by a backstop schedule, each invocation
claims and runs due jobs of the registered types, ONWARD_WORKER_CONCURRENCY at once (onward.runtime.drain), until none
is due or less than a lease of its time is left.

The records are wake-ups, not work items. Which job runs is the store's fair claim's choice (onward.store.claims),
not the job an event names: a wake-up for tenant A's new job runs tenant B's if B is owed the worker time, and
A's job is claimed by whichever worker comes next. So no record is processed on its own (Powertools' batch
processor, made for records that are work items, does not fit), and no record is ever reported failed because
a job failed: the job's retry policy handles that. The whole batch is reported failed (Lambda retries it)
only when the invocation could not work at all: every claim raised (the table unreachable or throttled).

ONWARD_WORKER_MODULE names the module whose `registry` holds the job handlers (as `onward worker --module`);
ONWARD_WORKER_LEASE_S the lease taken on each job (the deployment's `worker_lease_s`,
onward/bootstrap.py). A job still running when the invocation times out loses its lease like a
killed worker: the reaper hands it back and the attempt is counted.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import KinesisStreamEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.observability.otlp import exports_after_invocation
from onward.runtime.drain import Drain
from onward.telemetry import METRICS_NAMESPACE, WORKER_SERVICE, add_attempt_overlaps, discard_unflushed

logger = Logger(service="onward-worker")
metrics = Metrics(namespace=METRICS_NAMESPACE, service=WORKER_SERVICE)
tracer = Tracer(service="onward-worker")


@exports_after_invocation  # trace context (issue 38): OpenTelemetry's spans and metrics, when OTLP is on
@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """A Kinesis batch of wake-ups (answers `batchItemFailures`), or the backstop's scheduled event (answers how
    many jobs it ran)."""
    deployment = Deployment.from_environment()
    wake_ups = KinesisStreamEvent(event) if "Records" in event else None
    overlaps_before = deployment.job_store.stats.overlaps_found()
    started = time.monotonic()
    report = Drain(deployment.workers, time_left_s=lambda: context.get_remaining_time_in_millis() / 1000,
                   reserve_s=deployment.worker_lease_s).run()
    logger.info("drained", extra={
        "woken_by": "schedule" if wake_ups is None else "events", "ran": report.ran,
        "empty_claims": report.empty_claims, "failures": report.failures, "out_of_time": report.out_of_time,
        "wake_ups": 0 if wake_ups is None else len(event["Records"]),
        "seconds": round(time.monotonic() - started, 3)})
    metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=report.ran)
    # What this invocation's workers found (a fenced late report, a refused lease renewal): the store's count.
    add_attempt_overlaps(metrics, deployment.job_store.stats.overlaps_found() - overlaps_before)
    if wake_ups is None:
        return {"ran": report.ran}
    if report.answered:
        return {"batchItemFailures": []}
    # Every record, so Lambda retries the batch: the earliest failed sequence number is where it resumes.
    return {"batchItemFailures": [{"itemIdentifier": record.kinesis.sequence_number}
                                  for record in wake_ups.records]}

"""Lambda entry point for the reaper's schedule: one pass handing jobs whose lease lapsed back to the queue,
or to quarantine (onward.maintenance.reaper.reap_once), then one pipeline heartbeat (onward.pipeline.heartbeats), so
that an idle
system's status view still reads as fresh, then how long the jobs next in line have waited (onward.operator.due_age:
the metric OldestDueAgeSeconds, for the backlog-age alarm) and the backlog the worker tasks scale on
(onward.maintenance.backlog: the metrics BacklogDue and JobsRunning, counted after the reap so that reaped jobs count as
waiting)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.maintenance.reaper import reap_once
from onward.observability.metrics import exporting, record_backlog
from onward.observability.otlp import exports_after_invocation
from onward.operator.due_age import oldest_due_age_s
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-reaper")
metrics = Metrics(namespace="Onward", service="reaper")
tracer = Tracer(service="onward-reaper")


@exports_after_invocation  # trace context (issue 38): OpenTelemetry's spans and metrics, when OTLP is on
@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Any event (EventBridge's scheduled event carries nothing we need); returns the jobs moved."""
    deployment = Deployment.from_environment()
    moved = reap_once(deployment.job_store)
    add_count(metrics, "LeasesReaped", moved)
    deployment.heartbeat_emitter.emit()
    # After the heartbeat: a failed read here must not also silence the heartbeat alarm's metric.
    due_age_s = oldest_due_age_s(deployment.store_reads, system_clock())
    metrics.add_metric(name="OldestDueAgeSeconds", unit=MetricUnit.Seconds, value=due_age_s)
    backlog = deployment.backlog_counter.count(by_type=exporting())  # types only for the OpenTelemetry gauges
    metrics.add_metric(name="BacklogDue", unit=MetricUnit.Count, value=backlog.due)
    metrics.add_metric(name="JobsRunning", unit=MetricUnit.Count, value=backlog.running)
    # the same figures through OpenTelemetry, by tenant and type
    record_backlog(backlog.due_by_tenant, backlog.running, due_age_s, backlog.due_by_type)
    logger.info("backlog", extra={"due": backlog.due, "running": backlog.running, "requests": backlog.requests})
    return {"reaped": moved}

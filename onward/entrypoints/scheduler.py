"""Lambda entry point for the scheduler's EventBridge rule (every minute): one tick creating the jobs of the
schedules that are due (onward.maintenance.scheduler.Scheduler), each exactly once however often it runs."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-scheduler")
metrics = Metrics(namespace="Onward", service="scheduler")
tracer = Tracer(service="onward-scheduler")


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Any event (EventBridge's scheduled event carries nothing we need); returns what the tick did."""
    report = Deployment.from_environment().scheduler.tick()
    add_count(metrics, "SchedulesFired", len(report.fired))
    add_count(metrics, "ScheduleFiresSkipped", report.skipped)
    if report.failed:
        logger.warning("schedules whose job could not be created", extra={"failed": report.failed})
    return {"fired": len(report.fired), "repeated": report.repeated, "skipped": report.skipped,
            "lost": report.lost, "failed": report.failed}

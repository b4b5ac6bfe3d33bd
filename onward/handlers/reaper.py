"""Lambda entry point for the reaper's schedule: one pass handing jobs whose lease lapsed back to the queue,
or to quarantine (onward.reaper.reap_once), then one pipeline heartbeat (onward.heartbeat), so that an idle
system's status view still reads as fresh."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.handlers.bootstrap import Deployment
from onward.reaper import reap_once
from onward.telemetry import discard_unflushed

logger = Logger(service="onward-reaper")
metrics = Metrics(namespace="Onward", service="reaper")
tracer = Tracer(service="onward-reaper")


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Any event (EventBridge's scheduled event carries nothing we need); returns the jobs moved."""
    deployment = Deployment.from_environment()
    moved = reap_once(deployment.job_store)
    metrics.add_metric(name="LeasesReaped", unit=MetricUnit.Count, value=moved)
    deployment.heartbeat_emitter.emit()
    return {"reaped": moved}

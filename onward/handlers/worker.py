"""Lambda entry point for the optional worker function: on each schedule tick, claim and run due jobs of the
registered types (onward.worker) until none is due or the invocation has less time left than a lease.

ONWARD_WORKER_MODULE names the module whose `registry` holds the job handlers (as `onward worker --module`);
ONWARD_WORKER_LEASE_S the lease taken on each job (the deployment's `worker`, onward/handlers/bootstrap.py). A job
still running when the invocation times out loses its lease like a killed worker: the reaper hands it back
and the attempt is counted.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.handlers.bootstrap import Deployment
from onward.telemetry import discard_unflushed

logger = Logger(service="onward-worker")
metrics = Metrics(namespace="Onward", service="worker")
tracer = Tracer(service="onward-worker")


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Any event (EventBridge's scheduled event); returns how many jobs this invocation ran."""
    deployment = Deployment.from_environment()
    worker, lease_s = deployment.worker, deployment.worker_lease_s
    overlaps_before = deployment.job_store.stats.overlaps_found()
    ran = 0
    while context.get_remaining_time_in_millis() > lease_s * 1000 and worker.run_once():
        ran += 1
    metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=ran)
    # Attempts found to have run at the same time as another of their job (onward.overlaps): side effects
    # that may have happened twice; `onward overlaps --since` lists the jobs.
    metrics.add_metric(name="AttemptOverlaps", unit=MetricUnit.Count,
                       value=deployment.job_store.stats.overlaps_found() - overlaps_before)
    return {"ran": ran}

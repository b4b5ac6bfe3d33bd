"""Lambda entry point for the events stream (Kinesis) -> status view: each batch handed whole to the deployment's
StatusProjector (onward/pipeline/projector/projector.py, which writes its jobs at once), partial failures reported.

The earliest failed record and every record after it in the batch are reported failed (some of those may have
been written by other jobs' writes), so a job's later event never lands past an earlier one that failed and
never stays unwritten behind a success. Lambda resumes at the lowest failed sequence number; the version guard
absorbs what it redelivers. A record that failed its 3rd delivery is parked with the rest of its Lambda record
(onward/pipeline/poison.py) and reported done, before the mapping's MaximumRetryAttempts would discard it.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.entrypoints.in_order_batches import InOrderBatchProcessor
from onward.observability.metrics import record_projection_lag
from onward.observability.otlp import exports_after_invocation
from onward.pipeline.projector.projector import BatchFailure, BatchTally, OutcomeTotals, ShardRecord
from onward.settings import several_regions
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-projector")
metrics = Metrics(namespace="Onward", service="projector")
tracer = Tracer(service="onward-projector")
# This process's outcomes, crashed batches included: what the metrics below would have said, kept here beside
# them for local drills (the soak, tests) to read.
totals = OutcomeTotals()


def _metadata(record: KinesisStreamRecord) -> str:
    """The record as Lambda delivered it but its data (kept apart, as the parked record's raw bytes)."""
    raw = dict(record.raw_event)
    raw["kinesis"] = {name: value for name, value in raw.get("kinesis", {}).items() if name != "data"}
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def _in_order() -> InOrderBatchProcessor:
    return InOrderBatchProcessor(EventType.KinesisDataStreams, KinesisStreamRecord,
                                 lambda record: record.kinesis.sequence_number)


def shard_of(record: KinesisStreamRecord) -> str:
    """Kinesis event ids are `<shard id>:<sequence number>`."""
    return record.event_id.split(":", 1)[0]


@exports_after_invocation  # trace context (issue 38): OpenTelemetry's spans and metrics, when OTLP is on
@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    projector = Deployment.from_environment().status_projector
    tally = BatchTally()

    def project_batch(batch: list[KinesisStreamRecord]) -> BatchFailure | None:
        if not batch:
            return None
        records = [ShardRecord(record.kinesis.sequence_number, record.kinesis.data_as_bytes(), _metadata(record))
                   for record in batch]
        return projector.project_batch(shard_of(batch[0]), records, tally)

    try:
        response = process_partial_response(event=event, record_handler=project_batch,
                                            processor=_in_order(), context=context)
    finally:
        totals.add(tally)
    records = event.get("Records", [])
    if records:
        projector.finish_batch(shard_of(KinesisStreamRecord(records[0])), tally)
    for outcome, count in tally.outcomes.items():
        metrics.add_metric(name=f"Projection{outcome.value.capitalize()}", unit=MetricUnit.Count, value=count)
    add_count(metrics, "ProjectionParked", tally.parked)
    add_count(metrics, "ProjectionWritesSaved", tally.writes_saved)
    add_count(metrics, "ProjectionGone", tally.gone)
    for outcome_name, count in tally.progress.outcomes.items():  # progress (issue 38): Applied, Duplicate, Superseded
        add_count(metrics, f"Progress{outcome_name.capitalize()}", count)
    # Every batch, 0 included: the heartbeat alarm fires when a period's sum stays below 1 (or has no data at all).
    metrics.add_metric(name="PipelineHeartbeats", unit=MetricUnit.Count, value=tally.heartbeats)
    if tally.through and several_regions():  # issue 39
        # the standby's HomeRegionLost alarm: how old the newest (replicated) heartbeat is when projected here
        newest_ms = max(tally.through.values())
        metrics.add_metric(name="ReplicatedHeartbeatAgeSeconds", unit=MetricUnit.Seconds,
                           value=max(0.0, (system_clock() - newest_ms) / 1000))
    if tally.lag_ms:
        metrics.add_metric(name="ProjectionLag", unit=MetricUnit.Milliseconds, value=max(tally.lag_ms))
        if records:
            record_projection_lag(shard_of(KinesisStreamRecord(records[0])), max(tally.lag_ms))
    return response

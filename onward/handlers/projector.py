"""Lambda entry point for the events stream (Kinesis) -> status view: each record handed to the deployment's
StatusProjector (onward/projector/projector.py), partial failures reported.

Powertools batch processing reports partial failures; records behind a failed one are not applied (they
are reported failed too), so a job's later event never lands past an earlier one that failed. Lambda
resumes at the lowest failed sequence number; the version guard absorbs what it redelivers.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.base import FailureResponse, SuccessResponse
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.faults import fault_point
from onward.handlers.bootstrap import Deployment
from onward.projector.projector import BatchTally, OutcomeTotals
from onward.telemetry import discard_unflushed

logger = Logger(service="onward-projector")
metrics = Metrics(namespace="Onward", service="projector")
tracer = Tracer(service="onward-projector")
# This process's outcomes, crashed batches included: what the metrics below would have said, kept here beside
# them for local drills (the soak, tests) to read.
totals = OutcomeTotals()


class EarlierRecordFailed(RuntimeError):
    """This record was not applied because one before it in the batch failed."""


class InOrderBatchProcessor(BatchProcessor):
    """Powertools' Kinesis batch processing, but a shard's order is kept: once a record fails, every record
    after it in the batch is reported failed without being handled (the stock processor goes on, and a job's
    later event could land past an earlier one that failed: powertools-lambda-python #2850)."""

    def __init__(self) -> None:
        super().__init__(event_type=EventType.KinesisDataStreams, raise_on_entire_batch_failure=False)
        self._failed = False

    def _prepare(self) -> None:
        super()._prepare()  # type: ignore[no-untyped-call]  # Powertools leaves this hook unannotated
        self._failed = False

    def _process_record(self, record: dict[str, Any]) -> SuccessResponse | FailureResponse:
        if self._failed:
            held_back = KinesisStreamRecord(record)
            earlier = EarlierRecordFailed(held_back.kinesis.sequence_number)
            return self.failure_handler(record=held_back, exception=(EarlierRecordFailed, earlier, None))
        outcome = super()._process_record(record)
        self._failed = outcome[0] == "fail"
        return outcome


def shard_of(record: KinesisStreamRecord) -> str:
    """Kinesis event ids are `<shard id>:<sequence number>`."""
    return record.event_id.split(":", 1)[0]


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    projector = Deployment.from_environment().status_projector
    tally = BatchTally()

    def record_handler(record: KinesisStreamRecord) -> None:
        shard_id, sequence_number = shard_of(record), record.kinesis.sequence_number
        projector.handle_record(shard_id, sequence_number, record.kinesis.data_as_bytes(), tally)
        fault_point("projector.after_record", f"{shard_id}:{sequence_number}")

    processor = InOrderBatchProcessor()
    try:
        response = process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                            context=context)
    finally:
        totals.add(tally)
    records = event.get("Records", [])
    if records:
        projector.finish_batch(shard_of(KinesisStreamRecord(records[0])), tally)
    for outcome, count in tally.outcomes.items():
        metrics.add_metric(name=f"Projection{outcome.value.capitalize()}", unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="ProjectionParked", unit=MetricUnit.Count, value=tally.parked)
    # Every batch, 0 included: the heartbeat alarm fires when a period's sum stays below 1 (or has no data at all).
    metrics.add_metric(name="PipelineHeartbeats", unit=MetricUnit.Count, value=tally.heartbeats)
    if tally.lag_ms:
        metrics.add_metric(name="ProjectionLag", unit=MetricUnit.Milliseconds, value=max(tally.lag_ms))
    return response

"""Lambda entry point for the events stream (Kinesis) -> status view.

Powertools batch processing reports partial failures; records behind a failed one are not applied (they
are reported failed too), so a job's later event never lands past an earlier one that failed. Lambda
resumes at the lowest failed sequence number; the version guard absorbs what it redelivers.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.checkpoints import CheckpointStore
from onward.faults import fault_point
from onward.parking import ParkedRecords
from onward.settings import Settings
from onward.telemetry import discard_unflushed
from projector.projector import BatchTally, OutcomeTotals, StatusProjector

logger = Logger(service="onward-projector")
metrics = Metrics(namespace="Onward", service="projector")
tracer = Tracer(service="onward-projector")
totals = OutcomeTotals()  # this process's outcomes, crashed batches included (local drills read it)


class EarlierRecordFailed(RuntimeError):
    """This record was not applied because one before it in the batch failed."""


def build_projector() -> StatusProjector:
    return _projector_for(Settings.from_environment())


@cache
def _projector_for(settings: Settings) -> StatusProjector:
    dynamodb = settings.client("dynamodb")
    return StatusProjector(
        dynamodb,
        settings.require("status_table"),
        settings.require("conflicts_table"),
        CheckpointStore(dynamodb, settings.require("checkpoint_table")),
        ParkedRecords(dynamodb, settings.require("parked_table")),
    )


def shard_of(record: KinesisStreamRecord) -> str:
    """Kinesis event ids are `<shard id>:<sequence number>`."""
    return record.event_id.split(":", 1)[0]


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    projector = build_projector()
    tally = BatchTally()
    failed = False

    def record_handler(record: KinesisStreamRecord) -> None:
        nonlocal failed
        if failed:
            raise EarlierRecordFailed(record.kinesis.sequence_number)
        shard_id, sequence_number = shard_of(record), record.kinesis.sequence_number
        try:
            projector.handle_record(shard_id, sequence_number, record.kinesis.data_as_bytes(), tally)
            fault_point("projector.after_record", f"{shard_id}:{sequence_number}")
        except Exception:
            failed = True
            raise

    processor = BatchProcessor(event_type=EventType.KinesisDataStreams, raise_on_entire_batch_failure=False)
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
    if tally.lag_ms:
        metrics.add_metric(name="ProjectionLag", unit=MetricUnit.Milliseconds, value=max(tally.lag_ms))
    return response

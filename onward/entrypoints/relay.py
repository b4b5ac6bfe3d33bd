"""Lambda entry point for the outbox table's DynamoDB stream (INSERT records) -> the events stream (Kinesis):
parse the batch, hand it to the deployment's Relay (onward/pipeline/relay/relay.py), report the first record not
published
as the batch's partial failure. The event does not name its stream shard, and the relay needs none."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.pipeline.relay.relay import StreamRecord
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-relay")
metrics = Metrics(namespace="Onward", service="relay")
tracer = Tracer(service="onward-relay")


class MalformedStreamRecord(ValueError):
    """Lambda handed a record DynamoDB Streams never sends: the whole batch is refused, and retried."""


def _stream_record(record: DynamoDBRecord) -> StreamRecord:
    """One record of the outbox table's stream as the relay takes it."""
    change = record.dynamodb
    if change is None or change.sequence_number is None or change.approximate_creation_date_time is None:
        raise MalformedStreamRecord("a DynamoDB stream record without its change, sequence number or time")
    return StreamRecord(
        sequence_number=change.sequence_number,
        event_name=record.event_name.name if record.event_name else "",
        new_image=change.raw_event.get("NewImage"),
        committed_at=int(float(change.raw_event["ApproximateCreationDateTime"]) * 1000),
    )


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = [_stream_record(record) for record in DynamoDBStreamEvent(event).records]
    if not records:
        return {"batchItemFailures": []}
    outcome = Deployment.from_environment().relay.relay(records)
    add_count(metrics, "RelayPublished", outcome.published)
    add_count(metrics, "RelayRetriedEntries", outcome.retried_entries)
    add_count(metrics, "RelayParked", outcome.parked)
    failures = [] if outcome.first_unpublished is None else [{"itemIdentifier": outcome.first_unpublished}]
    return {"batchItemFailures": failures}

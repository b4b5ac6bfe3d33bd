"""Lambda entry point for the outbox table's DynamoDB stream (INSERT records) -> the events stream (Kinesis):
parse the batch, hand it to the deployment's Relay (relay/relay.py), report the first record not published
as the batch's partial failure."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.bootstrap import Deployment
from onward.telemetry import discard_unflushed
from relay.relay import StreamRecord

logger = Logger(service="onward-relay")
metrics = Metrics(namespace="Onward", service="relay")
tracer = Tracer(service="onward-relay")


@cache
def _shard_ranges(stream_arn: str) -> tuple[tuple[str, int, int | None], ...]:
    deployment = Deployment.from_environment()
    description = deployment.client("dynamodbstreams").describe_stream(StreamArn=stream_arn)
    return tuple(
        (shard["ShardId"], int(shard["SequenceNumberRange"]["StartingSequenceNumber"]),
         int(shard["SequenceNumberRange"]["EndingSequenceNumber"])
         if "EndingSequenceNumber" in shard["SequenceNumberRange"] else None)
        for shard in description["StreamDescription"]["Shards"]
    )


def resolve_shard(stream_arn: str, sequence_number: str) -> str | None:
    """The shard a batch came from. Lambda's DynamoDB-stream events do not name it, so it is looked up by
    sequence range; when the ranges of open shards overlap it cannot be told, and None is returned: the
    relay then skips nothing by checkpoint (Lambda's own position still holds) and publishes the batch."""
    for refresh in (False, True):
        if refresh:
            _shard_ranges.cache_clear()
        number = int(sequence_number)
        matches = [shard for shard, start, end in _shard_ranges(stream_arn)
                   if start <= number and (end is None or number <= end)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            return None
    return None


def _stream_record(record: DynamoDBRecord) -> StreamRecord:
    """One record of the outbox table's stream as the relay takes it."""
    change = record.dynamodb
    # DynamoDB Streams sends every record with its change and the change's sequence number
    assert change is not None and change.sequence_number is not None
    return StreamRecord(
        sequence_number=change.sequence_number,
        event_name=record.event_name.name if record.event_name else "",
        new_image=change.raw_event.get("NewImage"),
    )


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = [_stream_record(record) for record in DynamoDBStreamEvent(event).records]
    if not records:
        return {"batchItemFailures": []}
    shard_id = resolve_shard(event["Records"][0]["eventSourceARN"], records[0].sequence_number)
    outcome = Deployment.from_environment().relay.relay(shard_id, records)
    metrics.add_metric(name="RelayPublished", unit=MetricUnit.Count, value=outcome.published)
    metrics.add_metric(name="RelayRetriedEntries", unit=MetricUnit.Count, value=outcome.retried_entries)
    metrics.add_metric(name="RelayAlreadyPublished", unit=MetricUnit.Count, value=outcome.already_published)
    metrics.add_metric(name="RelayParked", unit=MetricUnit.Count, value=outcome.parked)
    failures = [] if outcome.first_unpublished is None else [{"itemIdentifier": outcome.first_unpublished}]
    return {"batchItemFailures": failures}

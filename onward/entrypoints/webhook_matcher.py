"""Lambda entry point of the webhook matcher (WebhookMatcherFunction, on the events stream with its own
position; onward/pipeline/webhooks/matcher.py): records each batch's matching deliveries and queues them. The
whole batch is delivered again on any failure (its deliveries are then found recorded and queued again), as
the archiver's is."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.pipeline.webhooks.matcher import MatchTally
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-webhooks")
metrics = Metrics(namespace="Onward", service="webhooks")
tracer = Tracer(service="onward-webhooks")


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    records = [KinesisStreamRecord(raw) for raw in event.get("Records", [])]
    if not records:
        return {"batchItemFailures": []}
    tally = MatchTally()
    try:
        Deployment.from_environment().webhooks.matcher.match_batch(
            [record.kinesis.data_as_bytes() for record in records], tally)
    except Exception:
        logger.exception("matching the batch's webhooks failed; it is delivered again")
        return {"batchItemFailures": [{"itemIdentifier": records[0].kinesis.sequence_number}]}
    add_count(metrics, "WebhookDeliveriesQueued", tally.queued)
    return {"batchItemFailures": []}

"""Lambda entry point of the webhook deliverer (WebhookDelivererFunction, on WebhookDeliveriesQueue;
onward/pipeline/webhooks/deliverer.py): sends each message's delivery, a batch's messages at once on threads,
at most the deliverer's slots per endpoint. A message to see again later (a retry's backoff, a busy endpoint)
has its visibility set and is reported failed (partial batch response), so Lambda leaves it in the queue;
Lambda deletes the others."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse, PartialItemFailures
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.pipeline.webhooks.deliverer import Step
from onward.pipeline.webhooks.queue import DeliveryRef
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-webhooks")
metrics = Metrics(namespace="Onward", service="webhooks")
tracer = Tracer(service="onward-webhooks")
_senders = ThreadPoolExecutor(max_workers=10, thread_name_prefix="onward-webhook-send")  # SQS batches of <= 10


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    parts = Deployment.from_environment().webhooks
    messages = event.get("Records", [])

    def one(message: dict[str, Any]) -> Step | None:
        try:
            return parts.deliverer.step(DeliveryRef.of_body(message["body"]))
        except Exception:
            logger.exception("a webhook delivery failed to be handled; its message shows again",
                             extra={"message_id": message.get("messageId")})
            return None

    steps = list(_senders.map(one, messages))
    failures: list[PartialItemFailures] = []
    for message, step in zip(messages, steps, strict=True):
        if step is None:
            failures.append({"itemIdentifier": message["messageId"]})
        elif step.later_ms is not None:
            parts.queue.show_later(message["receiptHandle"], step.later_ms)
            failures.append({"itemIdentifier": message["messageId"]})
    handled: list[str] = [step.handled for step in steps if step is not None]
    for outcome, metric in (("delivered", "WebhooksDelivered"), ("failed", "WebhooksFailed"),
                            ("retry", "WebhookRetries")):
        add_count(metrics, metric, handled.count(outcome))
    return {"batchItemFailures": failures}

"""What a local mapping does when its function fails a batch: Lambda's error handling for stream sources.

As documented for Kinesis and DynamoDB Streams mappings (and configured in template.yaml):
- a function error (the invocation raised) or a partial batch response (ReportBatchItemFailures: the lowest
  failed sequence number) fails the batch from that record on; the records before it are done;
- BisectBatchOnFunctionError splits the failed part: at the returned record when the response names one after
  the batch's first (only the rest is retried), else in two halves, the first delivered first; a split does
  not count against the retry quota;
- a failed batch that is not split (bisection off, or a single record) is retried, each time counting one
  retry; after MaximumRetryAttempts retries (-1: never) its failed records are discarded: their metadata (not
  the records) goes to the on-failure destination and the shard reads on after them;
- records older than MaximumRecordAgeInSeconds (-1: never) are discarded unread by the function, the same way.

A record that keeps failing is thus delivered at least MaximumRetryAttempts + 1 times before it is discarded:
the consumers count a record's failed deliveries and park it (its full record) before that
(onward/pipeline/poison.py), so the on-failure destination's metadata is never the only trace of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from onward.domain.clock import iso, system_clock

logger = Logger(service="onward-local-mappings")

RETRY_ATTEMPTS_EXHAUSTED = "RetryAttemptsExhausted"
RECORD_AGE_EXCEEDED = "RecordAgeExceeded"


@dataclass(frozen=True)
class FailureHandling:
    """A mapping's error handling properties, as template.yaml sets them on its event source."""

    maximum_retry_attempts: int = -1  # MaximumRetryAttempts; -1: retried until the records expire
    bisect_batch_on_function_error: bool = False  # BisectBatchOnFunctionError
    maximum_record_age_s: float = -1  # MaximumRecordAgeInSeconds; -1: no record is too old

    def too_old(self, arrived_at: float, now: float) -> bool:
        return self.maximum_record_age_s >= 0 and now - arrived_at > self.maximum_record_age_s


@dataclass(frozen=True)
class DiscardedRecords:
    """What Lambda sends the on-failure destination for records it gave up: where they were, never what."""

    condition: str  # RETRY_ATTEMPTS_EXHAUSTED | RECORD_AGE_EXCEEDED
    shard_id: str
    start_sequence_number: str
    end_sequence_number: str
    batch_size: int
    first_arrival: float  # epoch seconds
    last_arrival: float
    error: str | None = None  # the function's error class, when it failed them


OnFailure = Callable[[DiscardedRecords], None]


def log_discarded(discarded: DiscardedRecords) -> None:
    """The default on-failure destination: a warning with the records' metadata, as the queue would get it."""
    logger.warning("records discarded by the mapping", extra={
        "condition": discarded.condition, "shard_id": discarded.shard_id,
        "start_sequence_number": discarded.start_sequence_number,
        "end_sequence_number": discarded.end_sequence_number, "batch_size": discarded.batch_size,
        "error": discarded.error})


class QueueDestination:
    """The on-failure destination as Lambda writes to an SQS queue: one message per batch given up, holding its
    metadata in Lambda's shape (`KinesisBatchInfo` or `DDBStreamBatchInfo`: shard, first and last sequence
    number, their arrival times, batch size, stream), never the records. Also logged."""

    def __init__(self, sqs: Any, queue_url: str, stream_arn: str, batch_info: str, function: str) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._stream_arn = stream_arn
        self._batch_info = batch_info
        self._function = function

    def __call__(self, discarded: DiscardedRecords) -> None:
        log_discarded(discarded)
        body = {
            "requestContext": {"requestId": str(uuid.uuid4()), "condition": discarded.condition,
                               "functionArn": f"arn:aws:lambda:us-east-1:123456789012:function:{self._function}",
                               "approximateInvokeCount": 1},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                "functionError": discarded.error or ""},
            "version": "1.0",
            "timestamp": iso(system_clock()),
            self._batch_info: {
                "shardId": discarded.shard_id, "startSequenceNumber": discarded.start_sequence_number,
                "endSequenceNumber": discarded.end_sequence_number,
                "approximateArrivalOfFirstRecord": iso(int(discarded.first_arrival * 1000)),
                "approximateArrivalOfLastRecord": iso(int(discarded.last_arrival * 1000)),
                "batchSize": discarded.batch_size, "streamArn": self._stream_arn},
        }
        self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=json.dumps(body))


@dataclass
class FailedRecords:
    """A shard's records that failed and are still to be delivered again, from its position on: the batches
    they are delivered in (sizes in records, first first), and the retries counted against the first."""

    sizes: list[int]
    retries: int = 0


@dataclass(frozen=True)
class Verdict:
    """What follows a failed batch: deliver the failed part again (in `failed`'s batches), or give it up."""

    retry: bool
    split: bool  # the failed part was split: delivered again at once, not counted as a retry
    failed: FailedRecords | None  # the shard's failed records after this one (None: none left)


def after_success(failed: FailedRecords | None) -> FailedRecords | None:
    """The first of the failed batches was delivered: the next one, if any."""
    if failed is None or len(failed.sizes) <= 1:
        return None
    return FailedRecords(failed.sizes[1:])


def after_failure(handling: FailureHandling, failed: FailedRecords | None, delivered: int,
                  failed_index: int) -> Verdict:
    """A batch of `delivered` records failed from `failed_index` on (0: all of it, the invocation raised or its
    first record failed)."""
    later = failed.sizes[1:] if failed is not None else []
    part = delivered - failed_index
    retries = 0 if failed is None or failed_index > 0 else failed.retries
    if handling.bisect_batch_on_function_error and (failed_index > 0 or part > 1):
        halves = [part] if failed_index > 0 else [(part + 1) // 2, part // 2]
        return Verdict(True, True, FailedRecords(halves + later))
    retries += 1
    if 0 <= handling.maximum_retry_attempts < retries:
        return Verdict(False, False, FailedRecords(later) if later else None)
    return Verdict(True, False, FailedRecords([part, *later], retries))


@dataclass
class DiscardCount:
    """Records a poller's mapping gave up, by condition (what its on-failure queue would have received)."""

    by_condition: dict[str, int] = field(default_factory=dict)

    def add(self, discarded: DiscardedRecords) -> None:
        self.by_condition[discarded.condition] = self.by_condition.get(discarded.condition, 0) + discarded.batch_size

"""Lambda entry point for the events stream (Kinesis) -> the run-history archive (onward/pipeline/archive/
archiver.py): each batch's finished jobs written to the archive sink in one write, the batch acknowledged only
after it returns.

The batch is archived whole or not at all: any failure reports the batch's first record failed (a partial
batch response; Lambda resumes at the lowest failed sequence number), so the whole batch is delivered again
and its records written again, which readers collapse (LATEST_VERSIONS). With no archive configured, batches
are acknowledged without a read.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.pipeline.archive.archiver import ArchiveTally, ArchiveTotals
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-archiver")
metrics = Metrics(namespace="Onward", service="archiver")
tracer = Tracer(service="onward-archiver")
totals = ArchiveTotals()  # this process's batches, for local drills and the soak to read


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    archiver = Deployment.from_environment().archiver
    records = [KinesisStreamRecord(raw) for raw in event.get("Records", [])]
    if not records or not archiver.enabled:
        return {"batchItemFailures": []}
    tally = ArchiveTally()
    try:
        archiver.archive_batch([record.kinesis.data_as_bytes() for record in records], tally)
    except Exception:  # the whole batch is delivered again
        logger.exception("archiving the batch failed; it is delivered again")
        return {"batchItemFailures": [{"itemIdentifier": records[0].kinesis.sequence_number}]}
    finally:
        totals.add(tally)
    add_count(metrics, "ArchivedJobs", tally.archived)
    add_count(metrics, "ArchiveBytes", tally.bytes_written)
    add_count(metrics, "ArchiveSkippedReplayed", tally.skipped_replayed)
    add_count(metrics, "ExpiredBeforeArchive", tally.expired_before_archive)
    metrics.add_metric(name="ArchiveBatches", unit=MetricUnit.Count, value=1)
    return {"batchItemFailures": []}

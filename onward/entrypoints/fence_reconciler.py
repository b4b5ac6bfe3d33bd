"""Lambda entry point for the jobs table's DynamoDB stream (NEW_AND_OLD_IMAGES) -> the fence reconciler
(onward/pipeline/fence_reconciler/reconciler.py), in the Region that is home after a failover (issue 39).

The batch is reconciled in stream order and stops at the first record that fails: that record and every one
after it are reported failed (Powertools' batch processing, partial failures), so a later record of an item
never goes ahead of an earlier one (a late write's restore before the adoption its next record asks for);
Lambda resumes at the lowest failed sequence number and every write is conditional, so a redelivery changes
nothing twice. Before any failover (epoch 0) every record is skipped; the mapping is created disabled and
`onward failover` enables it in the new home (onward.operator.reconciler_switch), so that costs nothing idle.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.bootstrap import Deployment
from onward.entrypoints.in_order_batches import InOrderBatchProcessor
from onward.pipeline.fence_reconciler.reconciler import (
    FenceReconciler,
    JobsStreamRecord,
    ReconcileTally,
)
from onward.pipeline.projector.projector import BatchFailure
from onward.settings import AuthoritySettings
from onward.store.region_epoch_cache import epoch_cache_s
from onward.telemetry import add_count, discard_unflushed

logger = Logger(service="onward-fence-reconciler")
metrics = Metrics(namespace="Onward", service="fence-reconciler")
tracer = Tracer(service="onward-fence-reconciler")
totals = ReconcileTally()  # this process's counts, for local drills and tests to read


class MalformedStreamRecord(ValueError):
    """Lambda handed a record DynamoDB Streams never sends."""


def stream_record(record: DynamoDBRecord) -> JobsStreamRecord:
    """One record of the jobs table's stream as the reconciler takes it (images in wire form)."""
    change = record.raw_event.get("dynamodb") or {}
    if "SequenceNumber" not in change or "ApproximateCreationDateTime" not in change:
        raise MalformedStreamRecord("a DynamoDB stream record without its sequence number or time")
    return JobsStreamRecord(sequence_number=str(change["SequenceNumber"]), old_image=change.get("OldImage"),
                            new_image=change.get("NewImage"),
                            committed_at=int(float(change["ApproximateCreationDateTime"]) * 1000))


_reconcilers: dict[int, FenceReconciler] = {}


def reconciler_of(deployment: Deployment) -> FenceReconciler:
    """The deployment's reconciler, one per Deployment (its job store names the writer's epoch)."""
    found = _reconcilers.get(id(deployment))
    if found is None:
        found = _reconcilers[id(deployment)] = FenceReconciler(
            deployment.client("dynamodb"), deployment.settings.require("jobs_table"), deployment.job_store,
            epoch_ttl_s=epoch_cache_s(AuthoritySettings.from_environment(deployment.environ).check_s))
    return found


def reconcile_event(event: dict[str, Any], context: LambdaContext, reconciler: FenceReconciler,
                    tally: ReconcileTally) -> PartialItemFailureResponse:
    """One Lambda event of the jobs table's stream through `reconciler`, its partial failures answered."""

    def reconcile_batch(batch: list[DynamoDBRecord]) -> BatchFailure | None:
        records: list[JobsStreamRecord] = []
        for index, record in enumerate(batch):
            try:
                records.append(stream_record(record))
            except MalformedStreamRecord as error:
                failure = reconciler.reconcile(records, tally)
                return failure or BatchFailure(index, error)
        return reconciler.reconcile(records, tally) if records else None

    try:
        return process_partial_response(event=event, record_handler=reconcile_batch,
                                        processor=InOrderBatchProcessor(
                                            EventType.DynamoDBStreams, DynamoDBRecord,
                                            lambda record: record.dynamodb.sequence_number if record.dynamodb
                                            else ""), context=context)
    finally:
        totals.add(tally)


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    tally = ReconcileTally()
    response = reconcile_event(event, context, reconciler_of(Deployment.from_environment()), tally)
    add_count(metrics, "FenceRestored", tally.restored)
    add_count(metrics, "FenceAdopted", tally.adopted)
    add_count(metrics, "FenceMarked", tally.marked)
    add_count(metrics, "FenceOverlaps", tally.overlaps)
    add_count(metrics, "FenceSuperseded", tally.superseded)
    if tally.restored or tally.adopted or tally.marked:
        logger.info("fence reconciled", extra={"restored": tally.restored, "adopted": tally.adopted,
                                               "restamped": tally.restamped, "marked": tally.marked,
                                               "overlaps": tally.overlaps, "superseded": tally.superseded})
    return response

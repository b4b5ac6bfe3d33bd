"""The progress role on DynamoDB (issue 38): one TransactWriteItems per update, of three actions:

- a ConditionCheck on the job row: running, at the update's version, under its attempt and worker (the row is
  not written: its version, and every condition a transition is decided from, stay as they were);
- an Update of the attempt's run record: open (no outcome; absent while the attempt runs with no update yet,
  then created holding only `progress`, merged by the close: issue 34), holding no update of this sequence
  number or a newer one; it sets `progress`;
- a Put of the progress event in the outbox, under its own key (onward.store.dynamo.progress_items), absent.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.errors import StoreInvariantViolation
from onward.domain.progress import ProgressEvent
from onward.store.dynamo.attributes import to_attribute
from onward.store.dynamo.keys import job_key, run_key
from onward.store.dynamo.progress_items import is_progress_image, progress_from_image, progress_outbox_item
from onward.store.dynamo.writes import CONDITIONAL_CHECK_FAILED, TRANSACTION_CONFLICT, wire_key
from onward.store.ports.progress_log import ProgressLog, ProgressWrite, ProgressWritten

_JOB, _RUN, _OUTBOX = 0, 1, 2  # the actions' places in the transaction


class DynamoProgressLog(ProgressLog):
    _db: Any
    _jobs: str
    _outbox: str

    def record_progress(self, write: ProgressWrite) -> ProgressWritten:
        try:
            self._db.transact_write_items(TransactItems=self._progress_actions(write))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            codes = [reason.get("Code", "None") for reason in error.response.get("CancellationReasons", [])]
            return _judged(codes)
        return ProgressWritten.WRITTEN

    def _progress_actions(self, write: ProgressWrite) -> list[dict[str, Any]]:
        return [
            {"ConditionCheck": {
                "TableName": self._jobs, "Key": wire_key(job_key(write.job_id)),
                "ConditionExpression": "#s = :running AND version = :v AND attempt = :a AND lease_owner = :w",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":running": {"S": "running"}, ":v": {"N": str(write.version)},
                                              ":a": {"N": str(write.attempt)}, ":w": {"S": write.worker_id}}}},
            {"Update": {
                "TableName": self._jobs, "Key": wire_key(run_key(write.job_id, write.attempt)),
                "UpdateExpression": "SET progress = :p",
                # (no attribute_exists(pk): the claim writes no run record, so the first update creates a partial
                # one that the attempt's close merges, issue 34; the job row's check proves the attempt runs)
                "ConditionExpression": "attribute_not_exists(outcome) AND "
                                       "(attribute_not_exists(progress) OR progress.seq < :seq)",
                "ExpressionAttributeValues": {":p": to_attribute(write.on_run().model_dump(mode="json")),
                                              ":seq": {"N": str(write.seq)}}}},
            {"Put": {
                "TableName": self._outbox, "Item": progress_outbox_item(write.event(), write.expires_at),
                "ConditionExpression": "attribute_not_exists(job_id)"}},
        ]

    def progress_events(self, job_id: str) -> list[ProgressEvent]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._outbox, KeyConditionExpression="job_id = :j",
            ExpressionAttributeValues={":j": {"S": job_id}}, ConsistentRead=True)
        return [progress_from_image(item) for page in pages for item in page["Items"] if is_progress_image(item)]


def _judged(codes: list[str]) -> ProgressWritten:
    """What a cancelled progress transaction means, from its actions' reasons: the job row's condition first
    (the attempt no longer holds the job at that version), then a landed update (retried), then a conflict."""
    if len(codes) > _JOB and codes[_JOB] == CONDITIONAL_CHECK_FAILED:
        return ProgressWritten.JOB_MOVED
    if CONDITIONAL_CHECK_FAILED in codes[_RUN:]:
        return ProgressWritten.ALREADY
    if TRANSACTION_CONFLICT in codes:
        return ProgressWritten.CONFLICT
    raise StoreInvariantViolation(f"a progress write was cancelled for reasons it does not expect: {codes}")

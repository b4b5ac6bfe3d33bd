"""The lease renewal on DynamoDB, conditioned on the writer's region epoch (issue 39; the stamp and the
conditions: onward.store.dynamo.epoch_stamps)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs
from onward.domain.errors import RegionFenced
from onward.domain.states import JobState
from onward.store.dynamo.epoch_stamps import EPOCH_NAME, EPOCH_VALUE, epoch_condition, epoch_of
from onward.store.dynamo.keys import REGION_EPOCH_ATTRIBUTE, job_key
from onward.store.ports.outcomes import RenewalAnswer


def renew_lease(db: Any, table: str, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs,
                region_epoch: int) -> RenewalAnswer:
    """Set the lease's expiry while the job runs under this attempt and owner in a row of the writer's epoch;
    RegionFenced when the row is of another (the refusal returns the row: no read more)."""
    try:
        attributes = db.update_item(
            TableName=table,
            Key={"pk": {"S": job_key(job_id).pk}, "sk": {"S": job_key(job_id).sk}},
            UpdateExpression="SET lease_expires_at = :e",
            ConditionExpression=f"#s = :running AND attempt = :a AND lease_owner = :w AND "
                                f"{epoch_condition(region_epoch)}",
            ExpressionAttributeNames={"#s": "state", EPOCH_NAME: REGION_EPOCH_ATTRIBUTE},
            ExpressionAttributeValues={
                ":e": {"N": str(expires_at)}, ":running": {"S": JobState.RUNNING.value},
                ":a": {"N": str(attempt)}, ":w": {"S": worker_id}, EPOCH_VALUE: {"N": str(region_epoch)},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )["Attributes"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        row = error.response.get("Item")
        if row is not None and epoch_of(row) != region_epoch:
            raise RegionFenced(f"renewal of job {job_id} attempt {attempt}: the row is of region epoch "
                               f"{epoch_of(row)}, the writer's {region_epoch}") from error
        return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)
    cancel_requested = attributes.get("cancel_requested", {}).get("BOOL", False)
    return RenewalAnswer(held=True, cancel_requested=cancel_requested, lease_expires_at=expires_at)

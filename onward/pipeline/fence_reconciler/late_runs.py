"""The run records the fence reconciler reads and writes, now that a claim writes none (issue 34): a job's runs
with its running attempt built from its row (as the store reads them, onward.store.dynamo.run_reads) and the old
home's attempt written from its late row when that row is its only trace."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs
from onward.domain.fence_reconciliation import (
    FENCED_BY,
    FENCED_BY_REGION_EPOCH,
    JOB_SK,
    REGION_EPOCH,
    RUN_CLAIMED_AT,
    RUN_LEASE_EXPIRES_AT,
    RUN_PREFIX,
    WORKER_ID,
    LateWrite,
)
from onward.domain.states import JobState, RunOutcome
from onward.store.dynamo.keys import Entity, job_pk, run_key
from onward.store.dynamo.run_reads import partition_items


def job_runs(db: Any, table: str, job_id: str, plain: Any) -> list[dict[str, Any]]:
    """The job's run records (plain values, `plain`: the stream images' deserialiser) and, while its row here says
    an attempt runs, that attempt's run from the row (its partial record merged), stamped with the row's epoch."""
    items: list[dict[str, Any]] = [plain(item) or {} for item in partition_items(db, table, job_id)]
    row = next((item for item in items if item.get("sk") == JOB_SK), None)
    runs = [item for item in items if str(item.get("sk", "")).startswith(RUN_PREFIX) and WORKER_ID in item]
    if row is not None and row.get("state") == JobState.RUNNING and RUN_CLAIMED_AT in row and not any(
            int(run["attempt"]) == int(row["attempt"]) for run in runs):
        partial = next((item for item in items if item.get("sk") == run_key(job_id, int(row["attempt"])).sk), {})
        runs.append({**partial, "job_id": job_id, "attempt": int(row["attempt"]), WORKER_ID: row["lease_owner"],
                     "claimed_at": int(row[RUN_CLAIMED_AT]), "lease_expires_at": int(row[RUN_LEASE_EXPIRES_AT]),
                     REGION_EPOCH: int(row.get(REGION_EPOCH, 0))})
    return sorted(runs, key=lambda run: int(run["attempt"]))


def write_late_run(db: Any, table: str, late: LateWrite, at: EpochMs) -> dict[str, Any] | None:
    """The old home's attempt `late` as its late row holds it (`late.claimed`), written whole with the fence's
    mark (`fenced`: the fence ended it, `fenced_by`, `late_report_at`), only where no record is; its values, or
    None when it has no claim to write or a record arrived meanwhile. No `region_epoch`: an old home's run."""
    if late.claimed is None:
        return None
    worker, claimed_at, lease_expires_at = late.claimed
    run = {"job_id": late.job_id, "attempt": late.attempt, WORKER_ID: worker, "claimed_at": claimed_at,
           "lease_expires_at": lease_expires_at, "entity": Entity.RUN.value, "outcome": RunOutcome.FENCED.value,
           "late_report_at": at, FENCED_BY: FENCED_BY_REGION_EPOCH}
    names = {f"#f{index}": name for index, name in enumerate(run)}
    values = {f":v{index}": ({"N": str(value)} if isinstance(value, int) else {"S": str(value)})
              for index, value in enumerate(run.values())}
    try:
        db.update_item(
            TableName=table, Key={"pk": {"S": job_pk(late.job_id)}, "sk": {"S": run_key(late.job_id, late.attempt).sk}},
            UpdateExpression="SET " + ", ".join(f"#f{index} = :v{index}" for index in range(len(run))),
            ConditionExpression="attribute_not_exists(pk)", ExpressionAttributeNames=names,
            ExpressionAttributeValues=values)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return None
    return run

"""Where a job's result is read on DynamoDB: on the run record of the attempt that completed the job, where the
completing transaction writes it (issue 34), and, for a job completed before, in its result item
(`JOB#<id>` / `RESULT`): a deployed stack keeps those until they expire. The run record is read first; the old
item only when the run succeeded and carries no result, so one read at most is added, and only for such jobs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from onward.domain.states import RunOutcome
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.keys import RUN_PREFIX, job_pk, result_from_values, result_key, run_result
from onward.store.dynamo.writes import wire_key


def completed_run(last_run: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    """Whether a job's last run record (plain values) completed it: only such a run holds the job's result (a
    job whose last attempt failed, was released, reaped or cancelled has none, and no result item either)."""
    return last_run is not None and last_run.get("outcome") == RunOutcome.SUCCEEDED.value


def result_of(last_run: Mapping[str, Any] | None, old_item: Mapping[str, Any] | None) -> Any:
    """The job's result from its last run record and, when that run completed the job before issue 34, its
    result item (plain values, None when absent); None when it has none."""
    if not completed_run(last_run):
        return None
    carried, value = run_result(last_run)
    if carried:
        return value
    return None if old_item is None else result_from_values(old_item)


def read_result(client: Any, jobs_table: str, job_id: str) -> Any:
    """The job's result, strongly consistent: its last run record (one Query of one item), and its old result
    item only when that run completed the job and carries no result."""
    found = client.query(
        TableName=jobs_table,
        KeyConditionExpression="pk = :p AND begins_with(sk, :r)",
        ExpressionAttributeValues={":p": {"S": job_pk(job_id)}, ":r": {"S": RUN_PREFIX}},
        ScanIndexForward=False,
        Limit=1,
        ConsistentRead=True,
    )["Items"]
    last_run = from_item(found[0]) if found else None
    if not completed_run(last_run) or run_result(last_run)[0]:  # (no old item to read: no run, or the result on it)
        return result_of(last_run, None)
    old = client.get_item(TableName=jobs_table, Key=wire_key(result_key(job_id)), ConsistentRead=True).get("Item")
    return result_of(last_run, None if old is None else from_item(old))

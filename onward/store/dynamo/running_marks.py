"""An overlap mark on an attempt's run record, for the store and the fence reconciler alike: an Update of the
record when it exists; else, on an attempt still running (issue 34: the claim writes no run record, so a running
attempt has none until its close, or a partial one), one TransactWriteItems of a ConditionCheck that the job row
runs that attempt and an Update creating (or adding to) the partial record, which the attempt's close merges.
So a mark never creates a record for an attempt that never ran."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.store.dynamo.keys import job_key, run_key
from onward.store.dynamo.writes import overlap_clauses, wire_key
from onward.store.ports.write_plans import OverlapMark


def mark_running_overlap(db: Any, table: str, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
    """Mark `overlap` on the record of `attempt` if the job row says it runs; False when it does not (nothing
    written)."""
    names: dict[str, str] = {"#outcome": "outcome"}
    values: dict[str, Any] = {}
    sets, add = overlap_clauses(overlap, names, values)
    try:
        db.transact_write_items(TransactItems=[
            {"ConditionCheck": {
                "TableName": table, "Key": wire_key(job_key(job_id)),
                "ConditionExpression": "#s = :running AND attempt = :a",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":running": {"S": "running"}, ":a": {"N": str(attempt)}}}},
            {"Update": {
                "TableName": table, "Key": wire_key(run_key(job_id, attempt)),
                "UpdateExpression": f"SET {', '.join(sets)} ADD {add}",
                "ConditionExpression": "attribute_not_exists(#outcome)",
                "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}},
        ])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        return False
    return True


def mark_overlap(db: Any, table: str, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
    """Mark `overlap` on the attempt's record, or on its partial one while its row says it runs; False when
    neither is (nothing written)."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    sets, add = overlap_clauses(overlap, names, values)
    try:
        db.update_item(
            TableName=table, Key=wire_key(run_key(job_id, attempt)),
            UpdateExpression=f"SET {', '.join(sets)} ADD {add}", ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return mark_running_overlap(db, table, job_id, attempt, overlap)
    return True

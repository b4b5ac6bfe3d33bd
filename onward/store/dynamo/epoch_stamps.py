"""The region fence on DynamoDB (issue 39, onward.store.region_fence): the writer's epoch stamped on every item
a write plan puts or updates, the job row's condition on it, a refusal told apart by the row it returns, and
the lease renewal's condition (onward.store.dynamo.region_fence sends it). Pure: no I/O.

The stamp is the number attribute `region_epoch` (a few bytes: no write unit more for any item under 1 KB but
one at the boundary). The condition is in the job row's own action (a transaction names an item once) with
`ReturnValuesOnConditionCheckFailure: ALL_OLD`, so a refusal returns the row as it is and the recorder tells an
epoch's refusal (RegionFenced) from a lost race without a read more. Nothing adds a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onward.store.dynamo.attributes import Item, from_item
from onward.store.dynamo.held_items import held_by_of
from onward.store.dynamo.keys import REGION_EPOCH_ATTRIBUTE, job_from_values, open_attempt_of
from onward.store.ports.outcomes import Role
from onward.store.ports.rows import JobRow
from onward.store.ports.write_plans import TransitionWrite, epoch_refusal

EPOCH_NAME = "#region_epoch"
EPOCH_VALUE = ":region_epoch"


def epoch_of(item: Mapping[str, Any]) -> int:
    """The epoch a stored item (wire format) was written under (no attribute: 0)."""
    attribute = item.get(REGION_EPOCH_ATTRIBUTE)
    return 0 if attribute is None else int(attribute["N"])


def row_of(item: Item) -> JobRow:
    """A job row (wire format) as the store reads it: the Job, its shards, its hold and its epoch."""
    values = from_item(item)
    return JobRow(*job_from_values(values), held_by=held_by_of(item), region_epoch=epoch_of(item),
                  opened=open_attempt_of(values))


def epoch_condition(epoch: int, *, adopts: bool = False) -> str:
    """The job row's condition (names `#region_epoch`, `:region_epoch`): at the writer's epoch (0: the
    attribute absent or 0), or for an adoption below it (absent counts as 0)."""
    if adopts:
        return f"(attribute_not_exists({EPOCH_NAME}) OR {EPOCH_NAME} < {EPOCH_VALUE})"
    if epoch == 0:
        return f"(attribute_not_exists({EPOCH_NAME}) OR {EPOCH_NAME} = {EPOCH_VALUE})"
    return f"{EPOCH_NAME} = {EPOCH_VALUE}"


def fence_row_update(action: dict[str, Any], epoch: int, *, adopts: bool) -> None:
    """The job row's Update conditioned on the epoch, returning the row when refused (stamped by `stamp`)."""
    update = action["Update"]
    update["ConditionExpression"] = f"({update['ConditionExpression']}) AND {epoch_condition(epoch, adopts=adopts)}"
    update["ExpressionAttributeNames"][EPOCH_NAME] = REGION_EPOCH_ATTRIBUTE
    update["ExpressionAttributeValues"][EPOCH_VALUE] = {"N": str(epoch)}
    update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"


def stamp(action: dict[str, Any], epoch: int) -> None:
    """Put `region_epoch` = `epoch` on the item an action puts or updates (a ConditionCheck or Delete writes
    nothing to stamp)."""
    if "Put" in action:
        action["Put"]["Item"][REGION_EPOCH_ATTRIBUTE] = {"N": str(epoch)}
        return
    update = action.get("Update")
    if update is None:
        return
    update.setdefault("ExpressionAttributeNames", {})[EPOCH_NAME] = REGION_EPOCH_ATTRIBUTE
    update.setdefault("ExpressionAttributeValues", {})[EPOCH_VALUE] = {"N": str(epoch)}
    expression: str = update["UpdateExpression"]
    if expression.startswith("SET "):
        update["UpdateExpression"] = f"SET {EPOCH_NAME} = {EPOCH_VALUE}, {expression[4:]}"
    else:
        update["UpdateExpression"] = f"SET {EPOCH_NAME} = {EPOCH_VALUE} {expression}"


def fenced(reason: Mapping[str, Any], write: TransitionWrite) -> Role | None:
    """Whether a cancellation reason of the job row's action was the epoch's, judged on the row it returned
    (write_plans.epoch_refusal); None when the row returned holds the epoch (or none was returned)."""
    item = reason.get("Item")
    if reason.get("Code") != "ConditionalCheckFailed" or item is None:
        return None
    return epoch_refusal(epoch_of(item), write)



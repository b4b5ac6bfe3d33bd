"""What the failover's operator writes for the status page's replication block (issue 39; the block is read by
onward.pipeline.replication_status): the old home's newest heartbeat this Region received before the fence
(`record_home_seen`, one Query of the outbox, which only operators read), and the declaration that the old
home's writes are reconciled or lost (`declare_reconciled`). Both write the jobs table's `REGION` /
`REPLICATION` item, never over a later epoch's."""

from __future__ import annotations

from typing import Any

from onward.domain.clock import EpochMs
from onward.pipeline.heartbeats import HEARTBEAT_PARTITION
from onward.pipeline.replication_status import replication_key
from onward.settings import Settings


def newest_home_beat(client: Any, outbox_table: str, fenced_at: EpochMs | None) -> EpochMs | None:
    """The commit time of the newest heartbeat committed before the fence that this Region's outbox holds (the
    standby beats only once it is home, so every earlier beat is the old home's). One Query (operators only)."""
    values: dict[str, Any] = {":p": {"S": f"{HEARTBEAT_PARTITION}#0"}}
    condition = "job_id = :p"
    if fenced_at is not None:
        condition += " AND version <= :fenced"
        values[":fenced"] = {"N": str(fenced_at)}
    items = client.query(TableName=outbox_table, KeyConditionExpression=condition, ExpressionAttributeValues=values,
                         ScanIndexForward=False, Limit=1, ConsistentRead=True)["Items"]
    return int(items[0]["version"]["N"]) if items else None


def record_home_seen(client: Any, jobs_table: str, outbox_table: str, epoch: int, fenced_at: EpochMs | None,
                     region_epoch: int | None = None) -> EpochMs | None:
    """Record, for `epoch`'s failover, the newest heartbeat of the old home this Region received (what the page's
    `may_miss_after` is computed from); returns it. Run by the failover, after the fence window. A later epoch's
    item is never written over."""
    seen = newest_home_beat(client, outbox_table, fenced_at)
    names = {"#e": "epoch", "#re": "region_epoch"}
    values: dict[str, Any] = {":e": {"N": str(epoch)}, ":re": {"N": str(region_epoch if region_epoch is not None
                                                                         else epoch)}}
    sets = ["#e = :e", "#re = :re"]
    if seen is not None:
        sets.append("#h = :h")
        names["#h"] = "home_seen_through"
        values[":h"] = {"N": str(seen)}
    _update(client, jobs_table, sets, names, values, epoch)
    return seen


def declare_reconciled(client: Any, jobs_table: str, epoch: int, *, by: str, reason: str, at: EpochMs) -> None:
    """Say the old home's writes of `epoch`'s failover are all in (reconciled) or given up (declared lost): the
    statuses stop being stale for it. A later epoch's item is never written over."""
    _update(client, jobs_table, ["#e = :e", "#re = :e", "reconciled_epoch = :e", "declared_at = :at",
                                 "declared_by = :by", "reason = :why"],
            {"#e": "epoch", "#re": "region_epoch"},
            {":e": {"N": str(epoch)}, ":at": {"N": str(at)}, ":by": {"S": by}, ":why": {"S": reason}}, epoch)


def _update(client: Any, jobs_table: str, sets: list[str], names: dict[str, str], values: dict[str, Any],
            epoch: int) -> None:
    try:
        client.update_item(TableName=jobs_table, Key=replication_key(), UpdateExpression="SET " + ", ".join(sets),
                           ConditionExpression="attribute_not_exists(#e) OR #e <= :e",
                           ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    except client.exceptions.ConditionalCheckFailedException:
        return


def record_home_seen_of(client: Any, settings: Settings, epoch: int, fenced_at: EpochMs | None) -> EpochMs | None:
    """`record_home_seen` on the deployment's tables (`onward failover`, after the fence window)."""
    return record_home_seen(client, settings.require("jobs_table"), settings.require("outbox_table"), epoch, fenced_at)


def declare_lost_of(client: Any, settings: Settings, epoch: int, *, by: str, reason: str, at: EpochMs) -> None:
    """`declare_reconciled` on the deployment's jobs table (`onward failover --declare-lost`)."""
    declare_reconciled(client, settings.require("jobs_table"), epoch, by=by, reason=reason, at=at)

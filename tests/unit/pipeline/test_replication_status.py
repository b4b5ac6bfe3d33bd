"""The replication block read from this Region's jobs table and cached per process, and the item the failover
and the declaration write (onward.pipeline.replication_status)."""

from __future__ import annotations

from typing import Any

from onward.domain.regions import RegionEpoch
from onward.operator.replication import declare_reconciled, record_home_seen
from onward.pipeline.replication_status import ReplicationStatus

FENCED_AT = 1_800_000_000_000


class ConditionFailed(Exception):
    pass


class Exceptions:
    ConditionalCheckFailedException = ConditionFailed


class Tables:
    """The outbox's heartbeat slot 0 and the jobs table's REPLICATION item (SET clauses `name = :value` only),
    counting the requests."""

    exceptions = Exceptions

    def __init__(self, beats: list[int]) -> None:
        self.beats = beats
        self.item: dict[str, Any] | None = None
        self.requests = 0

    def query(self, **request: Any) -> dict[str, Any]:
        self.requests += 1
        until = int(request["ExpressionAttributeValues"][":fenced"]["N"])
        kept = sorted((beat for beat in self.beats if beat <= until), reverse=True)[:1]
        return {"Items": [{"version": {"N": str(beat)}} for beat in kept]}

    def get_item(self, **request: Any) -> dict[str, Any]:
        self.requests += 1
        return {} if self.item is None else {"Item": dict(self.item)}

    def update_item(self, **request: Any) -> None:
        names, values = request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
        if self.item is not None and int(self.item["epoch"]["N"]) > int(values[":e"]["N"]):
            raise ConditionFailed
        item = dict(self.item or {})
        for clause in request["UpdateExpression"].removeprefix("SET ").split(", "):
            name, value = clause.split(" = ")
            item[names.get(name, name)] = values[value]
        self.item = item


def _status(tables: Tables, epoch: int, clock: list[int]) -> ReplicationStatus:
    item = RegionEpoch(epoch, "us-west-2", "us-east-1", FENCED_AT, "ops", "drill") if epoch else (
        RegionEpoch.never_failed_over())
    return ReplicationStatus(tables, "jobs", lambda: item, clock=lambda: clock[0], cache_ms=30_000)


def test_the_newest_heartbeat_before_the_fence_sets_may_miss_after() -> None:
    """A beat after the fence is this Region's own (it beats once it is home): counting it would claim the old
    home's writes are in up to now."""
    tables = Tables([FENCED_AT - 20_000, FENCED_AT - 9_000, FENCED_AT + 5_000])
    assert record_home_seen(tables, "jobs", "outbox", 1, FENCED_AT) == FENCED_AT - 9_000
    state = _status(tables, 1, [FENCED_AT]).current()
    assert state is not None and state.may_miss_after == "2027-01-15T07:59:46.000Z"
    assert not state.reconciled


def test_a_declaration_of_an_earlier_failover_does_not_reconcile_this_one() -> None:
    """Epoch 2's losses are not epoch 1's: an old declaration must not clear the banner of a new failover."""
    tables = Tables([FENCED_AT - 1_000])
    declare_reconciled(tables, "jobs", 1, by="ops", reason="backlog in", at=FENCED_AT)
    record_home_seen(tables, "jobs", "outbox", 2, FENCED_AT)
    assert not _status(tables, 2, [FENCED_AT]).current().reconciled  # type: ignore[union-attr]
    declare_reconciled(tables, "jobs", 2, by="ops", reason="declared lost", at=FENCED_AT)
    assert _status(tables, 2, [FENCED_AT]).current().reconciled  # type: ignore[union-attr]
    declare_reconciled(tables, "jobs", 1, by="ops", reason="late", at=FENCED_AT)  # never lowers it
    assert tables.item is not None and tables.item["epoch"] == {"N": "2"}


def test_read_once_per_cache_period() -> None:
    """Every status of every page carries the block: reading it per status would add a request to each."""
    tables = Tables([])
    clock = [FENCED_AT]
    status = _status(tables, 1, clock)
    status.current()
    status.current()
    assert tables.requests == 1
    clock[0] += 30_000
    status.current()
    assert tables.requests == 2


def test_no_table_read_before_any_failover() -> None:
    """Epoch 0: the block is None and the REPLICATION item is not read."""
    tables = Tables([])
    assert _status(tables, 0, [FENCED_AT]).current() is None and tables.requests == 0

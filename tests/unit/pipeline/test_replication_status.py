"""The replication block read from this Region's tables and cached per process
(onward.pipeline.replication_status)."""

from __future__ import annotations

from typing import Any

from onward.domain.regions import RegionEpoch
from onward.pipeline.replication_status import ReplicationStatus

FENCED_AT = 1_800_000_000_000


class Tables:
    """The outbox's heartbeat slot 0 and the RECONCILED item, counting the requests."""

    def __init__(self, beats: list[int], reconciled_epoch: int | None) -> None:
        self.beats = beats
        self.reconciled_epoch = reconciled_epoch
        self.requests = 0

    def query(self, **request: Any) -> dict[str, Any]:
        self.requests += 1
        until = int(request["ExpressionAttributeValues"][":fenced"]["N"])
        kept = sorted((beat for beat in self.beats if beat <= until), reverse=True)[:1]
        return {"Items": [{"version": {"N": str(beat)}} for beat in kept]}

    def get_item(self, **request: Any) -> dict[str, Any]:
        self.requests += 1
        if self.reconciled_epoch is None:
            return {}
        return {"Item": {"epoch": {"N": str(self.reconciled_epoch)}}}


def _status(tables: Tables, epoch: int, clock: list[int]) -> ReplicationStatus:
    item = RegionEpoch(epoch, "us-west-2", "us-east-1", FENCED_AT, "ops", "drill") if epoch else (
        RegionEpoch.never_failed_over())
    return ReplicationStatus(tables, "jobs", "outbox", lambda: item, clock=lambda: clock[0], cache_ms=30_000)


def test_the_newest_heartbeat_before_the_fence_sets_may_miss_after() -> None:
    """A beat after the fence is this Region's own (it beats once it is home): counting it would claim the old
    home's writes are in up to now."""
    tables = Tables([FENCED_AT - 20_000, FENCED_AT - 9_000, FENCED_AT + 5_000], reconciled_epoch=None)
    state = _status(tables, 1, [FENCED_AT]).current()
    assert state is not None and state.may_miss_after == "2027-01-15T07:59:46.000Z"
    assert not state.reconciled


def test_a_declaration_of_an_earlier_failover_does_not_reconcile_this_one() -> None:
    """Epoch 2's losses are not epoch 1's: an old RECONCILED item must not clear the banner of a new failover."""
    assert not _status(Tables([], reconciled_epoch=1), 2, [FENCED_AT]).current().reconciled  # type: ignore[union-attr]
    assert _status(Tables([], reconciled_epoch=2), 2, [FENCED_AT]).current().reconciled  # type: ignore[union-attr]


def test_read_once_per_cache_period() -> None:
    """Every status of every page carries the block: reading it per status would add two requests to each."""
    tables = Tables([FENCED_AT - 1_000], reconciled_epoch=None)
    clock = [FENCED_AT]
    status = _status(tables, 1, clock)
    status.current()
    status.current()
    assert tables.requests == 2
    clock[0] += 30_000
    status.current()
    assert tables.requests == 4


def test_no_table_read_before_any_failover() -> None:
    """Epoch 0: the block is None and neither the outbox nor the RECONCILED item is read."""
    tables = Tables([FENCED_AT], reconciled_epoch=None)
    assert _status(tables, 0, [FENCED_AT]).current() is None and tables.requests == 0

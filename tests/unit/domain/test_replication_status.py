"""The replication block of a status's freshness after a failover (onward.domain.replication_status) and what
it does to `stale` (onward.domain.freshness)."""

from __future__ import annotations

from dataclasses import dataclass

from onward.domain.clock import iso
from onward.domain.freshness import freshness_of, view_lag
from onward.domain.replication_status import RPO_OBJECTIVE_MS, replication_state

NOW = 1_800_000_000_000


@dataclass(frozen=True)
class Mark:
    shard_id: str
    newest_event_at: str | None
    parents: tuple[str, ...] = ()


def test_no_block_before_any_failover() -> None:
    """Epoch 0: nothing was lost, and every status would otherwise carry a block of nulls."""
    assert replication_state(0, None, None, None, reconciled=False) is None


def test_may_miss_after_is_the_newest_home_heartbeat_less_the_rpo_objective() -> None:
    """What the old home committed up to its newest heartbeat that arrived is here; the RPO objective before
    it may not be (items replicate one by one, not in commit order): without the margin the page would claim
    more than the replication guarantees."""
    state = replication_state(2, "us-east-1", NOW - 60_000, NOW - 70_000, reconciled=False)
    assert state is not None
    assert (state.home_lost, state.epoch, state.fenced_at) == ("us-east-1", 2, iso(NOW - 60_000))
    assert state.may_miss_after == iso(NOW - 70_000 - RPO_OBJECTIVE_MS)
    assert replication_state(1, "us-east-1", NOW, None, reconciled=False).may_miss_after is None  # type: ignore[union-attr]


def test_an_unreconciled_failover_keeps_every_status_stale_however_fresh_the_view() -> None:
    """The view's watermark vouches for what this Region holds, not for what the lost home decided and never
    sent: until reconciled, a status fresh by the watermark must still say stale."""
    marks = [Mark("shard-0", iso(NOW - 500))]
    unreconciled = replication_state(1, "us-east-1", NOW - 60_000, NOW - 70_000, reconciled=False)
    lag = view_lag(marks, NOW, replication=unreconciled)
    assert lag.view_lag_s == 0.5 and lag.stale and lag.replication == unreconciled
    shown = freshness_of(iso(NOW - 2_000), lag, NOW)
    assert shown.stale and shown.replication == unreconciled

    reconciled = replication_state(1, "us-east-1", NOW - 60_000, NOW - 70_000, reconciled=True)
    assert not freshness_of(iso(NOW - 2_000), view_lag(marks, NOW, replication=reconciled), NOW).stale
    assert not freshness_of(iso(NOW - 2_000), view_lag(marks, NOW), NOW).stale

"""The replication block of a status's freshness in the Region that became home after a failover (pure):
docs/regional-recovery.md, "The status page in the new Region".

The view of the new home is honest about what it holds (its watermark), but not about what the lost home
committed and never sent. So, from the epoch item and the newest heartbeat of the old home this Region
received: `may_miss_after` is that heartbeat's commit time less the RPO objective (statuses the old home
decided after it may be missing), and every status is `stale` until the old home's writes are reconciled or
declared lost (`reconciled`).
"""

from __future__ import annotations

from onward.domain.clock import EpochMs, iso
from onward.domain.models import ReplicationState

RPO_OBJECTIVE_MS = 5_000  # the replication lag the ReplicationLagHigh alarm holds to (docs: "RPO and RTO")


def replication_state(epoch: int, previous_home: str | None, fenced_at: EpochMs | None,
                      newest_home_beat: EpochMs | None, reconciled: bool,
                      rpo_objective_ms: int = RPO_OBJECTIVE_MS) -> ReplicationState | None:
    """The block after a failover (epoch > 0); None before any (epoch 0: nothing was lost)."""
    if epoch <= 0:
        return None
    return ReplicationState(
        home_lost=previous_home, epoch=epoch, fenced_at=None if fenced_at is None else iso(fenced_at),
        may_miss_after=None if newest_home_beat is None else iso(max(0, newest_home_beat - rpo_objective_ms)),
        reconciled=reconciled)


def still_unreconciled(replication: ReplicationState | None) -> bool:
    """Whether a status must be shown stale whatever the view's lag: the lost home may have decided more."""
    return replication is not None and not replication.reconciled

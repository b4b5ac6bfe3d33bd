"""What a claim (onward.store.claims) asks the store to do with one due job, and what it hears back besides a
Lease: the job store's transaction is the store's (onward.store.service.JobStore._take), the choice of job the
claim's."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from onward.domain.models import Lease
from onward.store.ports.rows import DueJob
from onward.store.ports.write_plans import Admission


class AdmissionRefused(Exception):
    """The claim's Admission failed on the RUNNING counter it charged: that shard reached its cap."""


class FlexRefused(Exception):
    """A flexing claim found another tenant with waiting jobs back below its cap: it must be served first (the
    claim decides again from fresh counters)."""


class LiftMet(Exception):
    """A claim's lift met one as high on the counter it charged: another claim served the returning tenant
    meanwhile, so its lift is at least `lift_vt` (what a read a moment behind may not show yet)."""

    def __init__(self, tenant_id: str, lift_vt: int) -> None:
        super().__init__(f"tenant {tenant_id}'s lift is already at {lift_vt} or higher")
        self.tenant_id, self.lift_vt = tenant_id, lift_vt


class NotTaken(StrEnum):
    """Why a job handed to a claim was not taken, when the claim must know: ENDED, the job ended meanwhile
    (cancelled, or ended by an operator) rather than taken by another process's claim, so its queue is not
    contended (onward.store.claim_order)."""

    ENDED = "ended"


# Claim one job: (the due job as the queue's head showed it, worker, lease ms, admission) -> the Lease, or None
# when the job was not claimable (taken meanwhile, no longer due), NotTaken.ENDED when it had ended. Raises
# AdmissionRefused / FlexRefused / LiftMet.
Take = Callable[[DueJob, str, int, Admission], Lease | NotTaken | None]

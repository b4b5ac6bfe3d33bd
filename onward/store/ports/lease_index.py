"""The lease index role of the recorder: the jobs a claim may take (a ready queue's due head), the leases the
reaper finds lapsed, and a worker's renewal of its lease."""

from __future__ import annotations

from abc import ABC, abstractmethod

from onward.domain.clock import EpochMs
from onward.store.ports.outcomes import RenewalAnswer
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import DueJob


class LeaseIndex(ABC):
    """The job indexes a claim and the reaper read: due jobs by ready queue, expired leases by lease shard.
    They may lag behind the rows (DynamoDB's indexes do): the store re-reads a row before deciding.
    Thread-safe."""

    @abstractmethod
    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        """Up to `limit` jobs in one ready queue due by `now`, earliest due first."""

    def due_jobs(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[str]:
        """Ids of up to `limit` jobs in one ready queue due by `now`, earliest due first."""
        return [job.job_id for job in self.due(tenant_id, queue, now, limit)]

    @abstractmethod
    def expired_leases(self, shard: int, now: EpochMs, limit: int) -> list[str]:
        """Ids of up to `limit` running jobs of one lease shard whose lease expired before `now`, earliest
        first."""

    @abstractmethod
    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs, *,
                    region_epoch: int = 0) -> RenewalAnswer:
        """Set the lease's expiry, only while the job is running under this attempt and owner, in a row of
        the writer's `region_epoch` (RegionFenced when the row is of another: issue 39)."""

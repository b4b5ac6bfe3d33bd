"""What the recorder's reads answer: a job row with where it is queued and charged, a due job of a ready
queue's head, an entry of the `active` index's head, an Idempotency-Key's record (pure values)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.models import Job, Run
from onward.domain.states import JobState


class OpenAttempt(NamedTuple):
    """What a running job's row holds of its attempt's claim beside the Job (issue 34: the claim writes no run
    record): when it was claimed and the lease the claim gave it (the Job's `lease_expires_at` moves with
    each renewal, its `updated_at` with a cancel request)."""

    claimed_at: EpochMs
    lease_expires_at: EpochMs


class JobRow(NamedTuple):
    job: Job
    ready_shards: int  # the ready shards its tenant had when it was created (its ready queue)
    # the counter its running attempt is charged to: running shard j's, on queue entry j; below 0 an older
    # RUNNING counter (on_old_counter)
    running_shard: int = 0
    held_by: str | None = None  # the hold key it is held aside under, out of its ready queue (onward.store.held_jobs)
    region_epoch: int = 0  # the region epoch it was last written under (issue 39: onward.store.region_fence)
    # its running attempt's claim (None: not running, or claimed by a release that opened a run record at claim)
    opened: OpenAttempt | None = None

    def open_run(self) -> Run | None:
        """The running attempt's run record as the row holds it (no outcome yet); None when the row holds none."""
        return open_run(self.job, self.opened)


def on_old_counter(shard: int) -> int:
    """A row's charge as read when its attempt was charged to RUNNING counter `shard` by a release from before
    the counters moved onto the queue entries (issue 34): below 0, so that its end goes back there."""
    return -1 - shard


def old_counter_shard(charged: int) -> int:
    """The shard of an older RUNNING counter a row's charge (below 0) names (on_old_counter's inverse)."""
    return -1 - charged


def open_run(job: Job, opened: OpenAttempt | None) -> Run | None:
    """A running job's attempt as its row holds it (`opened`: the attempt's claim), no outcome yet; None when
    the job is not running or its row holds no claim (a release whose claim opened the record claimed it)."""
    if opened is None or job.state is not JobState.RUNNING or job.lease_owner is None:
        return None
    return Run(job_id=job.job_id, attempt=job.attempt, worker_id=job.lease_owner, claimed_at=opened.claimed_at,
               lease_expires_at=opened.lease_expires_at)


class JobHistory(NamedTuple):
    """What the jobs table holds of one job: its row, its run records in attempt order, its result (None when
    it has none): what the archive keeps of it."""

    job: Job
    runs: list[Run]
    result: Any


class DueJob(NamedTuple):
    """A job of a ready queue's head. `row`: its row as the ready index holds it (the index projects every
    attribute; eventually consistent on AWS, so possibly behind the row): a claim decides from it, and its
    commit checks that the row is still at that version. None: read the row."""

    job_id: str
    due_at: EpochMs
    row: JobRow | None = None

    def rank(self) -> tuple[EpochMs, str]:
        """Its place in its queue's due order, which claims follow (onward.store.claim_order): by due time, those
        due at the same millisecond by job id (the ready index's order: by due time, then the row's key)."""
        return self.due_at, self.job_id


class ActiveEntry(NamedTuple):
    """One entry at the head of the `active` index: a tenant's ready shard that may hold work, keyed by
    the tenant's virtual time when the entry was last served (a lower bound of its virtual time now)."""

    tenant_id: str
    shard: int
    active_vt: float


class ActiveHead(list[ActiveEntry]):
    """A read of the `active` head: its entries in key order, and `unread_from`, the least key the entries
    it left unread can have (the last key read of each partition whose page was full; None when every
    partition was read to its end)."""

    def __init__(self, entries: Iterable[ActiveEntry] = (), unread_from: float | None = None) -> None:
        super().__init__(entries)
        self.unread_from = unread_from


class IdempotencyRecord(NamedTuple):
    job_id: str
    digest: str  # of the request that created the job

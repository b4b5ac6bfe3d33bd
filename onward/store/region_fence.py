"""The region fence in the store (issue 39, docs/regional-recovery.md "How it is fenced"): JobStore's epoch
item, the writer's epoch, and the adoption of rows written under an earlier epoch.

- The epoch item `REGION` / `EPOCH` (`region_epoch`, `raise_region_epoch`): raised only on the condition
  that it is at the epoch below (absent counts as 0), so two failovers to one epoch cannot both win.
- The writer's epoch (`JobStore(..., region_epoch=e)`, `set_region_epoch`): every write plan the store
  builds carries it (onward.store.ports.write_plans), each recorder stamps it on every item the plan puts or
  updates and conditions the job row on it (onward.store.dynamo.region_fence, onward.store.memory.job_log);
  a write refused because of it raises RegionFenced (onward.store.ports.outcomes.judge).
- Adoption (`adopt_page`, `adopt`): the new home's write of a row of an earlier epoch, one transaction per
  job, conditioned on the row's version as read and its epoch below the new one (onward.domain.regions.adoption:
  a running attempt closed `region_failover`, not charged, the job queued again; any other row restamped at
  the new epoch's version, with an outbox event so the view moves forward).
- `rebuild_counters`: the tenants' RUNNING counters and queue entries set from the adopted rows (the
  replicated ones are the old home's, and cannot be trusted).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from onward.domain.clock import Clock, EpochMs
from onward.domain.errors import EpochRaceLost, RegionFenced, RowNotAdopted, StoreContention
from onward.domain.lifecycle import Change
from onward.domain.models import Job
from onward.domain.regions import RegionEpoch, adoption
from onward.domain.states import CLAIMABLE_STATES, JobState, is_terminal
from onward.store.commit_inputs import claimed_at_of
from onward.store.ports.outcomes import CommitOutcome
from onward.store.ports.ready_queues import ready_queue
from onward.store.ports.region_epochs import RegionEpochBook, WriterEpoch
from onward.store.ports.rows import JobRow
from onward.store.ports.write_plans import TransitionWrite, WaitingUpdate, ends_attempt

if TYPE_CHECKING:
    from onward.store.ports.recorder import JobRecorder
    from onward.store.service import JobStore

ADOPT_ROUNDS = 25  # lost races (a concurrent write to the row) before an adoption gives up: StoreContention


class AdoptionPage(NamedTuple):
    """What one page of adoption did: jobs adopted (all states), of which queued again from running, run
    records closed `region_failover`, ended rows restamped; `cursor`: where the next page starts, None when
    every row of an earlier epoch was read."""

    adopted: int
    requeued: int
    runs_closed: int
    terminal_restamped: int
    cursor: str | None


def region_epochs_of(recorder: object) -> RegionEpochBook:
    """The epoch book a recorder keeps (`region_epochs`: both recorders have one; stores sharing a recorder
    share it)."""
    book = getattr(recorder, "region_epochs", None)
    if book is None:
        raise TypeError(f"{type(recorder).__name__} keeps no region epoch item")
    return book  # type: ignore[no-any-return]


def of_epoch(row: JobRow, epoch: int) -> JobRow:
    """`row`, read to decide a transition of a writer of `epoch`: RowNotAdopted when it is of an earlier epoch,
    RegionFenced when of a later one (the writer is stale), before any write is tried. (The commit's condition
    refuses it too; this read tells the refusal apart even where the refusal returns no row.) An ended row
    is let through: it is adopted only when something changes it (the reconciler's), and a transition of
    one that writes (a replay) is refused by its commit's condition; the others write nothing (a cancel of a
    finished job is answered from the row, as it always was)."""
    if is_terminal(row.job.state):
        return row
    if row.region_epoch < epoch:
        raise RowNotAdopted(f"job {row.job.job_id}: its row is of region epoch {row.region_epoch}, not yet adopted "
                            f"into {epoch}")
    if row.region_epoch > epoch:
        raise RegionFenced(f"job {row.job.job_id}: its row is of region epoch {row.region_epoch}; this writer's is "
                           f"{epoch}")
    return row


class RegionFence:
    """JobStore's region fence methods (a base of onward.store.service.JobStore, over its recorder)."""

    _recorder: JobRecorder
    _clock: Clock
    _writer_epoch: WriterEpoch

    # --- the epoch item and the writer's epoch --------------------------------------------------------------

    def region_epoch(self) -> RegionEpoch:
        """The epoch item as this Region holds it (epoch 0, home None: never failed over)."""
        return region_epochs_of(self._recorder).read()

    def raise_region_epoch(self, to: int, *, home: str, previous_home: str | None, reason: str,
                           decided_by: str) -> RegionEpoch:
        """Raise the epoch item to `to`, on the condition that it is at `to - 1` (absent: 0); `fenced_at` is
        this commit's time. EpochRaceLost, nothing written, when it is not (another failover won)."""
        if to < 1:
            raise ValueError(f"a failover raises the epoch to 1 or more, not {to}")
        raised = RegionEpoch(epoch=to, home=home, previous_home=previous_home, fenced_at=self._clock(),
                             decided_by=decided_by, reason=reason)
        if not region_epochs_of(self._recorder).raise_to(raised):
            found = self.region_epoch()
            raise EpochRaceLost(f"the region epoch is {found.epoch} (home {found.home}), not {to - 1}: "
                                f"it cannot be raised to {to}")
        return raised

    def mark_adopted(self, epoch: int) -> RegionEpoch:
        """Record that epoch `epoch`'s adoption is done (`adopted_at`: now, or the time recorded first): the
        new home's API accepts writes again (onward.domain.regions.writes_refused). EpochRaceLost when the
        epoch item is no longer at `epoch` (another failover raised it since)."""
        if not region_epochs_of(self._recorder).mark_adopted(epoch, self._clock()):
            found = self.region_epoch()
            raise EpochRaceLost(f"the region epoch is {found.epoch} (home {found.home}), not {epoch}: its adoption "
                                "cannot be recorded")
        return self.region_epoch()

    @property
    def writer_epoch(self) -> int:
        """The epoch this store writes under (every item stamped, every transition conditioned on it)."""
        return self._writer_epoch.value

    def set_region_epoch(self, epoch: int) -> None:
        """Write under `epoch` from now on (the authority lease, when the witness names a new one)."""
        if epoch < 0:
            raise ValueError(f"a region epoch is never negative: {epoch}")
        self._writer_epoch.value = epoch

    # --- adoption -----------------------------------------------------------------------------------------

    def adopt_page(self, epoch: int, *, cursor: str | None = None, limit: int = 100) -> AdoptionPage:
        """Adopt up to `limit` jobs that have not ended and whose row is of an epoch below `epoch` (queued,
        waiting to retry, running, held aside), from `cursor` (None: the first page), each in one
        transaction. Rows adopted meanwhile by another process are passed (not counted)."""
        job_ids, following = region_epochs_of(self._recorder).unadopted(epoch, cursor, limit)
        adopted = requeued = closed = restamped = 0
        for job_id in job_ids:
            change = self._adopt(job_id, epoch)
            if change is None:
                continue
            adopted += 1
            requeued += change.before is not None and change.before.state is JobState.RUNNING and (
                change.after.state is JobState.QUEUED)
            closed += change.close_run is not None
            restamped += is_terminal(change.after.state) and change.close_run is None
        return AdoptionPage(adopted, requeued, closed, restamped, following)

    def adopt(self, job_id: str, epoch: int, *, counted: bool = True) -> Job | None:
        """Adopt one job into `epoch`, whatever its state (an ended row is restamped as it is): the job as
        adopted, or None when its row is at `epoch` already, or gone; RegionFenced when it is of a later epoch
        (this adopter is stale). `counted` False: the epoch's counters never counted the row (the fence
        reconciler's adoption of a row that arrived after `rebuild_counters`): it enters them as a new job
        would (its queue entry +1 if it is queued after, no RUNNING counter or concurrency slot given back)."""
        change = self._adopt(job_id, epoch, counted=counted)
        return None if change is None else change.after

    def _adopt(self, job_id: str, epoch: int, *, counted: bool = True) -> Change | None:
        store: JobStore = self  # type: ignore[assignment]
        for round_ in range(ADOPT_ROUNDS):
            row = self._recorder.job(job_id)
            if row is not None and row.region_epoch > epoch:
                raise RegionFenced(f"job {job_id} is of region epoch {row.region_epoch}: it cannot be adopted into "
                                   f"{epoch}")
            if row is None or row.region_epoch == epoch:
                return None
            held = row.held_by is not None
            if held:  # held aside (onward.store.held_jobs): back in its queue, then adopted
                row = store._holding.put_back(row)
            change = adoption(row.job, epoch, self._clock())
            write = self._adoption_write(store, change, row, epoch)
            if not counted and not held:  # (a held row's release counted it into its queue entry)
                write = uncounted_adoption(write, store._registry.virtual_clock())
            try:
                outcome = self._recorder.commit(write)
            except RegionFenced:
                continue  # adopted meanwhile, or of a later epoch: read again
            if outcome is CommitOutcome.COMMITTED:
                store._claimer.committed(write.running, write.waiting)
                return change
            time.sleep(store._rng.uniform(0, 0.002 * 2 ** min(round_, 6)))
        raise StoreContention(f"job {job_id}: its adoption into epoch {epoch} lost {ADOPT_ROUNDS} races")

    def _adoption_write(self, store: JobStore, change: Change, row: JobRow, epoch: int) -> TransitionWrite:
        after = change.after
        claimed_at: EpochMs | None = None
        if ends_attempt(change):
            assert change.close_run is not None
            claimed_at = claimed_at_of(self._recorder, row, change.close_run.attempt)
        return TransitionWrite.of(
            change, ready_shards=row.ready_shards, retention_s=store._retention_s,
            job_retention_s=store._policy.for_job(after.tenant_id, after.type, after.state), claimed_at=claimed_at,
            running_shard=row.running_shard, clock=store._registry.virtual_clock(),
            concurrency=store.concurrency.for_commit(change), region_epoch=epoch, adopts=True,
            opened=row.opened)

    # --- counters -----------------------------------------------------------------------------------------

    def rebuild_counters(self, epoch: int) -> int:
        """Set every tenant's RUNNING counters and queue entries from the rows as they are after adoption
        (none running: RUNNING 0; each queue entry's bands the queued and retry_wait rows of its ready shard),
        stamped `epoch`. Returns the number of counter items written."""
        store: JobStore = self  # type: ignore[assignment]
        return region_epochs_of(self._recorder).rebuild_counters(
            epoch, store._registry.registered(), store._registry.virtual_clock())


def uncounted_adoption(write: TransitionWrite, clock: float) -> TransitionWrite:
    """`write`, an adoption, for a row the epoch's counters never counted (fix of issue 39's drill: a job the
    old home created or claimed during a partition, adopted by the fence reconciler after `rebuild_counters`):
    no end of an attempt on the RUNNING counter or the concurrency key (neither was taken here), and the job
    enters its queue entry (+1) if it is queued after, as a created job does."""
    after = write.change.after
    entering = None
    if after.state in CLAIMABLE_STATES:
        entering = WaitingUpdate(after.tenant_id, ready_queue(after, write.ready_shards), 1, clock,
                                 job_id=after.job_id)
    return replace(write, running=None, waiting=entering, concurrency=None)

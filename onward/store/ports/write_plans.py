"""What one write holds, with its conditions: the write plans a recorder commits (TransitionWrite, NewJobWrite)
and their parts, decided from a lifecycle Change (pure).

A `JobRecorder` reads job rows, runs, results and events, lists due jobs and expired leases from its
indexes, keeps the tenants' settings and dispatch counters, and commits writes as ONE atomic conditional
unit: either every item of a `TransitionWrite` / `NewJobWrite` is written or none is. The conditions are
stated here by meaning, not as DynamoDB expressions, so that every recorder honours the same ones:

- the job row: exactly the state, version and attempt the change was decided from (a reap also: the lease
  still lapsed at the reap's time, as a heartbeat may renew it meanwhile);
- a run record is opened only if absent and closed only once (present, no outcome yet); a result is put
  only if absent; one outbox event per version (`attribute_not_exists`);
- the tenant's RUNNING counter the claim charges, when a claim starts an attempt, under its `Admission`:
  below that shard's cap; a flexing claim instead checks that each other capped tenant's shards are still
  at their caps;
- a create: the job id and the Idempotency-Key unused, and its unique key free (UniqueClaim); a batch of
  creates (`create_many`) is one unit too,
  its jobs' counts on a queue entry summed into one update of it (`queue_entry_updates`: a DynamoDB
  transaction names an item once), cut by the store into units that fit one transaction (`transaction_cuts`);
- a run's marks (a zombie's late report, a lost lease, an overlap): on the run's worker and outcome.

When a condition fails, `judge` says what that means for the caller, in one order of precedence for every
recorder. Implementations: onward.store.dynamo.recorder (one TransactWriteItems per write), onward.store.memory.recorder
(dicts under one lock, for tests and simulations). tests/contract runs one suite against both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.dispatch import UsageChange, on_claim, on_end
from onward.domain.lifecycle import Change
from onward.domain.models import Job, Run
from onward.domain.states import CLAIMABLE_STATES, JobState, RunOutcome
from onward.store.ports.concurrency_keys import SlotReturn, SlotTake
from onward.store.ports.outcomes import Role
from onward.store.ports.rate_buckets import RateTake
from onward.store.ports.ready_queues import ReadyQueue, ready_queue
from onward.store.ports.rows import OpenAttempt, old_counter_shard, open_run
from onward.store.ports.unique_keys import UniqueClaim


@dataclass(frozen=True)
class Admission:
    """The condition on which a claim takes a running slot: charged to RUNNING counter `running_shard`,
    kept below `cap` there (the tenant's cap split over its shards, less the attempts its older RUNNING item
    of that shard still counts; None: flexing, or no cap); when flexing, only while every (tenant, shard,
    count) in `others_at_cap` is still at its cap (the counter on that queue entry at least `count`). `active_vt`:
    the key its queue entry takes in the `active` index (the tenant's virtual time: served shards go to the
    back of the tenant's rotation)."""

    running_shard: int = 0
    cap: int | None = None
    active_vt: float | None = None
    others_at_cap: tuple[tuple[str, int, int], ...] = ()
    # a returning tenant's lift (dispatch.Candidate.lift_offset_ms), raised by the claim that serves it, on the
    # counter it charges: only while that counter's lift is lower (else another claim served it meanwhile)
    lift_vt: int | None = None


class RunningUpdate(NamedTuple):
    """What a transition adds to one of its tenant's RUNNING counters, and on which condition (an attempt
    that starts: `below_cap` from its Admission; one that ends: none). The counter of running shard `shard`
    is kept on queue entry `shard` (one item with the claim's own waiting update when it takes its job from
    that entry); `old_counter`: an attempt claimed before the counters moved ends on its RUNNING item."""

    tenant_id: str
    shard: int
    usage: UsageChange
    below_cap: int | None = None  # condition: running < below_cap (no counter yet counts as 0)
    old_counter: bool = False
    lift_vt: int | None = None  # a claim's: the lift it raises (condition: the counter's lift below it)


class WaitingUpdate(NamedTuple):
    """+1 / -1 on a tenant's queue entry for one band of one ready shard. A job entering it puts the entry
    in the `active` index (keyed `active_vt` if it has no key yet); a claim leaving it re-keys the entry to
    `active_vt` and marks it served (its tenant no longer returning: QueueEntry.returned_at). `job_id`: the
    job entering (it draws the entry's `active` partition: index_shards.active_shard)."""

    tenant_id: str
    queue: ReadyQueue
    delta: int
    active_vt: float | None = None
    served: bool = False
    job_id: str = ""


class QueueEntryUpdate(NamedTuple):
    """What one write does to one of a tenant's queue entries: the WaitingUpdates of its jobs there summed, as
    one update of the item (a DynamoDB transaction may name an item only once). `bands`: (priority, delta)
    per band, each once; `entering`: how many jobs entered (each one counts in `entered`); `active_vt` and
    `served` as WaitingUpdate's; `entering_job`: the least id of the jobs entering (draws its partition)."""

    tenant_id: str
    shard: int
    bands: tuple[tuple[int, int], ...]
    entering: int
    active_vt: float | None
    served: bool = False
    entering_job: str = ""

    @property
    def delta(self) -> int:
        """The change of its `waiting` total."""
        return sum(delta for _, delta in self.bands)


def queue_entry_updates(updates: Iterable[WaitingUpdate]) -> list[QueueEntryUpdate]:
    """The WaitingUpdates of one write, summed per queue entry (in the order the entries first appear). They
    all go one way (a create's jobs enter, a transition moves one job): a write that mixes jobs entering and
    leaving one entry is a bug (ValueError). Entering, the entry joins the `active` index at the lowest key
    given (it keeps its key if it has one)."""
    by_entry: dict[tuple[str, int], list[WaitingUpdate]] = {}
    for update in updates:
        by_entry.setdefault((update.tenant_id, update.queue.shard), []).append(update)
    summed = []
    for (tenant_id, shard), entry_updates in by_entry.items():
        if len({update.delta > 0 for update in entry_updates}) > 1:
            raise ValueError(f"jobs entering and leaving queue entry {tenant_id}#{shard} in one write")
        bands: dict[int, int] = {}
        for update in entry_updates:
            bands[update.queue.priority] = bands.get(update.queue.priority, 0) + update.delta
        keys = [update.active_vt for update in entry_updates if update.active_vt is not None]
        summed.append(QueueEntryUpdate(tenant_id, shard, tuple(sorted(bands.items())),
                                       sum(update.delta > 0 for update in entry_updates), min(keys, default=None),
                                       any(update.served for update in entry_updates),
                                       min((update.job_id for update in entry_updates if update.delta > 0),
                                           default="")))
    return summed


class OverlapMark(NamedTuple):
    """What a run record is marked with when its running interval overlapped other attempts' (onward.domain.overlaps):
    their numbers (added to `overlapped_with`, a set) and when the earliest of those overlaps began (its key
    in the `overlaps` index, kept from the first mark)."""

    attempts: tuple[int, ...]
    began_at: EpochMs


def ends_attempt(change: Change) -> bool:
    """True for a transition that stops a running attempt (its RUNNING counter goes down)."""
    return (change.before is not None and change.before.state is JobState.RUNNING
            and change.after.state is not JobState.RUNNING)


def waiting_update(change: Change, shards: int, clock: float, admission: Admission | None = None
                   ) -> WaitingUpdate | None:
    """+1 / -1 on the tenant's queue entry of the job's ready queue when the job enters / leaves it (queued
    or retry_wait). Entering, the entry joins the `active` index at the system clock `clock` if it has no
    key; a claim re-keys it (`admission.active_vt`)."""
    was = change.before is not None and change.before.state in CLAIMABLE_STATES
    delta = (change.after.state in CLAIMABLE_STATES) - was
    if not delta:
        return None
    queue = ready_queue(change.after, shards)
    if delta > 0:
        return WaitingUpdate(change.after.tenant_id, queue, delta, clock, job_id=change.after.job_id)
    if admission is None:
        return WaitingUpdate(change.after.tenant_id, queue, delta)
    return WaitingUpdate(change.after.tenant_id, queue, delta, admission.active_vt, served=True)


def running_update(
    change: Change, admission: Admission | None, claimed_at: EpochMs | None, running_shard: int
) -> RunningUpdate | None:
    """The tenant's RUNNING counter when an attempt starts (claim: `dispatch.on_claim` on the Admission's
    shard, under its cap) or ends (`dispatch.on_end` on `running_shard`, the one its claim charged:
    complete, fail, reap, release, cancel acknowledgement)."""
    before = change.before
    was_running = before is not None and before.state is JobState.RUNNING
    delta = (change.after.state is JobState.RUNNING) - was_running
    if not delta:
        return None
    if delta > 0:
        assert change.open_run is not None
        admission = admission or Admission()
        return RunningUpdate(change.after.tenant_id, admission.running_shard, on_claim(change.open_run.claimed_at),
                             below_cap=admission.cap, lift_vt=admission.lift_vt)
    assert change.close_run is not None
    assert claimed_at is not None, "the store reads it from the row (or an old run record) when the caller has none"
    ended = on_end(claimed_at, change.close_run.finished_at)
    if running_shard < 0:
        return RunningUpdate(change.after.tenant_id, old_counter_shard(running_shard), ended, old_counter=True)
    return RunningUpdate(change.after.tenant_id, running_shard, ended)


@dataclass(frozen=True)
class TransitionWrite:
    """Everything one decided transition writes, with its conditions, as domain values: one atomic unit. The
    job row goes from `change.before` (the condition: its state, version and attempt, and with `lapsed_by`
    a lease lapsed by then) to `change.after`; the run `change.open_run` is opened, `change.close_run`
    closed, the result put when `change.has_result`, one outbox event of `change.after` put; each recorder
    stores them as it keeps them (onward.store.dynamo.plan_items: the DynamoDB items)."""

    change: Change
    ready_shards: int  # the ready shards its tenant had when the job was created (its ready queue)
    running_shard: int  # the RUNNING counter the row's running attempt was charged to
    charged_shard: int  # the RUNNING counter the row names after the change (a claim's: its Admission's)
    retention_s: int  # the outbox event's TTL
    job_retention_s: int  # how long the job's items are kept once they are done
    running: RunningUpdate | None = None
    waiting: WaitingUpdate | None = None
    still_at_cap: tuple[tuple[str, int, int], ...] = ()
    rate: RateTake | None = None  # rate limits (issue 37): a claim's take from its buckets (ports.rate_buckets)
    # concurrency keys (issue 37): a claim's slot, or an ending attempt's slot given back (ports.concurrency_keys)
    concurrency: SlotTake | SlotReturn | None = None
    # region fence (issue 39): the writer's epoch, stamped on every item; the job row's condition: its epoch is
    # this one (absent counts as 0), or, for an adoption (`adopts`), below it
    region_epoch: int = 0
    adopts: bool = False
    # the claim of the attempt the row runs, as the row holds it: what a transition ending it writes on its run
    # record (None: claimed by a release whose claim opened the record; issue 34)
    opened: OpenAttempt | None = None

    @classmethod
    def of(cls, change: Change, *, ready_shards: int, retention_s: int, job_retention_s: int,
           admission: Admission | None = None, claimed_at: EpochMs | None = None, running_shard: int = 0,
           clock: float = 0.0, rate: RateTake | None = None,
           concurrency: SlotTake | SlotReturn | None = None, region_epoch: int = 0,
           adopts: bool = False, opened: OpenAttempt | None = None) -> TransitionWrite:
        """`retention_s`: the outbox event's TTL; `job_retention_s`: how long the job's items are kept once
        they are done (the job row and result once it ended, a run once its attempt ended). `admission`: how
        a claim takes its running slot. `claimed_at`: when the attempt this transition ends was claimed
        (needed when it ends one); `running_shard`: the RUNNING counter the row's running attempt is charged
        to. `clock`: the system virtual clock, for a queue entry the job enters. `opened`: the row's running
        attempt's claim (the default of `claimed_at`)."""
        assert change.before is not None
        if claimed_at is None and opened is not None:
            claimed_at = opened.claimed_at
        running = running_update(change, admission, claimed_at, running_shard)
        checks = admission.others_at_cap if running is not None and admission is not None else ()
        return cls(
            change=change,
            ready_shards=ready_shards,
            running_shard=running_shard,
            charged_shard=admission.running_shard if admission is not None else running_shard,
            retention_s=retention_s,
            job_retention_s=job_retention_s,
            running=running,
            waiting=waiting_update(change, ready_shards, clock, admission),
            still_at_cap=checks,
            rate=rate,
            concurrency=concurrency,
            region_epoch=region_epoch,
            adopts=adopts,
            opened=opened,
        )

    @property
    def job_id(self) -> str:
        return self.change.after.job_id

    @property
    def claims_slot(self) -> bool:
        """Whether it takes a concurrency key's slot (a refusal of its key then means KEY_AT_LIMIT)."""
        return isinstance(self.concurrency, SlotTake)

    @property
    def expected(self) -> tuple[JobState, int, int]:
        """The job row's condition: the state, version and attempt the change was decided from."""
        before = self.change.before
        assert before is not None
        return before.state, before.version, before.attempt

    @property
    def lapsed_by(self) -> EpochMs | None:
        """A reap's further condition: the row's lease lapsed by the reap's time (a heartbeat may have renewed
        it since the reaper read the row). None for every other transition."""
        closure = self.change.close_run
        if closure is not None and closure.outcome is RunOutcome.LEASE_EXPIRED:
            return closure.finished_at
        return None

    def closed_whole(self) -> Run | None:
        """The run the transition ending an attempt writes whole: that attempt as the row holds it (issue 34).
        None when it ends none, or when a release whose claim opened the record claimed it (only the closure
        is set on that record)."""
        closure, before = self.change.close_run, self.change.before
        run = None if closure is None or before is None else open_run(before, self.opened)
        return run if run is not None and closure is not None and run.attempt == closure.attempt else None

    @property
    def subject(self) -> str:
        """`<transition>:<job_id>`, as fault points and errors name it."""
        return f"{self.change.transition.value}:{self.change.after.job_id}"


@dataclass(frozen=True)
class NewJobWrite:
    """A create, as domain values: the job `change.after` and its first event, its queue entry's update and,
    with an Idempotency-Key, the key; on the condition that the job id and the key are unused."""

    change: Change
    ready_shards: int
    retention_s: int  # the outbox event's TTL
    job_retention_s: int  # the job retention: the Idempotency-Key's window
    waiting: WaitingUpdate | None
    idempotency: tuple[str, str] | None  # (Idempotency-Key, digest of the request)
    # unique jobs (issue 37): the tenant's unique key the job takes, on its condition
    unique: UniqueClaim | None = None
    region_epoch: int = 0  # region fence (issue 39): the writer's epoch, stamped on every item it puts

    @classmethod
    def of(cls, change: Change, *, ready_shards: int, retention_s: int, job_retention_s: int,
           idempotency: tuple[str, str] | None = None, clock: float = 0.0,
           unique: UniqueClaim | None = None, region_epoch: int = 0) -> NewJobWrite:
        """`retention_s`: the outbox event's TTL; `job_retention_s`: the job retention (the Idempotency-Key's
        window). `idempotency`: (Idempotency-Key, digest of the request). `clock`: the system virtual
        clock (the key of the job's queue entry if it enters the `active` index)."""
        return cls(change=change, ready_shards=ready_shards, retention_s=retention_s,
                   job_retention_s=job_retention_s, waiting=waiting_update(change, ready_shards, clock),
                   idempotency=idempotency, unique=unique, region_epoch=region_epoch)

    @property
    def job(self) -> Job:
        return self.change.after


def epoch_refusal(row_epoch: int, write: TransitionWrite) -> Role | None:
    """The region fence's condition on the job row (issue 39): its epoch is the writer's, or, for an adoption,
    below it (a row without the attribute is epoch 0). None when it holds; else Role.UNADOPTED for a row of
    an earlier epoch than the writer's, Role.REGION for one of a later (the writer is stale)."""
    if write.adopts:
        return None if row_epoch < write.region_epoch else Role.REGION
    if row_epoch == write.region_epoch:
        return None
    return Role.UNADOPTED if row_epoch < write.region_epoch else Role.REGION

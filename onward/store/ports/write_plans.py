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
- a create: the job id and the Idempotency-Key unused; a batch of creates (`create_many`) is one unit too,
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
from typing import Any, NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.dispatch import UsageChange, on_claim, on_end
from onward.domain.lifecycle import Change
from onward.domain.states import CLAIMABLE_STATES, JobState, RunOutcome
from onward.store.dynamo.keys import (
    ReadyQueue,
    idempotency_item,
    item_bytes,
    job_item,
    outbox_item,
    ready_queue,
    result_item,
    run_item,
    ttl_after,
)


@dataclass(frozen=True)
class Admission:
    """The condition on which a claim takes a running slot: charged to RUNNING counter `running_shard`,
    kept below `cap` there (the tenant's cap split over its shards; None: flexing, or no cap); when
    flexing, only while every (tenant, shard, shard cap) in `others_at_cap` is still at its cap. `active_vt`:
    the key its queue entry takes in the `active` index (the tenant's virtual time: served shards go to the
    back of the tenant's rotation)."""

    running_shard: int = 0
    cap: int | None = None
    active_vt: float | None = None
    others_at_cap: tuple[tuple[str, int, int], ...] = ()


class JobRowUpdate(NamedTuple):
    """The job row's change: `set` these attributes, `remove` those, on the condition that the row still
    holds `expected` (state, version, attempt) and, with `lapsed_by`, a lease that expired by then.
    Attributes the change does not touch keep what the row holds (a heartbeat's renewed lease)."""

    job_id: str
    set: dict[str, Any]
    remove: tuple[str, ...]
    expected: tuple[JobState, int, int]
    lapsed_by: EpochMs | None


class RunClose(NamedTuple):
    job_id: str
    attempt: int
    fields: dict[str, Any]  # outcome, finished_at, error, expires_at


class RunningUpdate(NamedTuple):
    """What a transition adds to one of its tenant's RUNNING counters, and on which condition (an attempt
    that starts: `below_cap` from its Admission; one that ends: none)."""

    tenant_id: str
    shard: int
    usage: UsageChange
    below_cap: int | None = None  # condition: running < below_cap (no counter yet counts as 0)


class WaitingUpdate(NamedTuple):
    """+1 / -1 on a tenant's queue entry for one band of one ready shard. A job entering it puts the entry
    in the `active` index (keyed `active_vt` if it has no key yet); a claim leaving it re-keys the entry to
    `active_vt`."""

    tenant_id: str
    queue: ReadyQueue
    delta: int
    active_vt: float | None = None


class QueueEntryUpdate(NamedTuple):
    """What one write does to one of a tenant's queue entries: the WaitingUpdates of its jobs there summed, as
    one update of the item (a DynamoDB transaction may name an item only once). `bands`: (priority, delta)
    per band, each once; `entering`: how many jobs entered (each one counts in `entered`); `active_vt` as
    WaitingUpdate's."""

    tenant_id: str
    shard: int
    bands: tuple[tuple[int, int], ...]
    entering: int
    active_vt: float | None

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
                                       sum(update.delta > 0 for update in entry_updates), min(keys, default=None)))
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
        return WaitingUpdate(change.after.tenant_id, queue, delta, clock)
    return WaitingUpdate(change.after.tenant_id, queue, delta, admission.active_vt if admission else None)


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
                             below_cap=admission.cap)
    assert change.close_run is not None
    assert claimed_at is not None, "the store reads it from the run record when the caller has none"
    return RunningUpdate(change.after.tenant_id, running_shard, on_end(claimed_at, change.close_run.finished_at))


def _job_row_update(change: Change, shards: int, retention_s: int, running_shard: int,
                    admission: Admission | None) -> JobRowUpdate:
    before_job = change.before
    assert before_job is not None
    # The diff sets `expires_at` when the job ends and removes it when a replay revives it.
    after_shard = admission.running_shard if admission is not None else running_shard
    before = job_item(before_job, shards, retention_s, running_shard)
    after = job_item(change.after, shards, retention_s, after_shard)
    closure = change.close_run
    return JobRowUpdate(
        job_id=change.after.job_id,
        set={name: value for name, value in after.items() if before.get(name) != value},
        remove=tuple(name for name in before if name not in after),
        expected=(before_job.state, before_job.version, before_job.attempt),
        # A heartbeat may have renewed the lease since the reaper read the row.
        lapsed_by=closure.finished_at if closure is not None and closure.outcome is RunOutcome.LEASE_EXPIRED
        else None,
    )


@dataclass(frozen=True)
class TransitionWrite:
    """Everything one decided transition writes, with its conditions: one atomic unit."""

    change: Change
    job: JobRowUpdate
    outbox: dict[str, Any]
    open_run: dict[str, Any] | None = None
    close_run: RunClose | None = None
    result: dict[str, Any] | None = None
    running: RunningUpdate | None = None
    waiting: WaitingUpdate | None = None
    still_at_cap: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def of(cls, change: Change, *, ready_shards: int, retention_s: int, job_retention_s: int,
           admission: Admission | None = None, claimed_at: EpochMs | None = None, running_shard: int = 0,
           clock: float = 0.0) -> TransitionWrite:
        """`retention_s`: the outbox event's TTL; `job_retention_s`: how long the job's items are kept once
        they are done (onward.store.dynamo.keys: the job row and result once it ended, a run once its attempt ended).
        `admission`: how a claim takes its running slot. `claimed_at`: when the attempt this transition
        ends was claimed (needed when it ends one); `running_shard`: the RUNNING counter the row's running
        attempt is charged to. `clock`: the system virtual clock, for a queue entry the job enters."""
        closure = change.close_run
        close = None
        if closure is not None:
            fields: dict[str, Any] = {"outcome": closure.outcome.value, "finished_at": closure.finished_at}
            if closure.error is not None:
                fields["error"] = closure.error.model_dump(mode="json")
            fields["expires_at"] = ttl_after(closure.finished_at, job_retention_s)
            close = RunClose(change.after.job_id, closure.attempt, fields)
        running = running_update(change, admission, claimed_at, running_shard)
        checks = admission.others_at_cap if running is not None and admission is not None else ()
        return cls(
            change=change,
            job=_job_row_update(change, ready_shards, job_retention_s, running_shard, admission),
            outbox=outbox_item(change, retention_s),
            open_run=None if change.open_run is None else run_item(change.open_run),
            close_run=close,
            result=result_item(change, job_retention_s) if change.has_result else None,
            running=running,
            waiting=waiting_update(change, ready_shards, clock, admission),
            still_at_cap=checks,
        )

    @property
    def subject(self) -> str:
        """`<transition>:<job_id>`, as fault points and errors name it."""
        return f"{self.change.transition.value}:{self.change.after.job_id}"


@dataclass(frozen=True)
class NewJobWrite:
    """A create: the job row, its first event, its WAITING counter and, with an Idempotency-Key, the key's
    item; on the condition that the job id and the key are unused."""

    change: Change
    job: dict[str, Any]
    outbox: dict[str, Any]
    waiting: WaitingUpdate | None
    idempotency: dict[str, Any] | None

    @classmethod
    def of(cls, change: Change, *, ready_shards: int, retention_s: int, job_retention_s: int,
           idempotency: tuple[str, str] | None = None, clock: float = 0.0) -> NewJobWrite:
        """`retention_s`: the outbox event's TTL; `job_retention_s`: the job retention (the Idempotency-Key's
        window). `idempotency`: (Idempotency-Key, digest of the request). `clock`: the system virtual
        clock (the key of the job's queue entry if it enters the `active` index)."""
        job = change.after
        key_item = None
        if idempotency is not None:
            key, digest = idempotency
            key_item = idempotency_item(job, key, digest, job_retention_s)
        return cls(change=change, job=job_item(job, ready_shards, job_retention_s),
                   outbox=outbox_item(change, retention_s), waiting=waiting_update(change, ready_shards, clock),
                   idempotency=key_item)

    @property
    def puts(self) -> list[dict[str, Any]]:
        """The items it puts (job row, first event, Idempotency-Key): its actions besides the queue entry's."""
        return [self.job, self.outbox, *([self.idempotency] if self.idempotency is not None else [])]

    @property
    def item_bytes(self) -> int:
        """What its puts count towards a transaction's 4 MB (an upper bound)."""
        return sum(item_bytes(item) for item in self.puts)

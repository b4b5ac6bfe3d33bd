"""The job store's persistence protocol: what JobStore (the service layer) needs from storage, and the
vocabulary it speaks in (pure).

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

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.dispatch import (
    TenantLoad,
    TenantPolicy,
    Usage,
    UsageChange,
    on_claim,
    on_end,
    running_shards,
    shard_caps,
)
from onward.domain.errors import StoreInvariantViolation
from onward.domain.lifecycle import Change
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import CLAIMABLE_STATES, JobState, RunOutcome
from onward.store.dynamo.keys import (
    Entity,
    idempotency_item,
    item_bytes,
    job_item,
    outbox_item,
    result_item,
    run_item,
    ttl_after,
)
from onward.store.queues import ReadyQueue, ready_queue

# --- tenants ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    ready_shards: int = 1

    @property
    def running_shards(self) -> int:
        """How many RUNNING counters its attempts are charged to (dispatch.running_shards)."""
        return running_shards(self.ready_shards)

    def shard_caps(self) -> tuple[int | None, ...]:
        """Its cap split over its RUNNING counters (dispatch.shard_caps)."""
        return shard_caps(self.policy.cap, self.running_shards)


@dataclass(frozen=True)
class QueueEntry:
    """A tenant's queue entry of one ready shard: its waiting jobs (queued or retry_wait) by priority band,
    and its key in the `active` index (None when it is not in the index)."""

    tenant_id: str
    shard: int
    bands: dict[int, int] = field(default_factory=dict)
    active_vt: float | None = None
    entered: int = 0  # jobs that ever entered it: a park is conditional on none entering since the read

    @property
    def waiting(self) -> int:
        return sum(count for count in self.bands.values() if count > 0)

    def bands_with_work(self) -> list[int]:
        """Its priority bands holding waiting jobs, highest first."""
        return sorted((band for band, count in self.bands.items() if count > 0), reverse=True)


class ActiveEntry(NamedTuple):
    """One entry at the head of the `active` index: a tenant's ready shard that may hold work, keyed by
    the tenant's virtual time when the entry was last served (a lower bound of its virtual time now)."""

    tenant_id: str
    shard: int
    active_vt: float


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


@dataclass(frozen=True)
class TenantState:
    """A tenant's settings and dispatch counters, as one read found them: its usage (the sum of its running
    shards'), each running shard's, and its queue entries by ready shard."""

    tenant: Tenant
    usage: Usage = field(default_factory=Usage)
    queues: dict[int, QueueEntry] = field(default_factory=dict)
    running_by_shard: tuple[Usage, ...] = ()

    @property
    def waiting_by_queue(self) -> dict[ReadyQueue, int]:
        return {ReadyQueue(shard, band): count for shard, entry in self.queues.items()
                for band, count in entry.bands.items() if count}

    def load(self) -> TenantLoad:
        waiting = sum(entry.waiting for entry in self.queues.values())
        return TenantLoad(self.tenant.tenant_id, self.tenant.policy, self.usage, waiting)

    def queues_with_work(self) -> list[ReadyQueue]:
        """The ready queues holding waiting jobs, highest priority first."""
        return sorted((queue for queue, count in self.waiting_by_queue.items() if count > 0),
                      key=lambda queue: (-queue.priority, queue.shard))


def usage_from_values(values: dict[str, Any]) -> Usage:
    """A RUNNING counter's usage (plain values)."""
    return Usage(values.get("running", 0), values.get("ended_ms", 0), values.get("started_ms_sum", 0),
                 values.get("offset_ms", 0))


def queue_entry_from_values(values: dict[str, Any]) -> QueueEntry:
    """A queue entry (plain values)."""
    bands = {int(name[1:]): count for name, count in values.items()
             if name[:1] == "w" and name[1:].isdigit()}
    return QueueEntry(values["tenant_id"], values["shard"], bands,
                      values.get("active_vt") if "active_pk" in values else None, values.get("entered", 0))


def tenant_state(tenant: Tenant, counters: Iterable[dict[str, Any]]) -> TenantState:
    """A tenant's state from its counter items (plain values: RUNNING counters and queue entries, any
    order, any subset)."""
    shards = tenant.running_shards
    running = [Usage()] * shards
    queues: dict[int, QueueEntry] = {}
    for values in counters:
        entity = values.get("entity")
        if entity == Entity.TENANT_RUNNING:
            shard = values["shard"]
            if shard >= len(running):  # charged before its shards were reduced: counted until it ends
                running.extend([Usage()] * (shard + 1 - len(running)))
            running[shard] = usage_from_values(values)
        elif entity == Entity.TENANT_QUEUE:
            entry = queue_entry_from_values(values)
            queues[entry.shard] = entry
    return TenantState(tenant, Usage.combined(running), queues, tuple(running))


def tenant_from_values(values: dict[str, Any]) -> Tenant:
    """A registry item's tenant (plain values)."""
    policy = TenantPolicy(weight=values["weight"], cap=values.get("cap"))
    return Tenant(values.get("tenant_id") or values["sk"], policy, values["ready_shards"])


# --- what one write holds, with its conditions -------------------------------------------------------------


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


class Role(StrEnum):
    """The part an item plays in one write; a failed condition is reported, and judged, by role."""

    JOB = "job"  # the job row: expected state, version and attempt (and, for a reap, a lapsed lease)
    RUN_OPENED = "run_opened"  # the claim's new run record: absent
    RUN_CLOSED = "run_closed"  # the run record an ending attempt closes: present, no outcome yet
    RESULT = "result"  # absent
    RUNNING = "running"  # the tenant's RUNNING counter, under the claim's Admission
    WAITING = "waiting"  # a tenant's WAITING counter: unconditional
    OUTBOX = "outbox"  # one event per version: absent
    STILL_AT_CAP = "still_at_cap"  # a flexing claim's check on another capped tenant
    IDEMPOTENCY = "idempotency"  # a create's Idempotency-Key: unused
    TENANT = "tenant"  # a tenant's settings and registry entry (a registration only if new: absent)


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


# What one TransactWriteItems may hold (DynamoDB's limits): both recorders refuse a create_many beyond them.
TRANSACTION_MAX_ACTIONS = 100
TRANSACTION_MAX_BYTES = 4_000_000  # of items, counted by keys.item_bytes (an upper bound): under 4 MB
QUEUE_ENTRY_BYTES = 1_000  # an upper bound of a queue entry's item (a few counters and index keys)


def transaction_size(writes: Sequence[NewJobWrite]) -> tuple[int, int]:
    """The actions and bytes of creating `writes` in one transaction: each job's puts, and one update per
    queue entry its jobs enter (summed: queue_entry_updates)."""
    entries = {(write.waiting.tenant_id, write.waiting.queue.shard) for write in writes if write.waiting}
    actions = sum(len(write.puts) for write in writes) + len(entries)
    return actions, sum(write.item_bytes for write in writes) + len(entries) * QUEUE_ENTRY_BYTES


def transaction_cuts(writes: Sequence[NewJobWrite]) -> list[list[int]]:
    """`writes` cut into consecutive runs that each fit one transaction (TRANSACTION_MAX_ACTIONS actions,
    TRANSACTION_MAX_BYTES of items), as few as the order allows, as positions in `writes`. With one queue
    entry, 33 jobs with an Idempotency-Key fit one (99 puts + the entry's update), 49 without; a job with
    large params takes up to about 400 KB, so ten such fit one. Any part of a run fits too (a retry of
    fewer jobs). One write always fits (an item is at most 400 KB)."""
    cuts: list[list[int]] = []
    current: list[int] = []
    entries: set[tuple[str, int]] = set()
    actions = size = 0
    for position, write in enumerate(writes):
        entry = {(write.waiting.tenant_id, write.waiting.queue.shard)} if write.waiting else set()
        more_actions = len(write.puts) + len(entry - entries)
        more_bytes = write.item_bytes + len(entry - entries) * QUEUE_ENTRY_BYTES
        if current and (actions + more_actions > TRANSACTION_MAX_ACTIONS
                        or size + more_bytes > TRANSACTION_MAX_BYTES):
            cuts.append(current)
            current, entries, actions, size = [], set(), 0, 0
            more_actions = len(write.puts) + len(entry)
            more_bytes = write.item_bytes + len(entry) * QUEUE_ENTRY_BYTES
        current.append(position)
        entries |= entry
        actions += more_actions
        size += more_bytes
    if current:
        cuts.append(current)
    return cuts


def check_one_transaction(writes: Sequence[NewJobWrite]) -> None:
    """Refuse (StoreInvariantViolation) creates that one transaction cannot hold: beyond its limits, or naming
    an item twice (a job id or an Idempotency-Key), as DynamoDB refuses such a request."""
    actions, size = transaction_size(writes)
    if not writes or actions > TRANSACTION_MAX_ACTIONS or size > TRANSACTION_MAX_BYTES:
        raise StoreInvariantViolation(f"{len(writes)} creates in one transaction: {actions} actions, {size} bytes "
                                      f"(1 to {TRANSACTION_MAX_ACTIONS} actions, {TRANSACTION_MAX_BYTES} bytes)")
    keys = [(item["pk"], item["sk"]) for write in writes for item in (write.job, write.idempotency) if item]
    if len(set(keys)) < len(keys):
        raise StoreInvariantViolation("creates in one transaction name one item twice (a job id or a key)")


# --- answers ------------------------------------------------------------------------------------------------


class CommitOutcome(StrEnum):
    """How a commit ended. Anything else a refused write could mean breaks an invariant
    (StoreInvariantViolation)."""

    COMMITTED = "committed"
    JOB_MOVED = "job_moved"  # the job row is no longer what the change was decided from: decide again
    CONFLICT = "conflict"  # a concurrent transaction on one of its items (DynamoDB): nothing written, again
    CAP_REACHED = "cap_reached"  # the Admission's condition on the RUNNING counter failed
    OTHER_BELOW_CAP = "other_below_cap"  # a flexing claim's tenant in others_at_cap is below its cap now


class CreateOutcome(StrEnum):
    CREATED = "created"
    KEY_USED = "key_used"  # the Idempotency-Key was taken (by an earlier or a concurrent create)
    CONFLICT = "conflict"  # a concurrent transaction on one of its items (DynamoDB): nothing written, again


@dataclass(frozen=True)
class ManyCreated:
    """How a create_many ended: CREATED (every job written), or nothing written: KEY_USED (`keys_used`: the
    positions, in the writes given, of those whose Idempotency-Key is taken) or CONFLICT (a concurrent
    transaction on one of its items: again as it is)."""

    outcome: CreateOutcome
    keys_used: frozenset[int] = frozenset()


def judge(failed: Collection[Role], *, conflict: bool, refused: str) -> CommitOutcome:
    """What a refused transition write means, the same for every recorder: a conflict or a moved job row
    are lost races; else the Admission or the flex checks refused; anything else cannot happen
    (`refused` describes it)."""
    if conflict:
        return CommitOutcome.CONFLICT
    if Role.JOB in failed:
        return CommitOutcome.JOB_MOVED
    if Role.RUNNING in failed:
        return CommitOutcome.CAP_REACHED
    if Role.STILL_AT_CAP in failed:
        return CommitOutcome.OTHER_BELOW_CAP
    raise StoreInvariantViolation(refused)


@dataclass(frozen=True)
class RenewalAnswer:
    """The answer to a lease renewal (JobStore.renew_lease)."""

    held: bool  # False: fenced, the worker must stop and must not commit
    cancel_requested: bool
    lease_expires_at: EpochMs | None


class JobRow(NamedTuple):
    job: Job
    ready_shards: int  # the ready shards its tenant had when it was created (its ready queue)
    running_shard: int = 0  # the RUNNING counter its running attempt is charged to


class IdempotencyRecord(NamedTuple):
    job_id: str
    digest: str  # of the request that created the job


# --- the protocol -------------------------------------------------------------------------------------------


class JobRecorder(ABC):
    """Storage for JobStore. Reads are strongly consistent; index queries (`due_jobs`, `expired_leases`)
    may lag behind the rows (DynamoDB's indexes do), so the store always re-reads a row before deciding.
    Implementations are thread-safe."""

    # reads

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job row, None when there is none."""

    @abstractmethod
    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        """The job row if it is `tenant_id`'s: None for another tenant's job exactly as for a missing one, by
        the same read (the tenant is a condition of the read itself: no row of another tenant comes back)."""

    @abstractmethod
    def run(self, job_id: str, attempt: int) -> Run | None:
        """One attempt's run record."""

    @abstractmethod
    def runs(self, job_id: str) -> list[Run]:
        """The job's run records in attempt order."""

    @abstractmethod
    def result(self, job_id: str) -> Any:
        """The job's result, None when it has none."""

    @abstractmethod
    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order."""

    @abstractmethod
    def all_jobs(self) -> Iterator[Job]:
        """Every job row (a scan)."""

    @abstractmethod
    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        """What an Idempotency-Key of the tenant was used for."""

    # writes

    @abstractmethod
    def create(self, write: NewJobWrite) -> CreateOutcome:
        """Write a new job atomically; KEY_USED (nothing written) when its Idempotency-Key is taken."""

    @abstractmethod
    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        """Write new jobs atomically, all or none, in ONE transaction (`transaction_cuts` says how many fit;
        StoreInvariantViolation beyond: check_one_transaction): their jobs' counts summed per queue entry.
        KEY_USED (nothing written) names every write whose Idempotency-Key is taken."""

    @abstractmethod
    def commit(self, write: TransitionWrite) -> CommitOutcome:
        """Write one transition atomically, or nothing when any of its conditions fails (then `judge` says
        what the failure means)."""

    @abstractmethod
    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs) -> RenewalAnswer:
        """Set the lease's expiry, only while the job is running under this attempt and owner."""

    @abstractmethod
    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        """Record a zombie's late report on its run record (outcome `fenced`, the outcome it had kept as
        `reclaimed_as`), only if the run is the worker's and still open or closed as lease_expired. False
        when it was not marked. `expires_at` is its TTL if it has none yet (a run the reaper closed keeps
        the one stamped then, so it never outlives its ended job's row). With `overlap`, the same update
        marks the overlaps the report reveals (as mark_overlap)."""

    @abstractmethod
    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        """Record on a zombie's run record that a renewal of its lease was refused at `at` (`lease_lost_at`:
        its worker was still working then), only if the run is the worker's, was closed by the reaper
        (lease_expired, or fenced since) and has no such mark yet. False when it was not marked. With
        `overlap`, the same update marks the overlaps it reveals (as mark_overlap)."""

    @abstractmethod
    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        """Add `overlap.attempts` to a run's `overlapped_with` and put the run in the `overlaps` index (keyed
        by `overlap.began_at` unless it is there already), whatever its outcome. False: no such run."""

    # indexes

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
    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        """The head of the `active` index: up to `limit_per_shard` entries of each of its ACTIVE_SHARDS
        partitions, lowest key first, merged in key order (may lag behind the entries)."""

    # tenants

    @abstractmethod
    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        """Registered tenants' settings: those of `tenant_ids` that are registered, or every one (None)."""

    @abstractmethod
    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None]) -> dict[str, TenantState]:
        """Each wanted tenant's counters, read together (one batch): all its RUNNING counters and the queue
        entries of the ready shards named (None: all its ready shards)."""

    def tenant_states(self) -> dict[str, TenantState]:
        """Every registered tenant's settings and counters (an operator's read: it grows with the tenants)."""
        return self.tenant_counters(dict.fromkeys(self.tenants().values()))

    @abstractmethod
    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        """Write a tenant's settings (`only_if_new`: unless it is registered). False when it was not
        written."""

    @abstractmethod
    def lift(self, tenant_id: str, offset_ms: int) -> bool:
        """Raise the tenant's lift offset (on RUNNING counter 0) to `offset_ms`, never lowering it: False
        when it was already there or higher."""

    @abstractmethod
    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        """Raise the key of a queue entry in the `active` index to `active_vt` (a lower bound of its
        tenant's virtual time), only while it is in the index and below that: False otherwise."""

    @abstractmethod
    def deactivate(self, tenant_id: str, shard: int) -> bool:
        """Take a queue entry out of the `active` index, only if it holds no waiting job: False otherwise
        (any job entering it puts it back)."""

    @abstractmethod
    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        """Move a queue entry whose waiting jobs are not due before `until` from the `active` index to the
        `parked` one, only if no job entered it since it was read (`entered`): False otherwise."""

    @abstractmethod
    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        """(tenant, ready shard) of parked queue entries due by `now`, from each `parked` partition."""

    @abstractmethod
    def wake(self, tenant_id: str, shard: int) -> bool:
        """Put a parked queue entry back in the `active` index (False: it was not parked)."""

    # the system virtual clock

    @abstractmethod
    def clock(self) -> float:
        """The system virtual clock: the highest of its CLOCK_SHARDS items (0 before any claim)."""

    @abstractmethod
    def advance_clock(self, shard: int, value: float) -> bool:
        """Raise one clock item to `value`, never lowering it: False when it was already there or higher."""

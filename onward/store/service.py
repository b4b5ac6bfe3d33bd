"""JobStore: the authoritative job state, as a service over a recorder (onward.store.ports).

Every transition is ONE atomic conditional write: the job row (conditional on the state, attempt and version
it was decided from), the attempt's run record, the result where there is one, the tenant's dispatch
counters, and one outbox event (one per version, so a version can never be published twice). What a
transition does is decided by onward.domain.lifecycle from the current row; when the write loses a race, the store
re-reads and asks again, so the caller always gets an answer that matches the committed state. Two writes
skip the read, as their conditions make it needless: a create with an Idempotency-Key (its transaction's
condition that the key is unused; the key is read only when it is in use) and a worker's report (decided
from the row its claim wrote, the write conditional on that row's version; re-read only when refused). Which tenant
a claim serves is decided by onward.domain.dispatch. The recorder only stores: on DynamoDB
(onward.store.dynamo.recorder, each write one TransactWriteItems) or in memory (onward.store.memory.recorder, for tests
and simulations; `JobStore.in_memory()`).

Tenants and fair dispatch: which job a claim takes is onward.store.claims' (the head of the `active` index, in
onward.domain.dispatch's fair order); tenants' settings and the system virtual clock are onward.store.tenants'. The
store writes the dispatch counters in each transition's own transaction (items in onward.store.dynamo.keys, all under
the tenant's own partition keys, so no key is written by every tenant's jobs):
- a RUNNING counter (dispatch.Usage) of the tenant takes each attempt that starts, under the claim's
  `Admission` (`running < cap` of that shard: the cap is split exactly over the tenant's running shards,
  so it holds under any concurrency), and every transition that ends the attempt (complete, fail, reap,
  release, cancel acknowledgement) takes it off the same shard (the job row names it while it runs) and
  adds its run time. A shard takes about 250 jobs/s started and ended (4 write units per job); a tenant
  has one per ready shard (up to its cap).
- a queue entry per ready shard counts the waiting jobs (queued + retry_wait) per priority band, changed in
  the same transaction as the job (create, claim, retry, release, reap, cancel, exhaust, replay); a job
  entering it puts it in the `active` index, a claim re-keys it.

A batch of creates (`create_batch`, onward.store.creation) writes its jobs in as few transactions as
DynamoDB's limits allow (for a tenant with one ready shard, 33 jobs with an Idempotency-Key or 49 without per
transaction; their counts summed per queue entry), each entry answered as `create` alone would answer it.

Overlaps (onward.domain.overlaps): when a zombie shows it kept working after the reaper closed its attempt (its late
report, fenced; a renewal of its lease refused), the store reads the job's runs and marks every attempt whose
running interval overlapped the zombie's, on both run records (`overlapped_with`, and the `overlaps` index
that `onward overlaps` reads), and counts them (StoreStats.overlaps_found): onward.store.zombie_marks.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from onward.domain import lifecycle
from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import Clock, EpochMs, system_clock
from onward.domain.errors import (
    NotReplayable,
    OnwardError,
    RowNotAdopted,
    StoreContention,
)
from onward.domain.lifecycle import Change, Decision, Refusal, RefusalReason, StaleReport
from onward.domain.models import ErrorSummary, Job, Lease, NewJob
from onward.domain.retention import RetentionPolicy
from onward.domain.states import JobState, RunOutcome, is_terminal
from onward.faults import fault_point
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS, DEFAULT_OUTBOX_RETENTION_DAYS, Settings
from onward.store.answers import CancelOutcome, CancelStatus, Created, Report, ReportStatus
from onward.store.claim_take import AdmissionRefused, FlexRefused, LiftMet, NotTaken
from onward.store.claims import Claimer
from onward.store.commit_inputs import claimed_at_of, rate_take_of
from onward.store.concurrency_keys import ConcurrencySlots, JobHeld
from onward.store.concurrency_overflow import apply_overflow
from onward.store.creation import MAX_PARAMS_BYTES, JobCreation
from onward.store.dynamo.recorder import DynamoRecorder
from onward.store.held_jobs import Holding, held_jobs_of
from onward.store.held_rows import HELD_ROWS_MAX, HeldRows
from onward.store.job_reads import JobReads
from onward.store.job_types import JobTypes, recorder_of
from onward.store.memory.recorder import MemoryRecorder
from onward.store.pauses import FlowControl, flow_book_of, paused_refusal
from onward.store.ports.concurrency_keys import SlotReturn
from onward.store.ports.index_shards import LEASE_SHARDS
from onward.store.ports.outcomes import CommitOutcome, RenewalAnswer
from onward.store.ports.recorder import JobRecorder
from onward.store.ports.region_epochs import WriterEpoch
from onward.store.ports.rows import DueJob, JobRow
from onward.store.ports.tenant_values import Tenant, TenantState
from onward.store.ports.write_plans import Admission, TransitionWrite, ends_attempt
from onward.store.progress import ProgressAnswer, record_progress
from onward.store.rate_limits import JobDeferred, RateLimits
from onward.store.region_fence import RegionFence, of_epoch
from onward.store.result_limits import MAX_RESULT_BYTES, check_result
from onward.store.stats import StoreStats
from onward.store.tenants import TenantRegistry
from onward.store.unique_keys import UniqueKeys
from onward.store.zombie_marks import ZombieMarks

__all__ = [
    "MAX_PARAMS_BYTES", "MAX_RESULT_BYTES", "CancelOutcome", "CancelStatus", "Created", "JobStore",
    "RenewalAnswer", "Report", "ReportStatus", "StoreStats", "Tenant", "TenantState",
]

MAX_ROUNDS = 25  # re-read-and-decide rounds before a transition gives up with StoreContention

_DEFAULT_BACKOFF = BackoffPolicy()

# The races a commit can lose, by the cause StoreStats counts them under (DynamoDB's reason codes).
_LOST_RACES = {CommitOutcome.CONFLICT: "TransactionConflict",
               CommitOutcome.JOB_MOVED: "ConditionalCheckFailed",
               CommitOutcome.RATE_MOVED: "RateBucketMoved", CommitOutcome.KEY_MOVED: "ConcurrencyKeyMoved"}


def _new_job_id() -> str:
    return uuid.uuid4().hex


class JobStore(JobReads, RegionFence):
    """The job state machine over a JobRecorder (DynamoDB unless given another). Thread-safe: share one per
    process."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        clock: Clock = system_clock,
        backoff: BackoffPolicy = _DEFAULT_BACKOFF,
        rng: random.Random | None = None,
        outbox_retention_days: int | None = None,  # default: the deployment's (settings.outbox_retention_days)
        job_retention_days: int | None = None,  # default: the deployment's (settings.job_retention_days)
        retention_policy: RetentionPolicy | None = None,  # default: the deployment's, else job_retention_days
        recorder: JobRecorder | None = None,  # default: DynamoDB, the deployment's tables through `client`
        region_epoch: int = 0,  # the epoch it writes under (issue 39: onward.store.region_fence)
        new_job_id: Callable[[], str] = _new_job_id,  # a test's deterministic ids (hypothesis replays examples)
    ) -> None:
        if recorder is None:
            if settings is None:
                raise TypeError("a JobStore needs the deployment's settings (DynamoDB) or a recorder")
            recorder = DynamoRecorder(client or settings.client("dynamodb"), settings.require("jobs_table"),
                                      settings.require("outbox_table"), settings.active_shards)
        if outbox_retention_days is None:
            outbox_retention_days = (DEFAULT_OUTBOX_RETENTION_DAYS if settings is None
                                     else settings.outbox_retention_days)
        if job_retention_days is None:
            job_retention_days = DEFAULT_JOB_RETENTION_DAYS if settings is None else settings.job_retention_days
        self._recorder, self._writer_epoch = recorder, WriterEpoch(region_epoch)
        self._clock = clock
        self._backoff = backoff
        self._rng = rng or random.Random()
        self._retention_s = outbox_retention_days * DAY_S
        # the TTL of a job's items once done (onward.store.dynamo.keys)
        self._job_retention_s = job_retention_days * DAY_S
        # a finished job's items are kept as the policy says for its tenant, type and outcome (write_retention_s);
        # the Idempotency-Key's window and zombie marks keep the job retention
        if retention_policy is None:
            retention_policy = (settings.retention_policy if settings is not None and job_retention_days ==
                                settings.job_retention_days else RetentionPolicy.uniform(self._job_retention_s))
        self._policy = retention_policy
        self._registry = TenantRegistry(recorder, recorder, clock, self._rng)
        self._holding = Holding(held_jobs_of(recorder), self._registry.virtual_clock, clock)  # issue 37: pause
        self._flow = FlowControl(flow_book_of(recorder), self._registry, recorder, clock, self._holding)
        self.concurrency = ConcurrencySlots(recorder, held_jobs_of(recorder), recorder.job,  # concurrency keys
                                            self._registry.virtual_clock)
        self._claimer = Claimer(recorder, recorder, recorder, self._registry, clock, self._rng, self._take,
                                self._flow.switches)
        self._held = HeldRows(HELD_ROWS_MAX)
        self.stats = StoreStats()
        self._creation = JobCreation(recorder, self._registry, clock, self._rng, get_job=self.get,
                                     new_job_id=new_job_id, retention_s=self._retention_s,
                                     job_retention_s=self._job_retention_s,
                                     unique_keys=UniqueKeys(recorder, recorder, clock, self._transition))
        self._zombies = ZombieMarks(recorder, self.stats, self._job_retention_s)
        self.rate_limits = RateLimits(recorder, clock)  # rate limits (issue 37): onward.store.rate_limits
        self.type_catalog = JobTypes(recorder_of(recorder), clock)  # retry policies per type (issue 37)
        self._creation.type_defaults = self.type_catalog.with_type_defaults
        self._creation.writer_epoch = self._writer_epoch  # (the region fence, issue 39)

    @classmethod
    def in_memory(
        cls,
        *,
        clock: Clock = system_clock,
        backoff: BackoffPolicy = _DEFAULT_BACKOFF,
        rng: random.Random | None = None,
        recorder: MemoryRecorder | None = None,  # another store's, to share its state
        retention_policy: RetentionPolicy | None = None,
        region_epoch: int = 0,  # the epoch it writes under (issue 39)
        new_job_id: Callable[[], str] = _new_job_id,
    ) -> JobStore:
        """A store over a fresh in-memory recorder (onward.store.memory.recorder): no AWS, for tests and
        simulations."""
        return cls(recorder=recorder or MemoryRecorder(), clock=clock, backoff=backoff, rng=rng,
                   retention_policy=retention_policy, region_epoch=region_epoch,
                   new_job_id=new_job_id)

    @property
    def recorder(self) -> JobRecorder:
        return self._recorder

    # --- tenants ------------------------------------------------------------------------------------------

    @property
    def registry(self) -> TenantRegistry:
        return self._registry

    @property
    def flow(self) -> FlowControl:  # pauses and the drain switch (onward.store.pauses)
        return self._flow

    def register_tenant(self, tenant: Tenant) -> None:
        """Add or update a tenant's dispatch settings (weight, concurrency cap, ready-queue shards)."""
        self._registry.register(tenant)

    def tenants(self) -> list[Tenant]:
        """The registered tenants (read now)."""
        return self._registry.registered()

    def tenant_states(self) -> dict[str, TenantState]:
        """Every registered tenant's settings and dispatch counters (running, used worker time, waiting jobs):
        what operators and tests watch (it reads every tenant: not for hot paths)."""
        return self._registry.states()

    # --- create -------------------------------------------------------------------------------------------

    def create(self, tenant_id: str, request: NewJob, idempotency_key: str | None = None) -> Created:
        """Enqueue a job. With an Idempotency-Key, a retry of the same request returns the same job and
        writes nothing; the same key with a different request raises IdempotencyConflict."""
        apply_overflow(tenant_id, request, idempotency_key, self._recorder, held_jobs_of(self._recorder),
                       self.cancel)  # concurrency keys (issue 37): on_overflow, before the create
        created = self._creation.create(tenant_id, request, idempotency_key)
        self._claimer.jobs_entered()
        return created

    def create_batch(self, tenant_id: str, entries: list[tuple[NewJob, str | None]]
                     ) -> list[Created | OnwardError]:
        """Enqueue up to MAX_BATCH jobs of one tenant, each with its own optional Idempotency-Key: per entry,
        in order, what `create` alone would answer (its Created, or the OnwardError it would raise). One
        entry's refusal never refuses another's; the batch itself is refused (InvalidRequest, nothing
        written) only for what is wrong with all of it (onward.store.creation.JobCreation.create_batch)."""
        answers = self._creation.create_batch(tenant_id, entries)
        self._claimer.jobs_entered()
        return answers

    # --- the worker's side --------------------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float, *, polling: bool = False) -> Lease | None:
        """Lease the next due job, None when no job is due (`polling`: a worker's poll for work, which None
        may also answer when another claim of this process found nothing on its own reads a moment ago,
        claims.NOTHING_SHARE_MS: the idle workers of a process do not each read the whole head again).

        Which one is onward.store.claims' (fair order over the head of the active index, caps that flex,
        priority with aging, a rotation over ready shards); its transaction is this store's: the running
        slot is taken under an Admission on one of the tenant's RUNNING counters (so a cap holds however
        many workers claim at once), the attempt counter is incremented inside the claim, and a job whose
        attempts are used up is ended (dead / quarantined) on the way."""
        if self._flow.switches().draining:  # (issue 37: the drain switch) running attempts finish, none starts
            return None
        return self._claimer.claim(worker_id, int(lease_s * 1000), polling=polling)

    def _take(self, due: DueJob, worker_id: str, lease_ms: int, admission: Admission) -> Lease | NotTaken | None:
        """The claim's transaction on one job (onward.store.claim_take.Take), decided from the row the ready index
        showed when it has one (a stale one fails the commit's condition and the row is read). NotTaken.ENDED:
        the job had ended (cancelled meanwhile) or this claim ended it (its attempts used up)."""
        if self._flow.passed(due):
            return None  # paused (onward.store.pauses): the claim passes to the queue's next job
        try:
            decision, row = self._settle(
                due.job_id, lambda job: paused_refusal(self._flow.switches(), job)
                or lifecycle.claim(job, worker_id, lease_ms, self._clock()), admission=admission, known=due.row)
        except (JobDeferred, JobHeld, RowNotAdopted):  # rate limited (a token reserved), its concurrency key at its
            return None  # limit (held), or a row of an earlier region epoch, not yet adopted (issue 39)
        if isinstance(decision, Change) and decision.after.state is JobState.RUNNING:
            self._held.remember(decision.after, row.ready_shards, admission.running_shard)
            return Lease(job=decision.after, worker_id=worker_id, lease_expires_at=decision.after.lease_expires_at or 0)
        return NotTaken.ENDED if is_terminal((decision.after if isinstance(decision, Change) else decision.job).state) \
            else None

    def renew_lease(self, lease: Lease, lease_s: float) -> RenewalAnswer:
        """Renew the lease, only for the attempt and owner that hold it; say whether cancel was requested.
        A renewal refused after the reaper closed the attempt is a zombie's evidence that it still works: it
        is marked on its run record (`lease_lost_at`) with the overlaps it reveals (best effort: the refusal
        is answered whatever happens to that bookkeeping)."""
        now = self._clock()
        answer = self._recorder.renew_lease(lease.job_id, lease.attempt, lease.worker_id, now + int(lease_s * 1000),
                                            region_epoch=self._writer_epoch.value)
        if not answer.held:
            try:
                self._zombies.lease_lost(lease, now)
            except Exception:  # noqa: BLE001 - the refusal matters more; the late report checks again
                self.stats.overlap_check_failed()
        return answer

    def report_progress(self, lease: Lease, *, version: int, seq: int, fraction: float,
                        message: str | None) -> ProgressAnswer:
        """A running attempt's progress update, fenced by the attempt; the job row is not written
        (onward.store.progress)."""
        return record_progress(self._recorder, self._clock, lease, version=version, seq=seq, fraction=fraction,
                               message=message)

    def complete(self, lease: Lease, result: Any = None) -> Report:
        """The attempt succeeded with `result`. Raises InvalidRequest before writing anything when the result
        cannot be stored: UnstorableValue (not JSON, or not what DynamoDB holds), PayloadTooLarge
        (onward.store.result_limits)."""
        check_result(result)
        return self._report(lease, RunOutcome.SUCCEEDED, lambda job, now: lifecycle.complete(
            job, lease.attempt, lease.worker_id, result, now))

    def fail(self, lease: Lease, error: ErrorSummary, *, permanent: bool = False,
             backoff: BackoffPolicy | None = None) -> Report:
        # The backoff (the job type's retry policy's, else the store's) grows with the attempts charged to the
        # budget (after a replay or a release, fewer than the attempt number), as the claim counted them.
        delay_ms = int((backoff or self._backoff).delay(lease.job.attempts_used, self._rng) * 1000)
        return self._report(lease, RunOutcome.FAILED, lambda job, now: lifecycle.fail(
            job, lease.attempt, lease.worker_id, error, permanent=permanent, retry_delay_ms=delay_ms, now=now))

    def snooze(self, lease: Lease, seconds: float, *, max_snoozes: int, backoff: BackoffPolicy | None = None
               ) -> Report:
        """snooze (issue 37): lifecycle.snooze; `backoff` for a snooze past `max_snoozes` (a failed attempt)."""
        delay_ms = int((backoff or self._backoff).delay(lease.job.attempts_used, self._rng) * 1000)
        return self._report(lease, RunOutcome.SNOOZED, lambda job, now: lifecycle.snooze(
            job, lease.attempt, lease.worker_id, math.ceil(seconds * 1000), max_snoozes=max_snoozes,
            retry_delay_ms=delay_ms, now=now))

    def acknowledge_cancel(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.CANCELLED, lambda job, now: lifecycle.acknowledge_cancel(
            job, lease.attempt, lease.worker_id, now))

    def release(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.RELEASED, lambda job, now: lifecycle.release(
            job, lease.attempt, lease.worker_id, now))

    def _report(
        self, lease: Lease, reported: RunOutcome, decide: Callable[[Job, EpochMs], Decision]
    ) -> Report:
        """Commit a worker's report (`reported`: the run outcome it writes). When the attempt no longer holds
        the job, its run record tells a repeat of a report that committed (APPLIED again, nothing written)
        from a zombie's (FENCED, marked on its run record).

        The report is decided first from the row the attempt's claim wrote (`lease.job`, when this store
        made the claim and so knows the job's ready shards), with no read: its write is conditional on that
        row's state, version and attempt, as any transition's, so it commits only while the row is still
        the one the claim wrote. Only a lease renewal changes a job row without a new version, and it
        changes nothing a report decides from (the lease's expiry, which every report clears). Anything
        else since the claim (a cancel request, a reap, another claim) moved the version: the write is
        refused, nothing is written, and the row is read and the report decided again, as it always was."""
        # lease.job is the row the claim wrote: its updated_at is the claim's time (the run's claimed_at).
        known = self._held.take(lease.job)
        decision = self._transition(lease.job_id, lambda job: decide(job, self._clock()),
                                    claimed_at=lease.job.updated_at, known=known)
        if isinstance(decision, Change):
            return Report(ReportStatus.APPLIED, decision.after)
        # Every run of the job is read (one Query, as one GetItem for its own): a zombie's overlaps need them.
        runs = self._recorder.runs(lease.job_id)
        run = next((run for run in runs if run.attempt == lease.attempt), None)
        verdict = lifecycle.stale_report(run, lease.worker_id, reported)
        if verdict is StaleReport.REPEATED:
            return Report(ReportStatus.APPLIED, decision.job)
        if verdict is StaleReport.ZOMBIE:
            assert run is not None
            self._zombies.late_report(lease, runs, run, reported, self._clock())
        return Report(ReportStatus.FENCED, decision.job)

    # --- reaper, tenant and operator ----------------------------------------------------------------------

    def reap(self, now: EpochMs | None = None, limit: int = 100) -> list[Job]:
        """Running jobs whose lease lapsed before `now`: their attempt is closed as lease_expired and the
        job goes back to the queue (to quarantine at its limit; cancelled when its tenant asked to cancel
        it). Returns the jobs moved."""
        reaped_at = self._clock() if now is None else now
        moved: list[Job] = []
        for shard in range(LEASE_SHARDS):
            for job_id in self._recorder.expired_leases(shard, reaped_at, limit):
                fault_point("store.reap.before_transition", job_id)
                try:
                    decision = self._transition(job_id, lambda job: lifecycle.reap(job, reaped_at))
                except RowNotAdopted:  # (of an earlier region epoch: the fence reconciler adopts it, issue 39)
                    continue
                if isinstance(decision, Change):
                    moved.append(decision.after)
        return moved

    def cancel(self, job_id: str, tenant_id: str | None = None) -> CancelOutcome:
        """Queued / retry_wait -> cancelled now; running -> cancel requested; finished -> already ended."""
        self.get(job_id, tenant_id)
        decision = self._transition(job_id, lambda job: lifecycle.cancel(job, self._clock()))
        if isinstance(decision, Refusal):
            status = (CancelStatus.ALREADY_REQUESTED if decision.reason is RefusalReason.ALREADY_REQUESTED
                      else CancelStatus.ALREADY_ENDED)
            return CancelOutcome(status, decision.job)
        status = CancelStatus.CANCELLED if decision.after.state is JobState.CANCELLED else CancelStatus.REQUESTED
        return CancelOutcome(status, decision.after)

    def replay(self, job_id: str) -> Job:
        """Operator: a dead or quarantined job is queued again as a new version with a fresh attempt budget."""
        decision = self._transition(job_id, lambda job: lifecycle.replay(job, self._clock()))
        if isinstance(decision, Refusal):
            raise NotReplayable(f"job {job_id} is {decision.job.state.value}; only dead or quarantined jobs replay")
        return decision.after

    # --- the one way a job changes ------------------------------------------------------------------------

    def _transition(self, job_id: str, decide: Callable[[Job], Decision], *, claimed_at: EpochMs | None = None,
                    known: JobRow | None = None) -> Decision:
        """Read, decide, commit; again while the commit loses a race (see _settle)."""
        return self._settle(job_id, decide, claimed_at=claimed_at, known=known)[0]

    def _settle(
        self,
        job_id: str,
        decide: Callable[[Job], Decision],
        *,
        admission: Admission | None = None,
        claimed_at: EpochMs | None = None,
        known: JobRow | None = None,
    ) -> tuple[Decision, JobRow]:
        """Read, decide, commit; again while the commit loses a race. The decision, and the job row it was
        decided from. `admission`: how a claim takes its running slot (_AdmissionRefused when
        the tenant's counter refuses it). `claimed_at`: when the attempt that this transition may end was
        claimed, if the caller knows (else it is read from the run record).

        `known`: a copy of the row the caller holds (a worker's: the row its claim wrote), decided from
        instead of reading the row. Its commit names the copy's state, version and attempt like any other,
        so it commits only if the row is still at that version. The answer is always a committed change or a
        refusal of the row as read: a refusal decided from the copy, or a commit refused because the row
        moved, drops the copy and the row is read and decided again. (A TransactionConflict says nothing
        about the row: the copy is tried again.)"""
        for round_ in range(MAX_ROUNDS):
            row = known if known is not None else of_epoch(self._read(job_id), self._writer_epoch.value)
            if row.held_by is not None:  # held aside (onward.store.held_jobs): a claim passes it, all else puts it back
                if admission is not None:
                    return Refusal(RefusalReason.NOT_CLAIMABLE, row.job), row
                row = self._holding.put_back(row)
            decision = decide(row.job)
            if isinstance(decision, Refusal):
                if known is None:
                    return decision, row
                known = None  # only the row as read can refuse
                continue
            outcome = self._commit(decision, row, admission=admission, claimed_at=claimed_at)
            if outcome is CommitOutcome.COMMITTED:
                return decision, row
            if outcome is CommitOutcome.KEY_AT_LIMIT and self.concurrency.hold(row):
                raise JobHeld(job_id)  # (concurrency keys, issue 37: not held: a slot came free, decide again)
            if outcome is CommitOutcome.JOB_MOVED and known is not None:
                known = None  # the copy is stale: read the row now (no wait: nothing contended)
                continue
            time.sleep(self._rng.uniform(0, 0.002 * 2 ** min(round_, 6)))
        raise StoreContention(f"job {job_id}: gave up after {MAX_ROUNDS} lost races")

    def _commit(
        self,
        change: Change,
        row: JobRow,
        *,
        admission: Admission | None = None,
        claimed_at: EpochMs | None = None,
    ) -> CommitOutcome:
        """One atomic write: COMMITTED, or the race it lost (JOB_MOVED: the job row moved since it was read;
        CONFLICT: a concurrent transaction met it), nothing written, and the caller re-decides."""
        assert change.before is not None
        if ends_attempt(change) and claimed_at is None:
            assert change.close_run is not None
            claimed_at = claimed_at_of(self._recorder, row, change.close_run.attempt)
        after = change.after
        write = TransitionWrite.of(change, ready_shards=row.ready_shards, retention_s=self._retention_s,
                                   job_retention_s=self._policy.for_job(after.tenant_id, after.type, after.state),
                                   admission=admission,
                                   claimed_at=claimed_at, running_shard=row.running_shard,
                                   clock=self._registry.virtual_clock(), rate=rate_take_of(self.rate_limits, change),
                                   concurrency=self.concurrency.for_commit(change),
                                   region_epoch=self._writer_epoch.value, opened=row.opened)
        fault_point("store.before_commit", write.subject)
        outcome = self._recorder.commit(write)
        if outcome is CommitOutcome.COMMITTED:
            self._claimer.committed(write.running, write.waiting)  # counted into the claims' shared counters
            if isinstance(write.concurrency, SlotReturn) and write.concurrency.release is not None:
                self._claimer.jobs_entered()  # (a held job put back in its queue)
            fault_point("store.after_commit", write.subject)  # committed; the caller never hears of it
            return outcome
        if outcome in _LOST_RACES:
            self.stats.lost_race(_LOST_RACES[outcome])
            return outcome
        if outcome is CommitOutcome.KEY_AT_LIMIT:  # (concurrency keys: the claim holds the job aside)
            return outcome
        if outcome is CommitOutcome.CAP_REACHED:
            raise AdmissionRefused()
        if outcome is CommitOutcome.LIFTED and write.running is not None and write.running.lift_vt is not None:
            self.stats.lost_race("LiftMet")  # another claim served the returning tenant meanwhile
            raise LiftMet(write.running.tenant_id, write.running.lift_vt)
        raise FlexRefused()

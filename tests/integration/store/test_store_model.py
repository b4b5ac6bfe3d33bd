"""A model-based test of JobStore: hypothesis drives the real store with random sequences of every
operation, and after every step compares what its recorder holds with a small model written here from the
design, independently of onward.domain.lifecycle. It runs on both recorders (onward.store.ports): on DynamoDB (the
embedded endpoint, the session's shared stack emptied for each run; marked `integration`) at the sizes of
MODEL_SETTINGS, and in memory at ten times as many steps (MEMORY_MODEL_SETTINGS), in seconds.

Operations: create (three tenants, max_attempts 1..3, with and without an Idempotency-Key, the same key
repeated with the same request or a different one), claim (two workers; every Lease is kept, so old
ones come back later as zombies), heartbeat, complete, fail (permanent or not), acknowledge_cancel,
release, snooze (issue 37: up to MAX_SNOOZES, then a failed attempt), reap (after moving the clock past a
lease), advancing time (retry_wait becomes due), cancel
(also as the wrong tenant), operator replay, a late report with a superseded Lease, and a *race*: one
operation is stopped just before its commit while a second JobStore (on the same recorder's storage)
commits another operation on the same job, then the first one goes on (it must notice, re-read and decide
again).

After every step, for every job: the row equals the model (state, version, attempt, attempt_floor,
cancel_requested, lease, not_before, last_outcome); the outbox holds exactly versions 1..version, each
event equal to the model's history, the last one showing the row's state; there is one run record per
attempt (1..attempt) with the outcome the model expects (fenced late reports included); the attempts
used since the last replay never exceed max_attempts; a terminal state is never left except by replay
(dead / quarantined -> queued); the TTL `expires_at` is on the row (and the result) exactly while the job is
in a terminal state, at its end + the job retention, and on a run record exactly once its attempt ended.

What breaks without which code (each of these fails this test):
- the job row's expected state / version condition (onward.store.dynamo.plan_items.JobRowUpdate: the condition
  expression of writes.TransitionWrites.job_update, MemoryRecorder's check): in a race both writers commit
  from the same row, both try to publish vN+1 and the outbox condition refuses the second
  (StoreInvariantViolation), or, without that outbox condition too, the event list has a duplicate and the
  job row ends in the loser's state (the model check fails).
- the re-read-and-decide loop in JobStore._transition: the loser of a race would report a refusal or
  FENCED for an operation that should have applied (e.g. complete racing a cancel request).
- `#attempt = :expected_attempt` and lifecycle._holds checking the attempt: a zombie's complete/fail
  with a superseded Lease would be APPLIED instead of FENCED and would move a job it no longer owns.
- the attempt/owner condition of the recorder's renew_lease: a zombie's heartbeat would extend the new
  owner's lease (lease_expires_at differs from the model) and hide a dead worker from the reaper.
- the `lease_expires_at <= now` condition on a reap: a reap racing a heartbeat would take the job away
  from a worker that just renewed its lease.
- the attempts_exhausted check in the claim (and in fail / reap): attempts used would exceed
  max_attempts, or an exhausted job would be retried instead of going dead / quarantined.
- the outbox event or the run record inside the same write: versions or runs go missing.
- attempt_floor in replay: a replayed job would be ended by the next claim instead of running again;
  resetting the attempt instead would collide with the old run records.
- the recorder's mark_fenced: the zombie's run record would not show the late report.
- the cancel request in lifecycle.fail / lifecycle.reap: a job whose tenant asked to cancel it would go to
  retry_wait / queued (and run again) instead of cancelled.
- lifecycle.stale_report: a report repeated by the attempt that made it (a retry after a lost answer) would be
  answered FENCED, and a late report contradicting the attempt's own outcome would rewrite it as fenced.
- attempt_floor in release: a released attempt would be charged, and the next claim could end the job.
- lifecycle.snooze: a snoozed attempt would be charged (attempt_floor), due at once (not_before), or
  unbounded (past MAX_SNOOZES it must be a failed attempt); its repeat would be answered FENCED.
- attempts_used in JobStore.fail: the retry delay after a replay or a release would count every attempt.
- keys.job_expires_at and the row diff of recorder._job_row_update: a live job's row would expire (and be
  lost), or a replayed one would keep the TTL of its first end.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

import onward.store.service
from onward.domain.errors import IdempotencyConflict, JobNotFound, NotReplayable
from onward.domain.models import ErrorSummary, Job, Lease, NewJob, OutboxEvent, Run
from onward.domain.overlaps import overlaps
from onward.settings import DEFAULT_JOB_RETENTION_DAYS, Settings
from onward.store.dynamo.keys import run_from_values
from onward.store.ports import CommitOutcome, CreateOutcome, JobRecorder, NewJobWrite, TransitionWrite
from onward.store.service import CancelStatus, JobStore, ReportStatus
from onward_infra.shared_stack import SharedStack
from tests.contract.backends import DynamoBackend, MemoryBackend, StoreBackend
from tests.support import ManualClock

TENANTS = ("acme", "globex", "initech")
WORKERS = ("w1", "w2")  # two, so a worker often gets a job back that it held before
KEYS = ("key-a", "key-b")
TYPES = ("report.build", "mail.send")
# The claim reads at most 8 due jobs per tenant queue; with at most 8 jobs in all, every due job is seen,
# so "claim returned None" means "no due job that still has attempts".
MAX_JOBS = 8

# Written from the design, not imported from onward.domain.states.
TERMINAL = frozenset({"succeeded", "dead", "cancelled", "quarantined"})
JOB_RETENTION_S = DEFAULT_JOB_RETENTION_DAYS * 86_400  # both backends' stores keep the default
REPLAYABLE = frozenset({"dead", "quarantined"})
CLAIMABLE = frozenset({"queued", "retry_wait"})

# Retry backoff the store is built with (BackoffPolicy defaults): after failed attempt n the delay is in
# [ceiling/2, ceiling] with ceiling = min(300 s, 1 s * 2^(n-1)).
BACKOFF_BASE_MS = 1000
BACKOFF_CAP_MS = 300_000


class SeededJobIds:
    """Stands in for the `uuid` module inside onward.store.service during this test: job ids from a generator
    seeded at the start of every run. Where due times tie, the claim meets jobs in id order, so with random
    ids the same steps could claim a different job when hypothesis replays or shrinks them."""

    rng = random.Random(0)

    @classmethod
    def uuid4(cls) -> uuid.UUID:
        return uuid.UUID(int=cls.rng.getrandbits(128), version=4)


@dataclass
class RunModel:
    worker: str
    outcome: str | None = None
    reclaimed_as: str | None = None
    late_report: str | None = None

    def view(self) -> tuple[Any, ...]:
        return (self.worker, self.outcome, self.reclaimed_as, self.late_report)


@dataclass
class JobModel:
    job_id: str
    tenant: str
    body: tuple[str, int, int]  # (type, params["n"], max_attempts)
    not_before: int
    state: str = "queued"
    version: int = 1
    attempt: int = 0
    attempt_floor: int = 0
    snoozes: int = 0
    cancel_requested: bool = False
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    last_outcome: str | None = None
    result: Any = None
    history: list[tuple[int, str, int, bool]] = field(default_factory=list)
    runs: dict[int, RunModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.history.append((1, "queued", 0, False))

    @property
    def max_attempts(self) -> int:
        return self.body[2]

    @property
    def exhausted(self) -> bool:
        return self.attempt - self.attempt_floor >= self.max_attempts

    def due(self, now: int) -> bool:
        return self.state in CLAIMABLE and self.not_before <= now

    def holds(self, lease: Lease) -> bool:
        return self.state == "running" and self.attempt == lease.attempt and self.lease_owner == lease.worker_id

    def move(self, *, replay: bool = False, **changes: Any) -> None:
        """One committed transition: new version, one more event in the history."""
        target = changes.get("state", self.state)
        assert replay or self.state not in TERMINAL, f"model bug: leaving {self.state}"
        for name, value in changes.items():
            setattr(self, name, value)
        self.version += 1
        self.state = target
        self.history.append((self.version, self.state, self.attempt, self.cancel_requested))

    def end_lease(self, outcome: str, **changes: Any) -> None:
        self.runs[self.attempt].outcome = outcome
        self.move(lease_owner=None, lease_expires_at=None, last_outcome=outcome, **changes)

    def view(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant, "type": self.body[0], "params": {"n": self.body[1]},
            "max_attempts": self.max_attempts, "state": self.state, "version": self.version,
            "attempt": self.attempt, "attempt_floor": self.attempt_floor,
            "cancel_requested": self.cancel_requested, "lease_owner": self.lease_owner,
            "lease_expires_at": self.lease_expires_at, "not_before": self.not_before,
            "last_outcome": self.last_outcome, "snoozes": self.snoozes,
        }


def row_view(job: Job) -> dict[str, Any]:
    return {
        "tenant_id": job.tenant_id, "type": job.type, "params": job.params, "max_attempts": job.max_attempts,
        "state": job.state.value, "version": job.version, "attempt": job.attempt,
        "attempt_floor": job.attempt_floor, "cancel_requested": job.cancel_requested,
        "lease_owner": job.lease_owner, "lease_expires_at": job.lease_expires_at,
        "not_before": job.not_before, "last_outcome": None if job.last_outcome is None else job.last_outcome.value,
        "snoozes": job.snoozes,
    }


def _describe(outcome: Any) -> str:
    if isinstance(outcome, list):
        return f"{len(outcome)} reaped" + "".join(sorted({f", {job.state.value}" for job in outcome}))
    status = getattr(outcome, "status", None)
    if status is None:
        return "held" if outcome.held else "not held"
    return f"{status.value} -> {outcome.job.state.value}"


def result_for(lease: Lease) -> dict[str, Any]:
    return {"attempt": lease.attempt, "worker": lease.worker_id}


# What each report writes on its run record (a release while cancel was requested acknowledges the cancel).
REPORT_WRITES = {"complete": {"succeeded"}, "fail": {"failed"}, "release": {"released", "cancelled"},
                 "acknowledge_cancel": {"cancelled"}, "snooze": {"snoozed", "failed", "cancelled"}}
LATE_REPORT = {"complete": "succeeded", "fail": "failed", "release": "released",
               "acknowledge_cancel": "cancelled", "snooze": "snoozed"}
MAX_SNOOZES = 2  # snooze (issue 37): each job's bound here


class Interleaving:
    """A recorder that runs a pending callback just before the next write it forwards: the caller has read
    the row and decided, and another writer commits in between."""

    def __init__(self, recorder: JobRecorder) -> None:
        self._recorder = recorder
        self.pending: Any = None

    def _interlope(self) -> None:
        if self.pending is not None:
            interloper, self.pending = self.pending, None
            interloper()

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        self._interlope()
        return self._recorder.commit(write)

    def create(self, write: NewJobWrite) -> CreateOutcome:
        self._interlope()
        return self._recorder.create(write)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)


# An operation that can take part in a race: (kind, lease or job id, extra).
Op = tuple[str, Any, Any]


class StoreModel(RuleBasedStateMachine):
    """Subclassed per backend: `backend` makes a fresh, empty one for each run."""

    backend: Any = None  # (ManualClock) -> StoreBackend

    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        SeededJobIds.rng.seed(0)
        self.clock = ManualClock()
        self.storage: StoreBackend = type(self).backend(self.clock)
        self.recorder = Interleaving(self.storage.recorder)
        self.store = self.storage.store(recorder=self.recorder, rng=random.Random(1))
        # The other writer in a race: its own JobStore on the same storage and clock.
        self.rival = self.storage.store(rng=random.Random(2))
        self.model: dict[str, JobModel] = {}
        self.idempotency: dict[tuple[str, str], tuple[tuple[str, int, int], str]] = {}
        self.all_leases: list[Lease] = []
        self.seen_states: dict[str, str] = {}
        self.replayed: set[str] = set()
        self.fingerprints: dict[str, Any] = {}

    @property
    def now(self) -> int:
        return self.clock.now

    def assert_job(self, job: Job) -> None:
        assert row_view(job) == self.model[job.job_id].view()

    # --- create -------------------------------------------------------------------------------------------

    def _create(self, tenant: str, body: tuple[str, int, int], key: str | None) -> Any:
        request = NewJob(type=body[0], params={"n": body[1]}, max_attempts=body[2])
        earlier = self.idempotency.get((tenant, key)) if key is not None else None
        if earlier is not None and earlier[0] != body:
            with pytest.raises(IdempotencyConflict) as raised:
                self.store.create(tenant, request, idempotency_key=key)
            assert raised.value.job_id == earlier[1]
            event("create: IdempotencyConflict")
            return multiple()
        created = self.store.create(tenant, request, idempotency_key=key)
        if earlier is not None:
            assert not created.created and created.job.job_id == earlier[1]
            event("create: same key, same request")
            self.assert_job(created.job)
            return multiple()
        assert created.created
        job = JobModel(created.job.job_id, tenant, body, not_before=self.now)
        self.model[job.job_id] = job
        self.assert_job(created.job)
        if key is not None:
            self.idempotency[(tenant, key)] = (body, job.job_id)
        return job.job_id

    @initialize(target=jobs, requests=st.lists(
        st.tuples(st.sampled_from(TENANTS), st.sampled_from(TYPES), st.integers(0, 2), st.integers(1, 3),
                  st.none() | st.sampled_from(KEYS)), min_size=1, max_size=4))
    def first_jobs(self, requests: list[tuple[str, str, int, int, str | None]]) -> Any:
        """Every run starts with a few jobs (hypothesis may leave `create` out of a run)."""
        made = [self._create(tenant, (job_type, n, max_attempts), key)
                for tenant, job_type, n, max_attempts, key in requests]
        return multiple(*(job_id for job_id in made if isinstance(job_id, str)))

    @precondition(lambda self: len(self.model) < MAX_JOBS)
    @rule(target=jobs, tenant=st.sampled_from(TENANTS), job_type=st.sampled_from(TYPES),
          n=st.integers(0, 2), max_attempts=st.integers(1, 3), key=st.none() | st.sampled_from(KEYS))
    def create(self, tenant: str, job_type: str, n: int, max_attempts: int, key: str | None) -> Any:
        return self._create(tenant, (job_type, n, max_attempts), key)

    @precondition(lambda self: self.idempotency)
    @rule(data=st.data(), change=st.sampled_from(["same", "same", "params", "max_attempts", "type"]))
    def create_again(self, data: st.DataObject, change: str) -> None:
        """A client retrying with its Idempotency-Key: the same request, or (a bug) a different one."""
        tenant, key = data.draw(st.sampled_from(sorted(self.idempotency)), label="tenant, key")
        job_type, n, max_attempts = self.idempotency[(tenant, key)][0]
        if change == "params":
            n += 1
        elif change == "max_attempts":
            max_attempts = max_attempts % 3 + 1
        elif change == "type":
            job_type = next(t for t in TYPES if t != job_type)
        self._create(tenant, (job_type, n, max_attempts), key)

    # --- claim --------------------------------------------------------------------------------------------

    @rule(worker=st.sampled_from(WORKERS), lease_s=st.sampled_from([1, 5, 30]))
    def claim(self, worker: str, lease_s: int) -> None:
        self._claim(worker, lease_s)

    def _claim(self, worker: str, lease_s: int) -> Lease | None:
        now = self.now
        due = [job for job in self.model.values() if job.due(now)]
        lease = self.store.claim(worker, lease_s)
        # Due jobs with no attempts left may be ended by the claim on its way (in dispatch order, so which
        # ones depends on where it found a job): each is either untouched or ended the way the design says.
        ended = set()
        for job in (job for job in due if job.exhausted):
            row = self.store.get(job.job_id)
            if row.version != job.version:
                job.move(state="quarantined" if job.last_outcome == "lease_expired" else "dead")
                ended.add(job.job_id)
                event(f"claim: ended an exhausted job ({job.state})")
            self.assert_job(row)
        if lease is None:
            assert not [job.job_id for job in due if not job.exhausted], "claim returned None with due jobs"
            assert ended == {job.job_id for job in due if job.exhausted}, "claim left exhausted due jobs"
            return None
        job = self.model[lease.job_id]
        event(f"claim: took a {job.state} job" + (" after replay" if job.attempt_floor else ""))
        assert job.job_id in {d.job_id for d in due} and not job.exhausted, (
            f"claimed {job.state} job due at {job.not_before} (now {now})")
        assert lease.worker_id == worker and lease.attempt == job.attempt + 1
        assert lease.lease_expires_at == now + lease_s * 1000
        job.move(state="running", attempt=job.attempt + 1, lease_owner=worker,
                 lease_expires_at=now + lease_s * 1000, cancel_requested=False)
        job.runs[job.attempt] = RunModel(worker)
        self.assert_job(lease.job)
        self.all_leases.append(lease)
        return lease

    # --- operations that can race ------------------------------------------------------------------------

    def _perform(self, store: JobStore, op: Op) -> Any:
        kind, target, extra = op
        if kind == "complete":
            return store.complete(target, result_for(target))
        if kind == "fail":
            return store.fail(target, ErrorSummary.of("Boom", f"attempt {target.attempt}"), permanent=extra)
        if kind == "release":
            return store.release(target)
        if kind == "acknowledge_cancel":
            return store.acknowledge_cancel(target)
        if kind == "snooze":
            return store.snooze(target, extra, max_snoozes=MAX_SNOOZES)
        if kind == "heartbeat":
            return store.renew_lease(target, extra)
        if kind == "cancel":
            return store.cancel(target, self.model[target].tenant)
        if kind == "reap":
            return store.reap()
        raise AssertionError(kind)

    def _expect(self, op: Op, outcome: Any) -> None:
        """Apply `op` to the model and check the store's answer to it."""
        kind, target, extra = op
        event(f"{kind}: {_describe(outcome)}")
        now = self.now
        if kind == "cancel":
            job = self.model[target]
            if job.state in TERMINAL:
                assert outcome.status is CancelStatus.ALREADY_ENDED
            elif job.state == "running" and job.cancel_requested:
                assert outcome.status is CancelStatus.ALREADY_REQUESTED
            elif job.state == "running":
                assert outcome.status is CancelStatus.REQUESTED
                job.move(cancel_requested=True)
                # The answer is the row as the cancel decided it. A heartbeat that landed between its read
                # and its write (a heartbeat makes no new version) moved the lease on the row (checked by
                # the invariant) but not in this answer, which may show the expiry from before it.
                answered, expected = row_view(outcome.job), job.view()
                del answered["lease_expires_at"], expected["lease_expires_at"]
                assert answered == expected
                return
            else:
                assert outcome.status is CancelStatus.CANCELLED
                job.move(state="cancelled")
            self.assert_job(outcome.job)
            return
        if kind == "reap":
            expired = {job.job_id for job in self.model.values()
                       if job.state == "running" and job.lease_expires_at is not None and job.lease_expires_at < now}
            assert {moved.job_id for moved in outcome} == expired
            for job_id in expired:
                job = self.model[job_id]
                # A cancel request outlives the vanished worker: the job ends cancelled, never runs again.
                state = "cancelled" if job.cancel_requested else "quarantined" if job.exhausted else "queued"
                job.end_lease("lease_expired", state=state, not_before=now)
            for moved in outcome:
                self.assert_job(moved)
            return
        lease: Lease = target
        job = self.model[lease.job_id]
        if kind == "heartbeat":
            if job.holds(lease):
                assert outcome.held and outcome.cancel_requested == job.cancel_requested
                assert outcome.lease_expires_at == now + extra * 1000
                job.lease_expires_at = now + extra * 1000
            else:
                assert not outcome.held
            return
        if not job.holds(lease):
            run = job.runs[lease.attempt]
            if self._repeats(lease, kind):
                assert outcome.status is ReportStatus.APPLIED, f"repeated {kind}: {outcome.status}"
            else:
                assert outcome.status is ReportStatus.FENCED, f"{kind} by a superseded lease was applied"
                # Only a run someone else closed (the reaper) is marked; its own outcome is never overwritten.
                if run.worker == lease.worker_id and run.outcome in (None, "lease_expired"):
                    run.reclaimed_as, run.outcome, run.late_report = run.outcome, "fenced", LATE_REPORT[kind]
            self.assert_job(outcome.job)
            return
        assert outcome.status is ReportStatus.APPLIED, f"{kind} by the holder was {outcome.status}"
        if kind == "complete":
            job.end_lease("succeeded", state="succeeded")
            job.result = result_for(lease)
            assert self.store.result(job.job_id) == job.result
        elif kind == "fail":
            if job.cancel_requested:
                job.end_lease("failed", state="cancelled")
            elif extra or job.exhausted:
                job.end_lease("failed", state="dead")
            else:
                charged = job.attempt - job.attempt_floor  # replays and releases are not charged
                ceiling = min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (charged - 1))
                delay = outcome.job.not_before - now
                assert ceiling // 2 - 1 <= delay <= ceiling, f"retry delay {delay} ms, ceiling {ceiling} ms"
                job.end_lease("failed", state="retry_wait", not_before=outcome.job.not_before)
        elif kind == "release" and not job.cancel_requested:
            job.end_lease("released", state="queued", not_before=now, attempt_floor=job.attempt_floor + 1)
        elif kind == "snooze" and not job.cancel_requested and job.snoozes < MAX_SNOOZES:
            job.end_lease("snoozed", state="queued", not_before=now + int(extra * 1000),
                          attempt_floor=job.attempt_floor + 1, snoozes=job.snoozes + 1)
        elif kind == "snooze" and not job.cancel_requested:  # past its bound: a failed attempt
            state = "dead" if job.exhausted else "retry_wait"
            job.end_lease("failed", state=state, not_before=outcome.job.not_before if state == "retry_wait"
                          else job.not_before)
        else:  # acknowledge_cancel, or a release while cancel was requested
            job.end_lease("cancelled", state="cancelled")
        self.assert_job(outcome.job)

    def _repeats(self, lease: Lease, kind: str) -> bool:
        """A report its attempt already made (its run record carries that outcome): the same report again."""
        run = self.model[lease.job_id].runs[lease.attempt]
        return run.worker == lease.worker_id and run.outcome in REPORT_WRITES.get(kind, set())

    def _single(self, op: Op) -> None:
        self._expect(op, self._perform(self.store, op))

    def _holders(self) -> list[Lease]:
        return [lease for lease in self.all_leases if self.model[lease.job_id].holds(lease)]

    def _draw_lease(self, data: st.DataObject, whose: str) -> Lease | None:
        """A Lease a worker just claimed, the Lease of a job running now, or (zombies too) any Lease ever
        handed out. Claiming here as well keeps claims frequent however hypothesis narrows the rules."""
        if whose == "a new claim's":
            lease = self._claim(data.draw(st.sampled_from(WORKERS), label="worker"), 30)
            if lease is not None:
                return lease
        pool = self._holders() if whose != "any" else []
        pool = pool or self.all_leases
        return data.draw(st.sampled_from(pool), label="lease") if pool else None

    def _report(self, data: st.DataObject, whose: str, kind: str, extra: Any = None) -> None:
        lease = self._draw_lease(data, whose)
        if lease is not None:
            self._single((kind, lease, extra))

    WHOSE = st.sampled_from(["a new claim's", "a running job's", "any"])

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE)
    def complete(self, data: st.DataObject, whose: str) -> None:
        self._report(data, whose, "complete")

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE, permanent=st.sampled_from([False, False, True]))
    def fail(self, data: st.DataObject, whose: str, permanent: bool) -> None:
        self._report(data, whose, "fail", permanent)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE)
    def release(self, data: st.DataObject, whose: str) -> None:
        self._report(data, whose, "release")

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE)
    def acknowledge_cancel(self, data: st.DataObject, whose: str) -> None:
        self._report(data, whose, "acknowledge_cancel")

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE, seconds=st.sampled_from([0.5, 1, 30]))
    def snooze(self, data: st.DataObject, whose: str, seconds: float) -> None:
        self._report(data, whose, "snooze", seconds)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), whose=WHOSE, lease_s=st.sampled_from([1, 5, 30]))
    def renew_lease(self, data: st.DataObject, whose: str, lease_s: int) -> None:
        self._report(data, whose, "heartbeat", lease_s)

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), then=st.sampled_from(["fail", "fail permanently", "reap", "complete", "release"]))
    def cancel_then_stop(self, data: st.DataObject, then: str) -> None:
        """The tenant cancels a running job, then its attempt stops without acknowledging: it fails, its
        worker vanishes (reap), it completes (completion wins) or it is released."""
        lease = data.draw(st.sampled_from(self._holders()), label="running job's lease")
        event(f"cancel, then {then}")
        self._single(("cancel", lease.job_id, None))
        if then == "reap":
            self._advance_past(self.model[lease.job_id].lease_expires_at or self.now)
            self._single(("reap", None, None))
        else:
            permanent = then == "fail permanently"
            self._single(("fail", lease, permanent) if then.startswith("fail") else (then, lease, None))

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), kind=st.sampled_from(["complete", "fail", "release", "acknowledge_cancel"]),
          permanent=st.booleans())
    def report_twice(self, data: st.DataObject, kind: str, permanent: bool) -> None:
        """A worker whose answer was lost sends its report again: the same answer, nothing written twice."""
        lease = data.draw(st.sampled_from(self._holders()), label="running job's lease")
        op: Op = (kind, lease, permanent if kind == "fail" else None)
        event(f"{kind} twice")
        self._single(op)
        self._single(op)

    @rule(job_id=jobs, as_tenant=st.sampled_from(["owner", "owner", "another tenant"]))
    def cancel(self, job_id: str, as_tenant: str) -> None:
        if as_tenant == "owner":
            self._single(("cancel", job_id, None))
            return
        other = next(t for t in TENANTS if t != self.model[job_id].tenant)
        with pytest.raises(JobNotFound):
            self.store.cancel(job_id, other)

    @precondition(lambda self: any(job.state == "running" for job in self.model.values()))
    @rule(past=st.sampled_from(["no lease", "the earliest lease", "every lease"]))
    def reap(self, past: str) -> None:
        expiries = [job.lease_expires_at for job in self.model.values()
                    if job.state == "running" and job.lease_expires_at is not None]
        if expiries and past != "no lease":
            self._advance_past(min(expiries) if past == "the earliest lease" else max(expiries))
        self._single(("reap", None, None))

    def _advance_past(self, at: int) -> None:
        if self.now <= at:
            self.clock.advance((at - self.now + 2) / 1000)
        assert self.now > at

    @rule(seconds=st.sampled_from([0.001, 0.5, 1, 2, 5, 30, 301]))
    def advance_time(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        """Operator replay; mostly of a dead or quarantined job, sometimes of one that is not."""
        replayable = sorted(job_id for job_id, job in self.model.items() if job.state in REPLAYABLE)
        pool = data.draw(st.sampled_from([replayable, replayable, sorted(self.model)]).filter(bool), label="pool")
        job_id = data.draw(st.sampled_from(pool), label="job")
        job = self.model[job_id]
        if job.state not in REPLAYABLE:
            with pytest.raises(NotReplayable):
                self.store.replay(job_id)
            return
        replayed = self.store.replay(job_id)
        job.move(replay=True, state="queued", attempt_floor=job.attempt, not_before=self.now,
                 cancel_requested=False)
        self.replayed.add(job_id)
        self.assert_job(replayed)
        event(f"replay: {job.history[-2][1]} -> queued")

    def _stale_leases(self) -> list[Lease]:
        return [lease for lease in self.all_leases if lease.attempt < self.model[lease.job_id].attempt]

    def _owners_zombies(self) -> list[Lease]:
        """Superseded Leases of a worker that holds a newer attempt of the same job (a restarted worker with
        a stable id): only the attempt number tells its old reports from its new ones."""
        return [lease for lease in self._stale_leases()
                if self.model[lease.job_id].state == "running" and self.model[lease.job_id].lease_owner ==
                lease.worker_id]

    LATE = st.sampled_from(["complete", "fail", "fail permanently", "release", "acknowledge_cancel", "heartbeat"])

    @precondition(lambda self: self._stale_leases())
    @rule(data=st.data(), kind=LATE)
    def late_report(self, data: st.DataObject, kind: str) -> None:
        """A zombie whose attempt was superseded reports: FENCED (a heartbeat: not held), or APPLIED when it
        repeats what its attempt already reported; the job row does not move."""
        self._late(data.draw(st.sampled_from(self._stale_leases()), label="superseded lease"), kind)

    @precondition(lambda self: self._owners_zombies())
    @rule(data=st.data(), kind=LATE)
    def late_report_by_current_owner(self, data: st.DataObject, kind: str) -> None:
        self._late(data.draw(st.sampled_from(self._owners_zombies()), label="owner's superseded lease"), kind)

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), kind=LATE)
    def worker_restarts(self, data: st.DataObject, kind: str) -> None:
        """A worker stalls past its lease, the reaper takes the job back, the worker restarts under the same
        id and claims again; then the stalled thread of its old attempt reports. When the new claim got the
        same job, only the attempt number can fence the old report."""
        lease = data.draw(st.sampled_from(self._holders()), label="stalled worker's lease")
        self._advance_past(self.model[lease.job_id].lease_expires_at or self.now)
        self._single(("reap", None, None))
        again = self._claim(lease.worker_id, 30)
        if again is not None and again.job_id == lease.job_id:
            self._late(lease, kind)

    def _late(self, lease: Lease, kind: str) -> None:
        before = self.store.get(lease.job_id)
        op: Op = (("fail", lease, kind == "fail permanently") if kind.startswith("fail")
                  else (kind, lease, 30 if kind == "heartbeat" else None))
        outcome = self._perform(self.store, op)
        if kind == "heartbeat":
            assert not outcome.held, "a superseded lease was renewed"
        else:
            expected = ReportStatus.APPLIED if self._repeats(lease, op[0]) else ReportStatus.FENCED
            assert outcome.status is expected, f"{kind} by a superseded lease was {outcome.status}"
        event(f"late report: {kind}" + (" by the current owner" if before.lease_owner == lease.worker_id else ""))
        assert self.store.get(lease.job_id) == before
        self._expect(op, outcome)

    def _race(self, lease: Lease, other: Lease, victim: str, interloper: str, permanent: bool) -> None:
        """`victim` reads the row and decides; `interloper` (another JobStore) commits just before the
        victim's transaction; the victim must lose that write and decide again from the new row. When the
        victim writes no transaction at all, the interloper simply runs after it."""

        def op(kind: str, own: Lease) -> Op:
            if kind == "cancel":
                return ("cancel", lease.job_id, None)
            if kind == "reap":
                return ("reap", None, None)
            return (kind, own, permanent if kind == "fail" else 5 if kind == "heartbeat" else None)

        first, second = op(victim, lease), op(interloper, other)
        answers: list[tuple[Op, Any]] = []
        self.recorder.pending = lambda: answers.append((second, self._perform(self.rival, second)))
        try:
            answer = self._perform(self.store, first)
        finally:
            interloper_ran = self.recorder.pending is None
            self.recorder.pending = None
        answers.append((first, answer))
        event(f"race: {interloper} {'before' if interloper_ran else 'after'} {victim}")
        if not interloper_ran:
            answers.append((second, self._perform(self.rival, second)))
        for done, outcome in answers:  # the order the operations took effect
            self._expect(done, outcome)

    def _draw_race_leases(self, data: st.DataObject) -> tuple[Lease, Lease]:
        lease = data.draw(st.sampled_from(self._holders()), label="running job's lease")
        same_job = [other for other in self.all_leases if other.job_id == lease.job_id]
        return lease, data.draw(st.sampled_from(same_job), label="interloper's lease (same job)")

    @precondition(lambda self: self._holders())
    @rule(
        data=st.data(),
        victim=st.sampled_from(["complete", "fail", "release", "acknowledge_cancel", "cancel"]),
        interloper=st.sampled_from(["complete", "fail", "release", "acknowledge_cancel", "heartbeat", "cancel"]),
        permanent=st.booleans(),
    )
    def race(self, data: st.DataObject, victim: str, interloper: str, permanent: bool) -> None:
        """Two writers on one running job: a worker's report or a tenant's cancel, against another."""
        lease, other = self._draw_race_leases(data)
        self._race(lease, other, victim, interloper, permanent)

    @precondition(lambda self: self._holders())
    @rule(
        data=st.data(),
        worker_side=st.sampled_from(["complete", "fail", "release", "acknowledge_cancel", "cancel"]),
        reaper_decides_first=st.booleans(),
        permanent=st.booleans(),
    )
    def race_with_reaper(self, data: st.DataObject, worker_side: str, reaper_decides_first: bool,
                         permanent: bool) -> None:
        """The lease has just lapsed: the reaper and the (slow, not dead) worker or a cancel race."""
        lease, other = self._draw_race_leases(data)
        self._advance_past(self.model[lease.job_id].lease_expires_at or self.now)
        if reaper_decides_first:
            self._race(lease, other, "reap", worker_side, permanent)
        else:
            self._race(lease, other, worker_side, "reap", permanent)

    @precondition(lambda self: self._holders())
    @rule(data=st.data())
    def reaper_meets_heartbeat(self, data: st.DataObject) -> None:
        """The reaper reads a lapsed lease; the worker's heartbeat renews it before the reaper writes: the
        reaper must leave the job to the worker (only its condition on lease_expires_at can tell)."""
        lease = data.draw(st.sampled_from(self._holders()), label="running job's lease")
        self._advance_past(self.model[lease.job_id].lease_expires_at or self.now)
        self._race(lease, lease, "reap", "heartbeat", False)

    # --- after every step ---------------------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        """Every job, every step: what the two tables hold (read behind the store's back: two consistent
        scans on DynamoDB) equals the model; a job that changed in this step is also read back through the
        store's own API (get, events, runs)."""
        rows: dict[str, dict[str, Any]] = {}
        runs: dict[str, list[Run]] = defaultdict(list)
        results: dict[str, Any] = {}
        result_expiries: dict[str, Any] = {}
        keys: dict[tuple[str, str], str] = {}
        partials: dict[tuple[str, int], dict[str, Any]] = {}
        for values in self.storage.jobs_table():
            pk, sk = values.pop("pk"), values.pop("sk")
            values.pop("entity", None)
            if sk == "JOB":
                rows[pk.removeprefix("JOB#")] = values
            elif sk.startswith("RUN#") and "worker_id" not in values:  # a running attempt's partial record
                assert "expires_at" not in values, f"{pk} {sk}: a running attempt's record never expires"
                partials[(pk.removeprefix("JOB#"), int(sk.removeprefix("RUN#")))] = values
            elif sk.startswith("RUN#"):
                expiry = values.pop("expires_at", None)
                run = run_from_values(values)
                assert (expiry is None) == (run.outcome is None), f"{pk} {sk}: a TTL only once its attempt ended"
                runs[pk.removeprefix("JOB#")].append(run)
                if "result" in values:  # on the run record that completed the job (issue 34)
                    assert pk.removeprefix("JOB#") not in results, f"{pk}: a result on two run records"
                    results[pk.removeprefix("JOB#")] = values["result"]
                    result_expiries[pk.removeprefix("JOB#")] = expiry
            elif sk == "RESULT":
                raise AssertionError(f"{pk}: a result item (results are on the run record since issue 34)")
            elif pk.startswith("IDEM#"):
                tenant, key = pk.removeprefix("IDEM#").split("#", 1)
                keys[(tenant, key)] = values["job_id"]
        events: dict[str, list[OutboxEvent]] = defaultdict(list)
        for values in self.storage.outbox_table():
            values.pop("time_bucket"), values.pop("expires_at")
            events[values["job_id"]].append(OutboxEvent.model_validate(values))

        assert set(rows) == set(self.model), "the jobs table holds other jobs than were created"
        assert keys == {tenant_key: job_id for tenant_key, (_, job_id) in self.idempotency.items()}
        assert set(events) <= set(self.model)
        for job_id, job in self.model.items():
            values = rows[job_id]
            index = {name: values.pop(name, None) for name in ("ready_pk", "ready_due", "lease_pk")}
            values.pop("ready_shards", None)
            values.pop("running_shard", None)
            values.pop("charged_entry", None)
            opened = (values.pop("run_claimed_at", None), values.pop("run_lease_expires_at", None))
            assert (None not in opened) == (values["state"] == "running"), f"job {job_id}: its attempt's claim"
            if values["state"] == "running":  # its attempt's run is the row's until it ends (issue 34)
                partial = partials.pop((job_id, values["attempt"]), {})
                assert not any(run.attempt == values["attempt"] for run in runs[job_id]), "a record before its end"
                runs[job_id].append(run_from_values({
                    "job_id": job_id, "attempt": values["attempt"], "worker_id": values["lease_owner"],
                    "claimed_at": opened[0], "lease_expires_at": opened[1], **partial}))
            expiry = values.pop("expires_at", None)
            row = Job.model_validate(values)
            assert row_view(row) == job.view(), f"job {job_id}"
            ended = row.updated_at // 1000 + JOB_RETENTION_S if job.state in TERMINAL else None
            assert expiry == ended, f"job {job_id}: a TTL exactly while it has ended"
            assert 0 <= row.attempt - row.attempt_floor <= row.max_attempts

            # The sparse indexes: `ready` only while queued / retry_wait (due at not_before), `leases` only
            # while running. A leftover key would show the job to claim or to the reaper in the wrong state.
            claimable = job.state in CLAIMABLE
            assert (index["ready_pk"] is not None, index["ready_due"] is not None) == (claimable, claimable)
            if claimable:
                assert index["ready_pk"].startswith(f"{job.tenant}#") and index["ready_due"] == job.not_before
            assert (index["lease_pk"] is not None) == (job.state == "running"), f"job {job_id}"

            before = self.seen_states.get(job_id)
            if before in TERMINAL and row.state.value != before:
                assert job_id in self.replayed and before in REPLAYABLE and row.state.value == "queued", (
                    f"job {job_id} left terminal state {before} for {row.state.value}")
            self.seen_states[job_id] = row.state.value

            published = sorted(events[job_id], key=lambda e: e.version)
            assert [event.version for event in published] == list(range(1, row.version + 1)), f"job {job_id}"
            assert published[-1].status is row.state
            assert [(e.version, e.status.value, e.attempt, e.cancel_requested) for e in published] == job.history

            recorded = sorted(runs[job_id], key=lambda r: r.attempt)
            assert [run.attempt for run in recorded] == list(range(1, row.attempt + 1)), f"job {job_id}"
            assert {run.attempt: (run.worker_id, run.outcome and run.outcome.value,
                                  run.reclaimed_as and run.reclaimed_as.value,
                                  run.late_report and run.late_report.value) for run in recorded} == {
                attempt: run.view() for attempt, run in job.runs.items()}
            # Overlaps (onward.domain.overlaps) are marked on both runs, and only where the records show one.
            shown = overlaps(recorded)
            for run in recorded:
                assert set(run.overlapped_with) <= set(shown.get(run.attempt, ())), f"job {job_id}"
                assert all(run.attempt in recorded[other - 1].overlapped_with for other in run.overlapped_with)

            assert (job_id in results) == (job.state == "succeeded")
            if job.state == "succeeded":
                assert results[job_id] == job.result
                assert result_expiries[job_id] == ended, "the result goes with the row"

            fingerprint = (job.version, job.lease_expires_at, tuple(run.view() for run in job.runs.values()))
            if self.fingerprints.get(job_id) != fingerprint:
                assert self.store.get(job_id) == row
                assert self.store.events(job_id) == published
                assert self.store.runs(job_id) == recorded
                self.fingerprints[job_id] = fingerprint
        self.replayed.clear()


MODEL_SETTINGS = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
# In memory a run costs milliseconds, not a CloudFormation stack and a few hundred HTTP round trips: ten
# times the steps (150 runs of up to 50 steps: 7,500 against 750), in a few seconds.
MEMORY_MODEL_SETTINGS = settings(MODEL_SETTINGS, max_examples=150, stateful_step_count=50)


def on_shared_stack(endpoint: Any, shared_stack: SharedStack) -> dict[str, Any]:
    """A StoreModel's `backend` and `teardown` for DynamoDB: each run borrows the session's shared stack of
    template.yaml (the `shared_stack` fixture), every table emptied, and gives it back at its end."""
    def backend(clock: ManualClock) -> StoreBackend:
        env = shared_stack.lend().environment
        settings_ = Settings(env["JOBS_TABLE"], env["OUTBOX_TABLE"], endpoint.url, "us-east-1")
        return DynamoBackend(clock, settings_, endpoint.client("dynamodb"))

    def teardown(machine: StoreModel) -> None:
        assert shared_stack.give_back() == []  # items only

    return {"backend": staticmethod(backend), "teardown": teardown}


@pytest.mark.integration
def test_store_matches_model_on_dynamodb(endpoint: Any, shared_stack: SharedStack,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onward.store.service, "uuid", SeededJobIds)
    machine = type("StoreModelOnDynamoDB", (StoreModel,), on_shared_stack(endpoint, shared_stack))
    run_state_machine_as_test(machine, settings=MODEL_SETTINGS)


def test_store_matches_model_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onward.store.service, "uuid", SeededJobIds)
    machine = type("StoreModelInMemory", (StoreModel,), {"backend": staticmethod(MemoryBackend)})
    run_state_machine_as_test(machine, settings=MEMORY_MODEL_SETTINGS)

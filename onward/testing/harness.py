"""`JobHarness`: a job type's handlers run through claim, attempts, retries, timeouts, cancels and crashes, on
the in-memory job store with a manual clock, in the test's own thread, in milliseconds per job."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import EpochMs, ManualClock
from onward.domain.models import Lease, NewJob
from onward.domain.states import TERMINAL_STATES, JobState
from onward.maintenance.reaper import reap_once
from onward.runtime.worker import JobHandler, Registry, RetryPolicy, SimulatedCrash, Worker
from onward.store.service import CancelOutcome, CancelStatus, JobStore
from onward.testing.records import JobRecord
from onward.testing.timeline import InlineRunner, Timeline, ms_of

DEFAULT_TENANT = "tests"
STEPS_PER_JOB = 250  # attempts (at most 100 per budget) and clock moves one job may take to end, and to spare


class NotSettled(AssertionError):
    """`run_until_settled` took its `max_steps` attempts and clock moves and jobs were still not ended (a
    handler that raises Stopped unasked is released and claimed again for ever, as in a worker)."""


class JobHarness:
    """Runs handlers as a worker does, without a worker's process, threads or AWS.

    What is real: the job store (onward.store.service.JobStore over the in-memory recorder, the same lifecycle,
    dispatch order, attempt budget, backoff and fencing as on DynamoDB), the Worker (its claim, the
    JobContext it builds with the fencing token `<job_id>:<attempt>`, the lease renewal that tells the
    handler of a cancel, how it reports what the handler returned or raised, a timeout, a stop) and the
    reaper (a crashed attempt's lapsed lease). What differs: the handler runs in the calling thread
    (timeline.InlineRunner) instead of the worker's child process, and time is the harness's `clock`, a
    ManualClock that moves only when the handler waits (`context.wait`), when the test says time passes
    (`advance`), or when `run_until_settled` moves it to the next moment something is due (a retry's backoff,
    a delayed job, a crashed attempt's lease expiry). So a handler that takes 10 minutes of `context.wait`
    runs in a few milliseconds, and a timeout or a cancel lands exactly where its moment falls.

        harness = JobHarness(myapp.jobs.registry)
        record = harness.run("reports.export", {"month": "2026-11"}, max_attempts=3)
        record.assert_succeeded()

    A handler that passes here runs the same under `onward up` or `onward worker`, with the limits of one
    thread: it must pass time through `context.wait` (or `advance`) for a timeout to stop it here (a
    `time.sleep` really sleeps, and a handler that never yields runs past its timeout); a handler that ends
    the process (os._exit) ends the test (raise SimulatedCrash to drill a dying worker); and what it changes
    in memory is seen by the test (in a worker only the child sees it)."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
        lease_s: float = 30.0,
        heartbeat_s: float | None = None,
        stop_grace_s: float = 5.0,
        backoff: BackoffPolicy | None = None,
        seed: int = 0,
        start: EpochMs | None = None,
    ) -> None:
        """`registry`: the handlers (your module's `registry`; default: a new one, for `register`). `lease_s`,
        `heartbeat_s`, `stop_grace_s`: the worker's (defaults as `onward worker`'s: renewed every lease_s / 3).
        `backoff`: the store's retry backoff (default: the platform's, 1 s doubling up to 300 s; the clock
        jumps it anyway). `seed`: the store's jitter. `start`: the clock's first moment (epoch ms)."""
        self.registry = registry if registry is not None else Registry()
        self.clock = ManualClock() if start is None else ManualClock(start)
        self.store = JobStore.in_memory(clock=self.clock, backoff=backoff or BackoffPolicy(), rng=random.Random(seed))
        self._timeline = Timeline(self.clock)
        self.worker = Worker(self.store, self.registry, worker_id="harness-worker", lease_s=lease_s,
                             heartbeat_s=heartbeat_s, stop_grace_s=stop_grace_s, clock=self.clock,
                             runner=InlineRunner(self.registry, self._timeline), renewals=self._timeline.renewal)
        self.tenant_id = tenant_id
        self._submitted: list[str] = []
        self.crashes = 0  # attempts whose handler raised SimulatedCrash (their worker "died")
        self._crashed: list[Lease] = []  # their leases, until the reaper has closed their attempts

    # --- handlers and jobs -------------------------------------------------------------------------------

    def register(self, job_type: str, *, timeout_s: float | None = None, retry: RetryPolicy | None = None
                 ) -> Callable[[JobHandler], JobHandler]:
        """`registry.register` of the harness's registry: a decorator."""
        return self.registry.register(job_type, timeout_s=timeout_s, retry=retry)

    def submit(
        self,
        job_type: str,
        params: dict[str, Any] | None = None,
        *,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        priority: int = 0,
        delay_s: float | None = None,
        tenant_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Creates a job as `POST /jobs` does (the same NewJob validation: a pydantic ValidationError where
        the API answers 422) and returns its id. A type with no handler is created (the API's ONWARD_JOB_TYPES
        is not the registry) and its attempt fails permanently with UnknownJobType, as in a worker. Without
        `max_attempts`, the type's retry policy's (as the API gives a job of a type its workers declared)."""
        if max_attempts is None:
            max_attempts = self.registry.policy(job_type).max_attempts
        request = NewJob(type=job_type, params=params or {}, max_attempts=max_attempts, priority=priority,
                         timeout_s=_seconds(timeout_s), delay_s=_seconds(delay_s))
        created = self.store.create(tenant_id or self.tenant_id, request, idempotency_key)
        if created.created:
            self._submitted.append(created.job.job_id)
        return created.job.job_id

    def record(self, job_id: str) -> JobRecord:
        """The job as the store holds it now, with its run records, result and events."""
        job = self.store.get(job_id)
        return JobRecord(job=job, runs=tuple(self.store.runs(job_id)), result=self.store.result(job_id),
                         events=tuple(self.store.events(job_id)))

    # --- running -----------------------------------------------------------------------------------------

    def run_next(self) -> JobRecord | None:
        """One attempt, now: the reaper hands back leases lapsed by now, the worker claims the next due job
        (fair order, priorities) and runs it to its report. The job's record after it; None when nothing is
        due (the clock does not move)."""
        job_id = self._attempt()
        return None if job_id is None else self.record(job_id)

    def _attempt(self) -> str | None:
        """run_next's attempt: the id of the job it ran, None when nothing was due."""
        self._timeline.catch_up()
        if self._crashed:  # only a crashed attempt leaves a lease to lapse here
            reap_once(self.store)
            self._crashed = [lease for lease in self._crashed if self._holds(lease)]
        self._timeline.last_lease = None
        try:
            worked = self.worker.run_once()
        except SimulatedCrash:  # the worker "died" holding the lease: it lapses, the reaper hands the job back
            assert self._timeline.last_lease is not None
            self._crashed.append(self._timeline.last_lease)
            self.crashes += 1
            worked = True
        if not worked:
            return None
        lease = self._timeline.last_lease
        assert lease is not None, "the worker ran an attempt without taking a lease"
        return lease.job_id

    def _holds(self, lease: Lease) -> bool:
        job = self.store.get(lease.job_id)
        return job.state is JobState.RUNNING and job.attempt == lease.attempt

    def run_until_settled(self, *, max_steps: int | None = None) -> list[JobRecord]:
        """Runs every job to its end: each due job's attempt, and when none is due the clock moves on to the
        next moment one is (a retry's backoff, a delayed job's start, a crashed attempt's lease expiry). The
        records of the jobs submitted here, in submit order. NotSettled, describing the jobs left, after
        `max_steps` attempts and clock moves (default: STEPS_PER_JOB per job not ended)."""
        if max_steps is None:
            max_steps = STEPS_PER_JOB * max(1, sum(job.state not in TERMINAL_STATES for job in self.store.all_jobs()))
        for _ in range(max_steps):
            if self._attempt() is not None:
                continue
            upcoming = self._next_due()
            if upcoming is None:
                return [self.record(job_id) for job_id in self._submitted]
            self._timeline.advance_to(max(upcoming, self.clock() + 1))
        unsettled = [job.job_id for job in self.store.all_jobs() if job.state not in TERMINAL_STATES]
        raise NotSettled(f"{len(unsettled)} jobs not ended after {max_steps} steps, among them:\n"
                         + "\n".join(self.record(job_id).describe() for job_id in unsettled[:3]))

    def run(self, job_type: str, params: dict[str, Any] | None = None, **options: Any) -> JobRecord:
        """`submit` (with its options) and `run_until_settled`: the job's record once it ended."""
        job_id = self.submit(job_type, params, **options)
        self.run_until_settled()
        return self.record(job_id)

    def _next_due(self) -> EpochMs | None:
        """When the next job not ended becomes claimable: a waiting one at its not_before, a running one
        (its attempt crashed) once its lease has lapsed; None when every job has ended."""
        moments = [job.not_before if job.state is not JobState.RUNNING else (job.lease_expires_at or 0) + 1
                   for job in self.store.all_jobs() if job.state not in TERMINAL_STATES]
        return min(moments, default=None)

    # --- time and the tenant -----------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """`seconds` pass. Inside a handler: it is busy that long without looking at its stops (renewals,
        cancels, its timeout land on the way: AttemptCut at the moment a worker would end it); outside: the
        clock moves (scheduled cancels happen; a waiting job becomes due)."""
        self._timeline.advance_to(self.clock() + ms_of(seconds))

    def cancel(self, job_id: str, tenant_id: str | None = None) -> CancelOutcome:
        """The tenant cancels (`DELETE /jobs/{id}`): a waiting job ends cancelled at once; a running one is
        asked to stop, and its worker renews its lease now (as if the next renewal came at once) and so tells
        the handler (`context.cancel_requested`), which stops at its next `stop_if_asked()` / `wait()`."""
        outcome = self.store.cancel(job_id, tenant_id)
        if outcome.status is CancelStatus.REQUESTED:
            self._timeline.renew_now(job_id)
        return outcome

    def cancel_after(self, job_id: str, seconds: float) -> None:
        """`cancel` when the clock has moved `seconds` on from now (while a handler waits, or between
        attempts)."""
        self.after(seconds, lambda: self.cancel(job_id))

    def after(self, seconds: float, action: Callable[[], object]) -> None:
        """Do `action` when the clock has moved `seconds` on from now: e.g. make a dependency fail 3 s into an
        attempt. It must not move the clock itself (TimeAlreadyMoving)."""
        self._timeline.at(self.clock() + ms_of(seconds), action)


def _seconds(value: float | None) -> float | None:
    """A whole number of seconds as the float the API's JSON would carry."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

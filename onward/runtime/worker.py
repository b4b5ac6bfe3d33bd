"""Worker: claim -> heartbeat -> run the registered handler -> complete / fail, fenced by the attempt.

A handler receives a `JobContext` carrying the fencing token (`<job_id>:<attempt>`): pass it to any
external system the job writes to, so a superseded attempt's writes can be refused there too. It runs in a
child process (onward.runtime.execution) that the worker ends at the attempt's timeout (a failed attempt, error type
`Timeout`) or when it ignores a stop. A `LeaseRenewal` in the worker keeps the lease while the handler runs
(retrying a failed renewal within the lease) and surfaces cancellation (`context.cancel_requested`) and a
lost lease (`context.lease_lost`); a handler that stops because of either raises `context.stop_if_asked()`'s
exception.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Protocol, assert_never

from aws_lambda_powertools import Logger

from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import Clock, EpochMs, system_clock
from onward.domain.errors import InvalidRequest, PayloadTooLarge, RegionFenced
from onward.domain.models import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, ErrorSummary, Job, Lease
from onward.domain.retry_policy import PLATFORM_POLICY, InvalidRegistration, RetryPolicy
from onward.faults import fault_point
from onward.runtime import authority, job_spans
from onward.runtime.execution import (
    Ending,
    HandlerProcess,
    JobContext,
    JobHandler,
    Killed,
    Outcome,
    PermanentError,
    Raised,
    Returned,
    SimulatedCrash,
    Stopped,
    TimedOut,
    Unsendable,
    Vanished,
)
from onward.runtime.progress import ProgressReporter
from onward.runtime.snooze import Snooze
from onward.store.service import JobStore, Report

__all__ = ["HandlerRunner", "InvalidRegistration", "JobContext", "JobHandler", "LeaseRenewal", "PermanentError",
           "Registry", "RenewalFactory", "RetryPolicy", "SimulatedCrash", "Snooze", "Stopped", "Worker"]

logger = Logger(service="onward-worker")

TIMEOUT_ERROR = "Timeout"  # error type of an attempt ended at its timeout
PROCESS_DIED_ERROR = "HandlerProcessDied"  # error type of an attempt whose process ended without an answer
PAUSED_POLL_S = 0.2  # how often a worker whose claims are paused looks again


class Registry:
    """Job type name -> its handler, and how long one attempt of the type may run by default."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}
        self._timeouts: dict[str, float] = {}
        self._policies: dict[str, RetryPolicy] = {}  # retry policy per type (issue 37)
        self._version = 0

    def register(self, job_type: str, *, timeout_s: float | None = None, retry: RetryPolicy | None = None
                 ) -> Callable[[JobHandler], JobHandler]:
        """`timeout_s`: the type's default timeout per attempt (a job's own timeout_s wins), above 0 and at most
        MAX_TIMEOUT_S; without it, DEFAULT_TIMEOUT_S. `retry`: the type's RetryPolicy (default PLATFORM_POLICY)."""
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidRegistration(f"job type {job_type!r}: retry must be a RetryPolicy, not {retry!r}")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                      or not 0 < timeout_s <= MAX_TIMEOUT_S):
            raise InvalidRegistration(f"job type {job_type!r}: timeout_s must be a number of seconds above 0 and "
                                      f"at most {MAX_TIMEOUT_S} (the platform's maximum), not {timeout_s!r}")

        def add(handler: JobHandler) -> JobHandler:
            self._handlers[job_type] = handler
            self._version += 1
            self._policies[job_type] = retry or PLATFORM_POLICY
            if timeout_s is None:
                self._timeouts.pop(job_type, None)
            else:
                self._timeouts[job_type] = float(timeout_s)
            return handler

        return add

    def get(self, job_type: str) -> JobHandler | None:
        return self._handlers.get(job_type)

    @property
    def version(self) -> int:
        """Changes with every registration (a handler process forked before it is replaced)."""
        return self._version

    def timeout_s(self, job_type: str) -> float:
        """The type's default timeout per attempt."""
        return self._timeouts.get(job_type, float(DEFAULT_TIMEOUT_S))

    def attempt_timeout_s(self, job: Job) -> float:
        """How long one attempt of `job` may run: the job's timeout_s, else its type's; never above MAX_TIMEOUT_S
        (a row stored under a higher maximum is capped)."""
        return min(job.timeout_s or self.timeout_s(job.type), float(MAX_TIMEOUT_S))

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self._handlers)

    def policy(self, job_type: str) -> RetryPolicy:
        """The type's retry policy (issue 37), PLATFORM_POLICY for a type registered without one."""
        return self._policies.get(job_type, PLATFORM_POLICY)


class HandlerRunner(Protocol):
    """Where a Worker runs its handlers: onward.runtime.execution.HandlerProcess (a child process the worker can end),
    or onward.testing's in-process runner."""

    def run(self, context: JobContext, *, timeout_s: float, stop_grace_s: float) -> Outcome: ...

    def close(self) -> None: ...


class RenewalFactory(Protocol):
    """What keeps an attempt's lease while its handler runs: LeaseRenewal (threads, real time), or
    onward.testing's (renewals at the times its manual clock passes)."""

    def __call__(self, store: JobStore, lease: Lease, context: JobContext, *, lease_s: float, every_s: float,
                 clock: Clock) -> LeaseRenewal: ...


class Worker:
    """One worker loop. Run several in threads for a pool; `stop_claiming()` lets the running job end and then
    the loop, `shutdown()` also asks the running job to stop and releases it."""

    def __init__(
        self,
        store: JobStore,
        registry: Registry,
        *,
        worker_id: str | None = None,
        lease_s: float = 30.0,
        heartbeat_s: float | None = None,
        idle_s: float = 0.5,
        idle_max_s: float = 2.0,
        stop_grace_s: float = 5.0,
        clock: Clock = system_clock,  # the store's: lease expiries are in its time
        attempt_ended: Callable[[], object] | None = None,
        held_changed: Callable[[], object] | None = None,
        runner: HandlerRunner | None = None,
        renewals: RenewalFactory | None = None,
    ) -> None:
        """`stop_grace_s`: how long a handler asked to stop (cancelled, lease lost, shutting down) may take
        before the worker ends its process. `attempt_ended`: called after each attempt has been reported and its
        lease renewal stopped (the pool of `onward worker` publishes the overlaps found there,
        onward.telemetry.OverlapsPublisher); an error it raises is logged, never the job's. `held_changed`: called
        when the worker starts holding a job and when it stops (the pool's task protection). `runner` and
        `renewals` are onward.testing's to replace (default: a HandlerProcess, a LeaseRenewal per attempt)."""
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        self._store = store
        self._registry = registry
        self._lease_s = lease_s
        self._heartbeat_s = heartbeat_s if heartbeat_s is not None else lease_s / 3
        self._clock = clock
        self._stop_grace_s = stop_grace_s
        self._attempt_ended = attempt_ended
        self._held_changed = held_changed
        self._claims_paused = threading.Event()  # claim nothing for now (the loop goes on: resume_claims)
        # An idle worker polls less and less often (idle_s doubling up to idle_max_s, jittered): a pool
        # waiting for work costs a few claims a second instead of one per worker per idle_s.
        self._idle = BackoffPolicy(base_s=idle_s, cap_s=max(idle_s, idle_max_s))
        self._stopping = threading.Event()  # claim nothing more
        self._shutting_down = threading.Event()  # and hand back the running job
        self._current: JobContext | None = None
        self.attempts_run = 0  # claimed and over (reported, or crashed): only this worker's thread writes these
        self.attempts_handed_back = 0  # of them, released because of shutdown(), not charged an attempt
        self._handler_process: HandlerRunner = runner or HandlerProcess(registry)
        self._renewals: RenewalFactory = renewals or LeaseRenewal
        weakref.finalize(self, self._handler_process.close)  # a Worker dropped without run()'s end

    def stop_claiming(self) -> None:
        """Claim nothing more (a claim already under way ends first): the running job, if any, runs on to its
        end and is reported as usual, then `run()` returns."""
        self._stopping.set()

    def pause_claims(self) -> None:
        self._claims_paused.set()

    def resume_claims(self) -> None:
        self._claims_paused.clear()

    def shutdown(self) -> None:
        """Stop claiming; the running handler is asked to stop (its process is ended if it has not stopped
        `stop_grace_s` later) and its job is released, not charged an attempt (onward.domain.lifecycle.release)."""
        self._stopping.set()
        self._shutting_down.set()
        current = self._current
        if current is not None:
            current.shutting_down.set()

    @property
    def busy(self) -> bool:
        """Whether it holds a job now."""
        return self._current is not None

    def run(self) -> None:
        """Claim and run jobs until `shutdown()`; then end the handlers' process."""
        empty_claims = 0
        try:
            while not self._stopping.is_set():
                if self._claims_paused.is_set():
                    self._stopping.wait(PAUSED_POLL_S)
                    continue
                try:
                    worked = self.run_once(polling=True)
                except (SimulatedCrash, RegionFenced):  # RegionFenced (issue 39): not home, or an older epoch
                    continue
                except Exception:
                    logger.exception("worker loop error", extra={"worker_id": self.worker_id})
                    worked = False
                empty_claims = 0 if worked else empty_claims + 1
                if empty_claims:
                    self._stopping.wait(self._idle.delay(empty_claims))
        finally:
            self._handler_process.close()

    def run_once(self, *, polling: bool = False) -> bool:
        """Claim one job and run it to its end. False when nothing was due (`polling`: a poll of the worker's
        loop, JobStore.claim's)."""
        claim_started = job_spans.claim_started()
        if not authority.is_home(self._store) or (lease := self._store.claim(self.worker_id, self._lease_s,
                                                                              polling=polling)) is None:
            return False
        job_spans.claimed(lease, claim_started)
        self._execute(lease)
        return True

    def _execute(self, lease: Lease) -> None:
        job = lease.job
        context = JobContext(job.job_id, job.tenant_id, job.type, job.params, lease.attempt, lease.fencing_token,
                             timeout_s=self._registry.attempt_timeout_s(job))
        self._current = context
        self._tell_held_changed()
        if self._shutting_down.is_set():  # shut down between the claim and here
            context.shutting_down.set()
        log = {"job_id": job.job_id, "attempt": lease.attempt, "type": job.type, "worker_id": self.worker_id}
        logger.info("claimed", extra=log)
        fault_point("worker.after_claim", lease.fencing_token)  # dies holding a lease nobody renews
        renewal = self._renewals(self._store, lease, context, lease_s=self._lease_s, every_s=self._heartbeat_s,
                                 clock=self._clock)
        renewal.start()
        progress = ProgressReporter(self._store, lease)  # progress (issue 38): closed before the report
        context.progress_sink = progress.report
        try:
            report = self._run_handler(lease, context, progress)
        except SimulatedCrash:
            logger.warning("worker crashed mid-job (simulated): lease left to expire", extra=log)
            raise
        finally:
            self._current = None
            self._tell_held_changed()
            progress.close()
            renewal.stop()
            self.attempts_run += 1
        logger.info("reported", extra={**log, "report": report.status.value, "state": report.job.state.value})
        if self._attempt_ended is not None:
            try:
                self._attempt_ended()
            except Exception:
                logger.exception("after the attempt: its hook failed", extra=log)

    @property
    def held(self) -> JobContext | None:
        """The job held now, if any."""
        return self._current

    def _tell_held_changed(self) -> None:
        if self._held_changed is not None:
            try:
                self._held_changed()
            except Exception:
                logger.exception("the held-job hook failed", extra={"worker_id": self.worker_id})

    def _run_handler(self, lease: Lease, context: JobContext, progress: ProgressReporter) -> Report:
        handler = self._registry.get(lease.job.type)
        if handler is None:
            error = ErrorSummary.of("UnknownJobType", f"no handler registered for {lease.job.type!r}")
            return self._fail(lease, error, permanent=True)
        with job_spans.attempt(lease, context) as attempt:
            outcome = self._handler_process.run(context, timeout_s=self._registry.attempt_timeout_s(lease.job),
                                                stop_grace_s=self._stop_grace_s)
            progress.close()
            return attempt.reported(authority.when_home(self._store, self._report), lease, context, outcome)

    def _report(self, lease: Lease, context: JobContext, outcome: Outcome) -> Report:
        log = {"job_id": lease.job_id, "attempt": lease.attempt, "worker_id": self.worker_id}
        match outcome:
            case Returned(result=result):
                fault_point("worker.before_report", lease.fencing_token)  # work done, not reported (or late)
                try:
                    return self._store.complete(lease, result)
                except InvalidRequest as error:  # the result cannot be stored: no retry can change that
                    return self._fail(lease, _unstorable(error), permanent=True)
            case Raised(ending=Ending.STOPPED):
                return self._stopped(lease, context)
            case Killed(reasons=reasons):
                logger.warning("handler ignored the stop: its process was ended",
                               extra={**log, "reasons": sorted(r.value for r in reasons)})
                return self._stopped(lease, context)
            case Raised(ending=Ending.CRASHED):
                raise SimulatedCrash()
            case Raised(ending=Ending.SNOOZED, snooze_s=float(seconds)):  # snooze (issue 37)
                policy = self._registry.policy(lease.job.type)
                return self._store.snooze(lease, seconds, max_snoozes=policy.max_snoozes, backoff=policy.backoff)
            case Raised(ending=Ending.PERMANENT, error_type=error_type, message=message):
                return self._fail(lease, ErrorSummary.of(error_type, message), permanent=True)
            case Raised(error_type=error_type, message=message, traceback=trace):  # Ending.FAILED
                logger.debug("handler failed", extra={**log, "traceback": trace})
                return self._fail(lease, ErrorSummary.of(error_type, message))
            case Unsendable(reason=reason):
                return self._fail(lease, ErrorSummary.of("UnstorableResult", f"result {reason}"),
                                        permanent=True)
            case TimedOut(timeout_s=limit):
                logger.warning("attempt timed out: its process was ended", extra={**log, "timeout_s": limit})
                return self._fail(lease, ErrorSummary.of(
                    TIMEOUT_ERROR, f"the attempt ran past its timeout of {limit:g} s and was stopped"))
            case Vanished(exitcode=exitcode):
                logger.warning("handler process ended without an answer", extra={**log, "exitcode": exitcode})
                return self._fail(lease, ErrorSummary.of(PROCESS_DIED_ERROR, _ended(exitcode)))
            case _:
                assert_never(outcome)

    def _fail(self, lease: Lease, error: ErrorSummary, *, permanent: bool = False) -> Report:
        """A failed attempt under its type's retry policy (issue 37): its delays; its permanent error types end it."""
        policy = self._registry.policy(lease.job.type)
        return self._store.fail(lease, error, permanent=permanent or policy.is_permanent(error.error_type),
                                backoff=policy.backoff)

    def _stopped(self, lease: Lease, context: JobContext) -> Report:
        """The handler stopped when asked (or was ended): a cancel is acknowledged, anything else hands the job
        back (answered `fenced` when the lease was lost to another attempt)."""
        if context.cancel_requested.is_set():
            return self._store.acknowledge_cancel(lease)
        report = self._store.release(lease)
        if self._shutting_down.is_set():
            self.attempts_handed_back += 1
        return report


class _DeferredStarts:
    """One thread per process that starts attempts' renewal threads when their first renewal is due: most
    attempts end before that and never start a thread (two thread starts and joins per job were a tenth of a
    worker's time in the soak)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, LeaseRenewal]] = []  # (monotonic time, tie-breaker, renewal): a heap
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def at(self, monotonic_s: float, renewal: LeaseRenewal) -> None:
        with self._changed:
            entry = (monotonic_s, next(self._order), renewal)
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lease-renewals", daemon=True)
                self._thread.start()
            if self._due[0] is entry:  # due before what the thread waits for (attempts of one lease come in order)
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, renewal = heapq.heappop(self._due)
            renewal.start_now()


_deferred_starts = _DeferredStarts()


class LeaseRenewal:
    """Keeps one attempt's lease while its handler runs, and tells the handler when the lease is gone.

    A thread renews the lease every `every_s`; a renewal that fails (throttled, unreachable) is logged and
    retried with backoff, at most a tenth of the lease apart. `context.lease_lost` is set only when the lease
    is really gone: the store answers that the attempt no longer holds the job, or the lease expired with no
    renewal (from then on the reaper may hand the job to another worker). A second thread watches that expiry,
    so a renewal call hanging in botocore's retries cannot keep the handler working past it. A cancel request
    seen on a renewal sets `context.cancel_requested`. Both threads start only when the first renewal is due
    (or the lease would expire sooner): an attempt that ends before starts neither."""

    def __init__(self, store: JobStore, lease: Lease, context: JobContext, *, lease_s: float, every_s: float,
                 clock: Clock) -> None:
        self._store = store
        self._lease = lease
        self._context = context
        self._lease_s = lease_s
        self._every_s = every_s
        self._clock = clock
        self._retry = BackoffPolicy(base_s=min(0.5, lease_s / 20), cap_s=lease_s / 10)
        self._expires_at = lease.lease_expires_at  # the latest expiry the store confirmed
        self._failures = 0  # renewals failed in a row
        self._done = threading.Event()
        self._starting = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Renew from `every_s` on (or from the lease's expiry, if sooner)."""
        _deferred_starts.at(time.monotonic() + max(0.0, min(self._every_s, self._left_s())), self)

    def start_now(self) -> None:
        """Start renewing and watching at once (unless the attempt is already over)."""
        with self._starting:
            if self._done.is_set() or self._threads:
                return
            self._threads = [threading.Thread(target=self._renew, daemon=True),
                             threading.Thread(target=self._watch, daemon=True)]
            for thread in self._threads:
                thread.start()

    def stop(self) -> None:
        """The attempt is over (reported, or crashed): stop renewing."""
        with self._starting:
            self._done.set()
            threads = self._threads
        for thread in threads:
            thread.join()

    def _renew(self) -> None:
        wait_s: float | None = 0.0  # started when the first renewal is due
        while not self._done.wait(wait_s) and not self._context.lease_lost.is_set():
            wait_s = self.renew_once()
            if wait_s is None:
                return

    def renew_once(self) -> float | None:
        """One renewal, now: the store's answer is told to the handler's context (`lease_lost` when the attempt
        no longer holds the job, `cancel_requested`). How long until the next renewal (sooner after a failed
        one); None when there is none to make (the lease is gone, or expired unrenewed: the watch says so)."""
        fault_point("worker.heartbeat", self._lease.fencing_token)  # a crash here stops only the renewals
        try:
            answer = authority.renew_when_home(self._store, self._lease, self._lease_s)
        except Exception:
            self._failures += 1
            left_s = self._left_s()
            logger.warning("lease renewal failed", exc_info=True, extra={
                "job_id": self._lease.job_id, "attempt": self._lease.attempt,
                "worker_id": self._lease.worker_id, "failures": self._failures, "lease_left_s": left_s})
            if left_s <= 0:
                return None
            return min(self._retry.delay(self._failures), left_s)
        if not answer.held:
            self._context.lease_lost.set()
            return None
        self._failures = 0
        self._expires_at = answer.lease_expires_at or self._expires_at
        if answer.cancel_requested:
            self._context.cancel_requested.set()
        return self._every_s

    def _watch(self) -> None:
        while (left_s := self._left_s()) > 0:
            if self._done.wait(left_s):
                return
        if not self._done.is_set():
            self.lease_expired()

    def lease_expired(self) -> None:
        """The lease expired with no renewal: from now on the reaper may hand the job to another worker, so the
        handler is told to stop (`lease_lost`)."""
        logger.warning("lease expired without renewal: stopping the work", extra={
            "job_id": self._lease.job_id, "attempt": self._lease.attempt, "worker_id": self._lease.worker_id})
        self._context.lease_lost.set()

    @property
    def expires_at(self) -> EpochMs:
        """The latest expiry of the lease the store confirmed."""
        return self._expires_at

    def _left_s(self) -> float:
        return (self._expires_at - self._clock()) / 1000


def _ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the handler's process was killed by signal {-exitcode} before it answered"
    return f"the handler's process exited (status {exitcode}) before it answered"


def _unstorable(error: InvalidRequest) -> ErrorSummary:
    """Why a result was refused: PayloadTooLarge names itself; any other refusal is an UnstorableResult."""
    return ErrorSummary.of(type(error).__name__ if isinstance(error, PayloadTooLarge) else "UnstorableResult",
                           str(error))

"""Worker: claim -> heartbeat -> run the registered handler -> complete / fail, fenced by the attempt.

A handler receives a `JobContext` carrying the fencing token (`<job_id>:<attempt>`): pass it to any
external system the job writes to, so a superseded attempt's writes can be refused there too. The heartbeat
thread renews the lease and surfaces cancellation (`context.cancel_requested`) and a lost lease
(`context.lease_lost`); a handler that stops because of either raises `context.stop_if_asked()`'s exception.
"""

from __future__ import annotations

import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from onward.backoff import BackoffPolicy
from onward.errors import PayloadTooLarge
from onward.faults import fault_point
from onward.models import ErrorSummary, Lease
from onward.store import JobStore, Report

logger = Logger(service="onward-worker")


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (bad input): the job goes straight to dead."""


class Stopped(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised by `JobContext.stop_if_asked` when the job was cancelled, the lease lost, or the worker stops."""


class SimulatedCrash(BaseException):
    """Test and demo aid: the worker dies mid-job (no report, no more heartbeats), as an OOM kill would."""


@dataclass
class JobContext:
    job_id: str
    tenant_id: str
    type: str
    params: dict[str, Any]
    attempt: int
    fencing_token: str
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    lease_lost: threading.Event = field(default_factory=threading.Event)
    shutting_down: threading.Event = field(default_factory=threading.Event)

    def should_stop(self) -> bool:
        return self.cancel_requested.is_set() or self.lease_lost.is_set() or self.shutting_down.is_set()

    def stop_if_asked(self) -> None:
        """Call at safe points in long work: raises Stopped when the job should stop here."""
        if self.should_stop():
            raise Stopped()

    def wait(self, seconds: float) -> None:
        """Sleep that wakes up (raising Stopped) as soon as the job should stop."""
        deadline = threading.Event()
        for _ in range(max(1, int(seconds / 0.05))):
            self.stop_if_asked()
            deadline.wait(min(0.05, seconds))
        self.stop_if_asked()


JobHandler = Callable[[JobContext], Any]


class Registry:
    """Job type name -> handler."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}

    def register(self, job_type: str) -> Callable[[JobHandler], JobHandler]:
        def add(handler: JobHandler) -> JobHandler:
            self._handlers[job_type] = handler
            return handler

        return add

    def get(self, job_type: str) -> JobHandler | None:
        return self._handlers.get(job_type)

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self._handlers)


class Worker:
    """One worker loop. Run several in threads for a pool; `shutdown()` releases what they hold."""

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
    ) -> None:
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        self._store = store
        self._registry = registry
        self._lease_s = lease_s
        self._heartbeat_s = heartbeat_s if heartbeat_s is not None else lease_s / 3
        # An idle worker polls less and less often (idle_s doubling up to idle_max_s, jittered): a pool
        # waiting for work costs a few claims a second instead of one per worker per idle_s.
        self._idle = BackoffPolicy(base_s=idle_s, cap_s=max(idle_s, idle_max_s))
        self._stopping = threading.Event()
        self._current: JobContext | None = None

    def shutdown(self) -> None:
        """Stop claiming; the running handler is asked to stop and its job is released."""
        self._stopping.set()
        current = self._current
        if current is not None:
            current.shutting_down.set()

    def run(self) -> None:
        """Claim and run jobs until `shutdown()`."""
        empty_claims = 0
        while not self._stopping.is_set():
            try:
                worked = self.run_once()
            except SimulatedCrash:
                continue
            except Exception:  # noqa: BLE001 - a worker loop must survive a transient store error
                logger.exception("worker loop error", extra={"worker_id": self.worker_id})
                worked = False
            empty_claims = 0 if worked else empty_claims + 1
            if empty_claims:
                self._stopping.wait(self._idle.delay(empty_claims))

    def run_once(self) -> bool:
        """Claim one job and run it to its end. False when nothing was due."""
        lease = self._store.claim(self.worker_id, self._lease_s)
        if lease is None:
            return False
        self._execute(lease)
        return True

    def _execute(self, lease: Lease) -> None:
        job = lease.job
        context = JobContext(job.job_id, job.tenant_id, job.type, job.params, lease.attempt, lease.fencing_token)
        self._current = context
        if self._stopping.is_set():
            context.shutting_down.set()
        log = {"job_id": job.job_id, "attempt": lease.attempt, "type": job.type, "worker_id": self.worker_id}
        logger.info("claimed", extra=log)
        fault_point("worker.after_claim", lease.fencing_token)  # dies holding a lease nobody renews
        done = threading.Event()
        beats = threading.Thread(target=self._heartbeat, args=(lease, context, done), daemon=True)
        beats.start()
        try:
            report = self._run_handler(lease, context)
        except SimulatedCrash:
            logger.warning("worker crashed mid-job (simulated): lease left to expire", extra=log)
            raise
        finally:
            self._current = None
            done.set()
            beats.join()
        logger.info("reported", extra={**log, "report": report.status.value, "state": report.job.state.value})

    def _run_handler(self, lease: Lease, context: JobContext) -> Report:
        handler = self._registry.get(lease.job.type)
        if handler is None:
            error = ErrorSummary.of("UnknownJobType", f"no handler registered for {lease.job.type!r}")
            return self._store.fail(lease, error, permanent=True)
        try:
            result = handler(context)
            fault_point("worker.before_report", lease.fencing_token)  # work done, not reported (or late)
        except Stopped:
            if context.cancel_requested.is_set():
                return self._store.acknowledge_cancel(lease)
            return self._store.release(lease)
        except PermanentError as error:
            return self._store.fail(lease, _summary(error), permanent=True)
        except Exception as error:  # noqa: BLE001 - any handler error is a failed attempt
            logger.debug("handler failed", extra={"traceback": traceback.format_exc()})
            return self._store.fail(lease, _summary(error))
        try:
            return self._store.complete(lease, result)
        except PayloadTooLarge as error:
            return self._store.fail(lease, _summary(error), permanent=True)

    def _heartbeat(self, lease: Lease, context: JobContext, done: threading.Event) -> None:
        while not done.wait(self._heartbeat_s):
            fault_point("worker.heartbeat", lease.fencing_token)  # a crash here stops only the heartbeats
            beat = self._store.heartbeat(lease, self._lease_s)
            if not beat.held:
                context.lease_lost.set()
                return
            if beat.cancel_requested:
                context.cancel_requested.set()


def _summary(error: BaseException) -> ErrorSummary:
    return ErrorSummary.of(type(error).__name__, str(error))

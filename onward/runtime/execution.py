"""How a job's handler runs: the `JobContext` it gets, what it may raise, and the child process it runs in,
which the worker can stop at any moment.

Each worker runs its handlers in a child process of its own (`HandlerProcess`), forked from the worker
(os.fork: the handlers, their closures and the registry are the worker's own) and kept for its next
attempts. Per attempt the worker sends the context's fields (the params pickled), the child runs the
handler and answers through a pipe: what it returned or raised. The worker keeps everything else (the lease
renewal, the reports to the store), forwards the cooperative stops to the attempt's context (cancel
requested, lease lost, shutting down), and ends the child itself: at the attempt's deadline (`TimedOut`), or
when a stop went unheeded for `stop_grace_s` (`Killed`). Ending it is SIGTERM to its process group, then
SIGKILL after KILL_GRACE_S: a handler that ignores every stop keeps its worker slot no longer than its
timeout plus that. The next attempt gets a freshly forked child.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any, NoReturn, Protocol

from onward.domain.progress import checked_progress
from onward.observability.tracing import handler_span
from onward.runtime.child_stops import EXIT_ORPHANED, ORPHAN_CHECK_S, StopReader, StopRequest
from onward.runtime.progress import ProgressNote, ProgressPipe
from onward.runtime.snooze import Snooze

KILL_GRACE_S = 2.0  # from SIGTERM to SIGKILL
EXIT_GRACE_S = 1.0  # for a child whose pipe broke to exit by itself
POLL_S = 0.05  # how often the worker looks for a stop to forward while the child runs


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (bad input): the job goes straight to dead."""


class Stopped(Exception):
    """Raised by `JobContext.stop_if_asked` when the job was cancelled, the lease lost, or the worker stops."""


class SimulatedCrash(BaseException):
    """Test and demo aid: the worker dies mid-job (no report, no more heartbeats), as an OOM kill would."""


class StopReason(Enum):
    """Why a running handler is asked to stop (each is an event on its `JobContext`)."""

    CANCEL_REQUESTED = "cancel_requested"
    LEASE_LOST = "lease_lost"
    SHUTTING_DOWN = "shutting_down"


def _sleep_polling(context: JobContext, seconds: float) -> None:
    """How `JobContext.wait` passes time in a worker: a real sleep, raising Stopped within 50 ms of a stop."""
    step = threading.Event()
    for _ in range(max(1, int(seconds / 0.05))):
        context.stop_if_asked()
        step.wait(min(0.05, seconds))


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
    timeout_s: float | None = None  # how long this attempt may run before it is stopped (None: not limited)
    # how `wait` passes time: onward.testing's harness gives one that moves its manual clock
    sleeper: Callable[[JobContext, float], None] = field(default=_sleep_polling, repr=False, compare=False)
    # progress (issue 38): where `progress` reports go (the worker's onward.runtime.progress.ProgressReporter, or
    # in a handler's child the pipe to it); None: nowhere
    progress_sink: Callable[[float, str | None], None] | None = field(default=None, repr=False, compare=False)

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the attempt got (0 to 1) and what it is doing: shown on the job's status while it
        runs; rate-limited by the worker (the latest report wins, docs/progress.md). ValueError for a fraction
        outside 0 to 1."""
        checked = checked_progress(fraction, message)
        if self.progress_sink is not None:
            self.progress_sink(*checked)
    trace_parent: str | None = None  # trace context (issue 38): the attempt span's, continued by the handler's

    def should_stop(self) -> bool:
        return self.cancel_requested.is_set() or self.lease_lost.is_set() or self.shutting_down.is_set()

    def stop_if_asked(self) -> None:
        """Call at safe points in long work: raises Stopped when the job should stop here."""
        if self.should_stop():
            raise Stopped()

    def wait(self, seconds: float) -> None:
        """Sleep that wakes up (raising Stopped) as soon as the job should stop."""
        self.sleeper(self, seconds)
        self.stop_if_asked()

    def flag(self, reason: StopReason) -> threading.Event:
        """The event that says `reason` holds."""
        event: threading.Event = getattr(self, reason.value)
        return event

    def stop_reasons(self) -> frozenset[StopReason]:
        return frozenset(reason for reason in StopReason if self.flag(reason).is_set())


JobHandler = Callable[[JobContext], Any]


# --- what an attempt came to -------------------------------------------------------------------------------

class Ending(Enum):
    """How a handler that raised ended its attempt."""

    FAILED = "failed"  # any exception: a failed attempt, retried as the policy says
    PERMANENT = "permanent"  # PermanentError: no retry
    STOPPED = "stopped"  # Stopped: it heeded a cooperative stop
    CRASHED = "crashed"  # SimulatedCrash: its worker dies as from a kill (drills)
    SNOOZED = "snoozed"  # Snooze (issue 37): run again `Raised.snooze_s` from now, no attempt charged


@dataclass(frozen=True)
class Returned:
    """The handler returned `result`."""
    result: Any


@dataclass(frozen=True)
class Raised:
    """The handler raised `error_type`; `traceback` is the child's, for the worker's debug log."""

    ending: Ending
    error_type: str
    message: str
    traceback: str = ""
    snooze_s: float | None = None  # snooze (issue 37): Ending.SNOOZED's length


@dataclass(frozen=True)
class Unsendable:
    """The handler returned a value that cannot travel back (it does not pickle): no store could keep it."""

    reason: str

    @classmethod
    def of(cls, failure: str, error: Exception) -> Unsendable:
        return cls(f"{failure}: {type(error).__name__}: {_text(error)}")


@dataclass(frozen=True)
class TimedOut:
    """The attempt ran `timeout_s` without an answer: the worker ended it."""
    timeout_s: float


@dataclass(frozen=True)
class Killed:
    """The handler was asked to stop (`reasons`) and had not answered `stop_grace_s` later: the worker ended it."""
    reasons: frozenset[StopReason]


@dataclass(frozen=True)
class Vanished:
    """The child ended without an answer (the OS killed it, the handler called os._exit, a crash in C code)."""
    exitcode: int | None


Outcome = Returned | Raised | Unsendable | TimedOut | Killed | Vanished


class HandlerLookup(Protocol):
    """What a HandlerProcess needs of the registry: the handler of a type, and a number that changes whenever
    a handler is registered (a child forked before holds the old ones)."""

    @property
    def version(self) -> int: ...

    def get(self, job_type: str) -> JobHandler | None: ...


@dataclass(frozen=True)
class AttemptRequest:
    """Worker -> child: run this attempt (the context's fields; its stops already set)."""

    job_id: str
    tenant_id: str
    type: str
    params: dict[str, Any]
    attempt: int
    fencing_token: str
    timeout_s: float | None
    stops: frozenset[StopReason]
    trace_parent: str | None = None  # trace context (issue 38)

    @classmethod
    def of(cls, context: JobContext, stops: frozenset[StopReason]) -> AttemptRequest:
        return cls(context.job_id, context.tenant_id, context.type, context.params, context.attempt,
                   context.fencing_token, context.timeout_s, stops, context.trace_parent)

    def context(self) -> JobContext:
        context = JobContext(self.job_id, self.tenant_id, self.type, self.params, self.attempt, self.fencing_token,
                             timeout_s=self.timeout_s, trace_parent=self.trace_parent)
        for reason in self.stops:
            context.flag(reason).set()
        return context


class HandlerProcess:
    """The child process a worker runs its handlers in, one attempt at a time.

    Forked on first use and kept for the next attempts (a fork costs milliseconds, and more the larger the
    worker: per attempt, it took a fifth of bench/e2e.py's throughput); forked again once it was ended (an
    attempt timed out, or ignored a stop), when it died, and when the registry changed. `close` ends it."""

    def __init__(self, handlers: HandlerLookup) -> None:
        self._handlers = handlers
        self._child: _Child | None = None
        self._lock = threading.Lock()  # close() may come from another thread (a finalizer)

    def run(self, context: JobContext, *, timeout_s: float, stop_grace_s: float) -> Outcome:
        """Runs the handler of `context.type` on `context` and returns how it ended, at most `timeout_s` after
        it started (plus KILL_GRACE_S if the child must be killed). The stops set on `context` meanwhile reach
        the handler's own context within POLL_S."""
        for _ in range(2):
            child = self._ready_child()
            outcome = child.attempt(context, timeout_s=timeout_s, stop_grace_s=stop_grace_s)
            if outcome is None:  # the child had gone while idle: a fresh one takes the attempt
                self._discard(child)
                continue
            if isinstance(outcome, TimedOut | Killed | Vanished):  # it was ended, or died: not reused
                self._discard(child)
            return outcome
        return Vanished(None)

    def close(self) -> None:
        """Ends the child, if there is one (idle: nothing is lost)."""
        with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.end()

    def _ready_child(self) -> _Child:
        with self._lock:
            child = self._child
        if child is not None and (child.exited() or child.version != self._handlers.version):
            self._discard(child)
            child = None
        if child is None:
            child = _Child(self._handlers)
            with self._lock:
                self._child = child
        return child

    def _discard(self, child: _Child) -> None:
        with self._lock:
            if self._child is child:
                self._child = None
        child.end()


class _Child:
    """One forked child, seen from the worker: send attempts, forward stops, watch deadlines, end, reap.

    Forked with os.fork and reaped only here (not through multiprocessing.Process, whose children any thread
    starting another one may reap). Its exit is watched through a pidfd where the OS has them (Linux), else by
    polling; never through its pipe, which a sibling forked later may hold open."""

    def __init__(self, handlers: HandlerLookup) -> None:
        self.version = handlers.version
        self._connection, child_end = Pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            _serve(handlers, child_end, self._connection, worker_pid)
        child_end.close()
        self._pid = pid
        with contextlib.suppress(OSError):  # the child does it too, first thing; whoever is first
            os.setpgid(pid, pid)
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # no pidfd (not Linux): _wait_exit polls
            self._pidfd = os.pidfd_open(pid)
        self._reaped = False
        self._exitcode: int | None = None  # once reaped: its exit status, or minus the signal that ended it

    def attempt(self, context: JobContext, *, timeout_s: float, stop_grace_s: float) -> Outcome | None:
        """Runs one attempt; None when the child could not be given it (it had gone)."""
        forwarded = context.stop_reasons()
        started = time.monotonic()
        try:
            self._connection.send(AttemptRequest.of(context, forwarded))
        except OSError:
            return None
        deadline = started + timeout_s
        stop_by = started + stop_grace_s if forwarded else None
        watched: list[Any] = [self._connection] if self._pidfd is None else [self._connection, self._pidfd]
        while True:
            if new := context.stop_reasons() - forwarded:
                forwarded |= new
                self._forward(context.fencing_token, new)
                stop_by = stop_by or time.monotonic() + stop_grace_s
            now = time.monotonic()
            if now >= deadline:
                return TimedOut(timeout_s)
            if stop_by is not None and now >= stop_by:
                return Killed(forwarded)
            until = deadline if stop_by is None else min(deadline, stop_by)
            wait(watched, timeout=min(POLL_S, until - now))
            if self._connection.poll():
                answer = self._receive()
                if not isinstance(answer, ProgressNote):
                    return answer
                if answer.fencing_token == context.fencing_token:  # not a note an earlier attempt left behind
                    with contextlib.suppress(Exception):  # progress is advice: it never fails the attempt
                        context.progress(answer.fraction, answer.message)
            if self.exited():  # ended without a word
                return Vanished(self._exitcode)

    def _forward(self, fencing_token: str, reasons: frozenset[StopReason]) -> None:
        for reason in reasons:
            with contextlib.suppress(OSError):  # the child has gone: the loop sees it next
                self._connection.send(StopRequest(fencing_token, reason))

    def _receive(self) -> Outcome | ProgressNote:
        try:
            answer = self._connection.recv()
        except (EOFError, OSError):
            self._wait_exit(EXIT_GRACE_S)
            return Vanished(self._exitcode)
        except Exception as error:  # noqa: BLE001 - a result that pickled in the child but will not load here
            return Unsendable.of("could not be read back", error)
        if isinstance(answer, Returned | Raised | Unsendable | ProgressNote):  # what the child sends
            return answer
        return Unsendable(f"came back as {type(answer).__name__}")  # pragma: no cover - only _serve answers

    def end(self) -> None:
        """Ends the child and whatever it started (its process group: SIGTERM, then SIGKILL), and reaps it."""
        if not self.exited():
            self._signal_group(signal.SIGTERM)
            self._wait_exit(KILL_GRACE_S)
        self._signal_group(signal.SIGKILL)  # the child if it is still there, and what it started
        self._wait_exit(None)
        self._connection.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def exited(self) -> bool:
        """Reaps the child if it has ended (never blocks)."""
        if not self._reaped:
            try:
                pid, status = os.waitpid(self._pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (a waitpid(-1) elsewhere): gone all the same
                self._reaped = True
                return True
            if pid == self._pid:
                self._reaped, self._exitcode = True, os.waitstatus_to_exitcode(status)
        return self._reaped

    def _wait_exit(self, timeout_s: float | None) -> bool:
        """Waits up to `timeout_s` (None: for as long as it takes) for the child to end; True once reaped."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.exited():
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return False
            if self._pidfd is not None:
                wait([self._pidfd], timeout=left)
            else:
                time.sleep(min(0.002, left))
        return True

    def _signal_group(self, signal_number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # no process left in the group
            os.killpg(self._pid, signal_number)
        if not self.exited():  # not yet in its own group (it joins one first thing after the fork)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal_number)


# --- in the child ----------------------------------------------------------------------------------------

def _serve(handlers: HandlerLookup, connection: Connection, worker_end: Connection, worker_pid: int) -> NoReturn:
    """The child's whole life: run the attempts its worker sends, answer each, never return (os._exit: the
    worker's clean-ups, atexit and finalizers, are not the child's to run). Between attempts the main thread
    reads the pipe itself (an attempt reaches the handler without a hand-off between threads); while one
    runs, `_StopReader` reads it for that attempt's stops."""
    try:
        gc.freeze()  # the worker's objects: this child never collects them (their finalizers are the worker's),
        # and its collections do not touch (and so copy) the pages they share with the worker
        worker_end.close()
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # a group of its own: the worker can end it with whatever it starts
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the worker's handler: SIGTERM ends the child
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the worker, which stops the child
        stops, sends = StopReader(connection, worker_pid), ProgressPipe(connection)
        _thread.start_new_thread(stops.run, ())
        while True:
            message = _next_message(connection, worker_pid)
            if not isinstance(message, AttemptRequest):
                continue  # a stop forwarded after its attempt ended
            context = message.context()
            context.progress_sink = sends.sender(message.fencing_token)
            stops.attempt_started(message.fencing_token, context)
            try:
                answer = run_handler(handlers, context)
            finally:
                stops.attempt_ended()
            try:
                sends.send(answer)
            except Exception as error:  # noqa: BLE001 - pickling the result failed: nothing was sent yet
                sends.send(Unsendable.of("does not pickle", error))
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
    finally:
        os._exit(1)  # only a broken pipe (the worker gone) or a failure of this loop gets here


def _next_message(connection: Connection, worker_pid: int) -> object:
    """The pipe's next message, read by the main thread between attempts; ends the child when the worker has
    gone (the pipe closed: EOFError, or the child handed to another parent)."""
    try:
        while not connection.poll(ORPHAN_CHECK_S):
            if os.getppid() != worker_pid:
                os._exit(EXIT_ORPHANED)
        return connection.recv()
    except (EOFError, OSError):
        os._exit(EXIT_ORPHANED)


def run_handler(handlers: HandlerLookup, context: JobContext) -> Returned | Raised:
    """Calls the handler of `context.type` on `context`: what it returned, or what it raised and how that ends
    the attempt. The child's call of every handler (and onward.testing's, in the test's own thread)."""
    handler = handlers.get(context.type)
    if handler is None:
        return Raised(Ending.PERMANENT, "UnknownJobType", f"no handler registered for {context.type!r}")
    try:
        with handler_span(context.trace_parent, context.job_id, context.type, context.attempt):
            return Returned(handler(context))
    except Stopped as error:
        return _raised(Ending.STOPPED, error)
    except Snooze as error:  # snooze (issue 37)
        return Raised(Ending.SNOOZED, type(error).__name__, _text(error), snooze_s=error.seconds)
    except PermanentError as error:
        return _raised(Ending.PERMANENT, error)
    except SimulatedCrash as error:
        return _raised(Ending.CRASHED, error)
    except BaseException as error:  # noqa: BLE001 - whatever a handler raises (SystemExit too) fails its attempt
        return _raised(Ending.FAILED, error)


def _raised(ending: Ending, error: BaseException) -> Raised:
    return Raised(ending, type(error).__name__, _text(error), traceback.format_exc())


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the failure
        return f"<{type(error).__name__} whose message could not be read>"

"""Time for handlers run in the test's own thread: a manual clock that moves only when told, and what a worker
does while time passes, done at the moments the clock passes.

In a worker (onward.runtime.worker, onward.runtime.execution) real time passes while a handler runs: a LeaseRenewal
renews the
lease every `heartbeat_s` and tells the handler's context of a cancel or a lost lease, the worker forwards those
stops to the handler's process within 50 ms, and ends the process at the attempt's timeout or when a stop goes
unheeded for `stop_grace_s`. Here the harness's `Timeline` moves the clock instead, when the handler waits
(`context.wait`) or the test says time passes (`JobHarness.advance`), and stops at each of those moments on the
way to do the same: the renewal is the worker's own LeaseRenewal (`renew_once`, `lease_expired`), made when
the clock passes its time; the stops reach the handler's context at each of those moments; at the timeout or
the grace's end the attempt is cut (`AttemptCut` raised in the handler, where a worker would kill its
process) and reported as the worker reports a TimedOut or Killed attempt.
"""

from __future__ import annotations

import heapq
import itertools
import math
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from onward.domain.clock import Clock, EpochMs, ManualClock
from onward.domain.models import Lease
from onward.runtime.execution import (
    AttemptRequest,
    HandlerLookup,
    JobContext,
    Killed,
    Outcome,
    Raised,
    Returned,
    TimedOut,
    Unsendable,
    run_handler,
)
from onward.runtime.worker import LeaseRenewal
from onward.store.service import JobStore


class AttemptCut(BaseException):
    """Raised in a handler (from `context.wait` or `JobHarness.advance`) at the moment a worker would end its
    process: its attempt's timeout passed, or it ignored a stop for `stop_grace_s`. Nothing the handler does
    after it counts (the attempt is reported as the worker reports a killed one): let it propagate."""


class TimeAlreadyMoving(RuntimeError):
    """Time was told to pass from something done while it passes (a scheduled action that moves the clock)."""


def ms_of(seconds: float) -> int:
    """Seconds as whole milliseconds, rounded up (a moment is never reached early; 1.1 s is 1100 ms, not the
    1101 its float product would give)."""
    return math.ceil(round(seconds * 1000, 6))


class _SteppedRenewal(LeaseRenewal):
    """The worker's LeaseRenewal of one attempt, its renewals made when the timeline's clock passes their time
    instead of on threads in real time: what it does at each (the store's answer told to the context, the
    lease expiring unrenewed) is LeaseRenewal's own."""

    def __init__(self, timeline: Timeline, store: JobStore, lease: Lease, context: JobContext, *, lease_s: float,
                 every_s: float, clock: Clock) -> None:
        super().__init__(store, lease, context, lease_s=lease_s, every_s=every_s, clock=clock)
        self.lease = lease
        self._timeline = timeline
        self._due_ms: int | None = None  # the next renewal (None: none to make)

    def start(self) -> None:
        """As LeaseRenewal.start: the first renewal `every_s` from now, or at the lease's expiry if sooner."""
        now = self._clock()
        self._due_ms = now + ms_of(max(0.0, min(self._every_s, (self.expires_at - now) / 1000)))
        self._timeline.renewal_started(self)

    def stop(self) -> None:
        self._due_ms = None
        self._timeline.renewal_stopped(self)

    def renew_now(self) -> None:
        """The next renewal comes now (as if its time had come just after a cancel request)."""
        if self._due_ms is not None:
            self._due_ms = self._clock()

    def step(self, now: EpochMs) -> None:
        """What is due at `now`: the renewal, then the expiry of a lease left unrenewed."""
        if self._context.lease_lost.is_set():
            return
        if self._due_ms is not None and now >= self._due_ms:
            next_s = self.renew_once()
            self._due_ms = None if next_s is None else now + ms_of(next_s)
        if not self._context.lease_lost.is_set() and now >= self.expires_at:
            self.lease_expired()
            self._due_ms = None

    def next_ms(self) -> EpochMs | None:
        if self._context.lease_lost.is_set():
            return None
        return self.expires_at if self._due_ms is None else min(self._due_ms, self.expires_at)


class _RunningAttempt:
    """One handler call under way, as the worker's side of onward.runtime.execution._Child.attempt sees it: the stops
    to forward to the handler's context, and the moments the worker would end it."""

    def __init__(self, worker_context: JobContext, handler_context: JobContext, *, started: EpochMs,
                 timeout_s: float, stop_grace_s: float) -> None:
        self.worker_context = worker_context
        self.handler_context = handler_context
        self.timeout_s = timeout_s
        self.deadline = started + ms_of(timeout_s)
        self._stop_grace_ms = ms_of(stop_grace_s)
        self.forwarded = worker_context.stop_reasons()  # set before the attempt: sent with it
        self.stop_by = started + self._stop_grace_ms if self.forwarded else None
        self.cut: TimedOut | Killed | None = None

    def step(self, now: EpochMs) -> None:
        """Forwards the stops set on the worker's context since the last step; cuts the attempt at its
        deadline, or once a stop went unheeded for the grace (the deadline first, as the worker checks)."""
        if new := self.worker_context.stop_reasons() - self.forwarded:
            self.forwarded |= new
            for reason in new:
                self.handler_context.flag(reason).set()
            self.stop_by = self.stop_by or now + self._stop_grace_ms
        if self.cut is None and now >= self.deadline:
            self.cut = TimedOut(self.timeout_s)
        elif self.cut is None and self.stop_by is not None and now >= self.stop_by:
            self.cut = Killed(self.forwarded)

    def next_ms(self) -> EpochMs:
        return self.deadline if self.stop_by is None else min(self.deadline, self.stop_by)


class Timeline:
    """The harness's clock and what happens as it moves: actions scheduled at a moment (a tenant's cancel),
    the running attempt's lease renewals, and the moments its worker would end it."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._actions: list[tuple[EpochMs, int, Callable[[], object]]] = []  # a heap, by moment then order
        self._order = itertools.count()
        self._renewals: list[_SteppedRenewal] = []  # of the attempt under way (one: the harness runs one)
        self._attempt: _RunningAttempt | None = None
        self._moving = False
        self.action_error: BaseException | None = None  # what a scheduled action raised, for the test to see
        self.last_lease: Lease | None = None  # of the last attempt claimed

    def renewal(self, store: JobStore, lease: Lease, context: JobContext, *, lease_s: float, every_s: float,
                clock: Clock) -> LeaseRenewal:
        """The Worker's RenewalFactory: a LeaseRenewal that renews as this timeline passes its times."""
        self.last_lease = lease
        return _SteppedRenewal(self, store, lease, context, lease_s=lease_s, every_s=every_s, clock=clock)

    def renewal_started(self, renewal: _SteppedRenewal) -> None:
        self._renewals.append(renewal)

    def renewal_stopped(self, renewal: _SteppedRenewal) -> None:
        if renewal in self._renewals:
            self._renewals.remove(renewal)

    def at(self, moment: EpochMs, action: Callable[[], object]) -> None:
        """Do `action` when the clock reaches `moment` (at once if it has)."""
        heapq.heappush(self._actions, (moment, next(self._order), action))
        if moment <= self.clock() and not self._moving:  # (while moving, the loop does it at this moment)
            self.catch_up()

    def next_action_ms(self) -> EpochMs | None:
        return self._actions[0][0] if self._actions else None

    def renew_now(self, job_id: str) -> bool:
        """The running attempt of `job_id`, if any, renews its lease now (and so learns of a cancel request);
        whether there was one."""
        found = [renewal for renewal in self._renewals if renewal.lease.job_id == job_id]
        for renewal in found:
            renewal.renew_now()
        if found and not self._moving:  # (while moving, the loop renews at this moment)
            self.catch_up()
        return bool(found)

    def catch_up(self) -> None:
        """Do what is due at the clock's moment, without moving it."""
        self.advance_to(self.clock())

    def advance_to(self, target: EpochMs, *, waiting: JobContext | None = None) -> None:
        """Moves the clock to `target`, stopping at each moment something is due on the way to do it. Inside a
        handler: raises AttemptCut once the worker would have ended it; with `waiting` (the handler's context,
        from `context.wait`), returns as soon as it should stop, as the worker's wait does."""
        if self._moving:
            raise TimeAlreadyMoving("an action done while time passes cannot move the clock itself")
        self._moving = True
        try:
            while True:
                now = self.clock()
                while self._actions and self._actions[0][0] <= now:
                    try:
                        heapq.heappop(self._actions)[2]()
                    except BaseException as error:
                        self.action_error = error  # the test's error, not the handler's: raised from the attempt
                        raise
                for renewal in list(self._renewals):
                    renewal.step(now)
                attempt = self._attempt
                if attempt is not None:
                    attempt.step(now)
                    if attempt.cut is not None:
                        raise AttemptCut()
                if now >= target or (waiting is not None and waiting.should_stop()):
                    return
                upcoming = [moment for moment in (self.next_action_ms(), None if attempt is None else attempt.next_ms(),
                                                  *(renewal.next_ms() for renewal in self._renewals))
                            if moment is not None and moment > now]
                self.clock.now = min([target, *upcoming])
        finally:
            self._moving = False

    def sleeper(self, context: JobContext, seconds: float) -> None:
        """`JobContext.wait` here: the clock moves `seconds` on, or until the handler should stop."""
        if not context.should_stop():
            self.advance_to(self.clock() + ms_of(seconds), waiting=context)

    @contextmanager
    def running(self, attempt: _RunningAttempt) -> Iterator[None]:
        self._attempt = attempt
        try:
            yield
        finally:
            self._attempt = None


class InlineRunner:
    """The Worker's HandlerRunner here: the handler runs in the calling thread, on a context made as the child
    makes it (onward.runtime.execution.AttemptRequest, pickled there and back: the params are the handler's own copy)
    and called as the child calls it (onward.runtime.execution.run_handler); what it returns is pickled back as the
    child's answer is (a result that does not pickle is Unsendable). What it cannot do in one thread: end a
    handler that never waits nor lets time pass (it runs on; a worker would end it at its timeout), nor
    survive a handler that ends the process (os._exit): raise SimulatedCrash to drill a dying worker."""

    def __init__(self, handlers: HandlerLookup, timeline: Timeline) -> None:
        self._handlers = handlers
        self._timeline = timeline

    def run(self, context: JobContext, *, timeout_s: float, stop_grace_s: float) -> Outcome:
        request: AttemptRequest = pickle.loads(pickle.dumps(AttemptRequest.of(context, context.stop_reasons())))
        handler_context = request.context()
        handler_context.sleeper = self._timeline.sleeper
        attempt = _RunningAttempt(context, handler_context, started=self._timeline.clock(), timeout_s=timeout_s,
                                  stop_grace_s=stop_grace_s)
        with self._timeline.running(attempt):
            answer = run_handler(self._handlers, handler_context)
            attempt.step(self._timeline.clock())  # the clock moved by hand past a deadline: the worker's too
        if (error := self._timeline.action_error) is not None:
            self._timeline.action_error = None
            raise error  # an action the test scheduled failed in the handler's wait: the test fails, not the job
        if attempt.cut is not None:
            return attempt.cut
        if isinstance(answer, Raised) and answer.error_type == KeyboardInterrupt.__name__:
            raise KeyboardInterrupt  # Ctrl-C in the test: in a worker it reaches the worker, not the handler
        return _sent_back(answer)

    def close(self) -> None:
        """Nothing to end: no process, no thread."""


def _sent_back(answer: Returned | Raised) -> Outcome:
    """The answer as the worker receives it from the child: pickled and loaded again."""
    try:
        sent = pickle.dumps(answer)
    except Exception as error:  # noqa: BLE001 - any pickling failure is the result's (as the child's send)
        return Unsendable.of("does not pickle", error)
    try:
        received: Outcome = pickle.loads(sent)
    except Exception as error:  # noqa: BLE001 - a result that pickles but will not load (as the worker's recv)
        return Unsendable.of("could not be read back", error)
    return received


__all__ = ["AttemptCut", "InlineRunner", "TimeAlreadyMoving", "Timeline"]

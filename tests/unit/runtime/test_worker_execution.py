"""The handler process (onward.runtime.execution.HandlerProcess) on its own, with no store: what comes back from a
handler, how the worker ends one that will not stop, and that no process outlives its attempt or its worker.

Handlers run in a child forked from this test: what they tell the test goes through their result, or a queue
created before the fork."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import threading
import time
from typing import Any

import pytest

from onward.runtime.execution import (
    KILL_GRACE_S,
    ORPHAN_CHECK_S,
    Ending,
    HandlerProcess,
    JobContext,
    JobHandler,
    Killed,
    PermanentError,
    Raised,
    Returned,
    SimulatedCrash,
    Stopped,
    StopReason,
    TimedOut,
    Unsendable,
    Vanished,
)
from onward_infra_tests.processes import eventually_gone, gone

FORK = multiprocessing.get_context("fork")


class Handlers:
    """A registry stand-in: type -> handler, with the version a HandlerProcess watches."""

    def __init__(self, **handlers: JobHandler) -> None:
        self.handlers = {name.replace("_", "."): handler for name, handler in handlers.items()}
        self.version = 1

    def get(self, job_type: str) -> JobHandler | None:
        return self.handlers.get(job_type)


def context(job_type: str, params: dict[str, Any] | None = None, attempt: int = 1) -> JobContext:
    job_id = os.urandom(16).hex()
    return JobContext(job_id, "acme", job_type, params or {}, attempt, f"{job_id}:{attempt}", timeout_s=30.0)


def pid_of(context: JobContext) -> int:
    return os.getpid()


def hang(context: JobContext) -> None:
    time.sleep(60)  # deaf to every stop


@pytest.fixture
def process_of():
    """HandlerProcess factory; every one is closed at the end of the test."""
    made: list[HandlerProcess] = []

    def make(handlers: Handlers) -> HandlerProcess:
        made.append(HandlerProcess(handlers))
        return made[-1]

    yield make
    for process in made:
        process.close()


def test_a_result_comes_back_from_a_child_that_serves_the_next_attempts_too(process_of):
    """Catches a handler run in the worker's own process (the worker could not stop it), and a child forked
    for every attempt (milliseconds each, which the kept child saves)."""
    def echo(context: JobContext) -> dict[str, Any]:
        return {"pid": os.getpid(), "job_id": context.job_id, "token": context.fencing_token,
                "attempt": context.attempt, "params": context.params, "timeout_s": context.timeout_s}

    process = process_of(Handlers(t_echo=echo))
    first_context = context("t.echo", {"a": [1, "two"]}, attempt=3)
    first = process.run(first_context, timeout_s=30, stop_grace_s=5)
    second = process.run(context("t.echo"), timeout_s=30, stop_grace_s=5)
    assert isinstance(first, Returned) and isinstance(second, Returned)
    assert first.result == {"pid": first.result["pid"], "job_id": first_context.job_id,
                            "token": first_context.fencing_token, "attempt": 3, "params": {"a": [1, "two"]},
                            "timeout_s": 30.0}
    assert first.result["pid"] != os.getpid()
    assert second.result["pid"] == first.result["pid"]


@pytest.mark.parametrize(("error", "ending", "error_type"), [
    (ValueError("bad input \udcff"), Ending.FAILED, "ValueError"),
    (PermanentError("never valid"), Ending.PERMANENT, "PermanentError"),
    (Stopped(), Ending.STOPPED, "Stopped"),
    (SimulatedCrash(), Ending.CRASHED, "SimulatedCrash"),
    (SystemExit(3), Ending.FAILED, "SystemExit"),
    (KeyboardInterrupt(), Ending.FAILED, "KeyboardInterrupt"),
], ids=["error", "permanent", "stopped", "crash", "sys.exit", "keyboard interrupt"])
def test_what_a_handler_raises_comes_back_with_its_type(process_of, error, ending, error_type):
    """Catches an exception lost on the way back (the attempt would look vanished or succeeded), a
    PermanentError retried, and a sys.exit() in a handler taking the worker down with it."""
    def raises(context: JobContext) -> None:
        raise error

    process = process_of(Handlers(t_raise=raises, t_pid=pid_of))
    outcome = process.run(context("t.raise"), timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Raised)
    assert (outcome.ending, outcome.error_type, outcome.message) == (ending, error_type, str(error))
    assert isinstance(process.run(context("t.pid"), timeout_s=30, stop_grace_s=5), Returned), "still serving"


def test_a_handler_deaf_to_stops_is_ended_at_its_deadline_and_the_next_attempt_gets_a_fresh_child(process_of):
    """Catches a deadline that is not enforced (the slot held for the handler's whole minute) and a child
    reused after it was killed."""
    told = FORK.SimpleQueue()

    def hang_telling(context: JobContext) -> None:
        told.put(os.getpid())
        time.sleep(60)

    process = process_of(Handlers(t_hang=hang_telling, t_pid=pid_of))
    started = time.monotonic()
    outcome = process.run(context("t.hang"), timeout_s=0.5, stop_grace_s=5)
    took = time.monotonic() - started
    assert outcome == TimedOut(0.5)
    assert 0.5 <= took < 0.5 + KILL_GRACE_S
    hung = told.get()
    assert gone(hung)
    after = process.run(context("t.pid"), timeout_s=30, stop_grace_s=5)
    assert isinstance(after, Returned) and after.result != hung


def test_a_handler_that_ignores_sigterm_is_killed(process_of):
    """Catches an end that only asks (SIGTERM): a handler that catches it would keep the slot."""
    told = FORK.SimpleQueue()

    def stubborn(context: JobContext) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        told.put(os.getpid())
        time.sleep(60)

    process = process_of(Handlers(t_stubborn=stubborn))
    started = time.monotonic()
    assert process.run(context("t.stubborn"), timeout_s=0.5, stop_grace_s=5) == TimedOut(0.5)
    assert time.monotonic() - started < 0.5 + KILL_GRACE_S + 1
    assert gone(told.get())


def test_what_a_handler_started_ends_with_it(process_of):
    """Catches a timed-out handler's own subprocess left running (its work going on after the attempt was
    declared failed and retried elsewhere)."""
    told = FORK.SimpleQueue()

    def spawner(context: JobContext) -> None:
        sleeper = subprocess.Popen(["sleep", "60"])
        told.put(sleeper.pid)
        time.sleep(60)

    process = process_of(Handlers(t_spawn=spawner))
    assert isinstance(process.run(context("t.spawn"), timeout_s=1, stop_grace_s=5), TimedOut)
    assert eventually_gone(told.get(), within_s=2)


def test_a_stop_reaches_the_handler_and_a_stop_set_before_the_attempt_too(process_of):
    """Catches cancellation that no longer reaches a handler in a child (it would run to its end), and a stop
    set before the attempt started (a worker shutting down) lost on the way."""
    def sleeps(context: JobContext) -> str:
        context.wait(30)
        return "slept"

    process = process_of(Handlers(t_sleep=sleeps))
    running = context("t.sleep")
    threading.Timer(0.3, running.cancel_requested.set).start()
    started = time.monotonic()
    outcome = process.run(running, timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Raised) and outcome.ending is Ending.STOPPED
    assert time.monotonic() - started < 2
    already = context("t.sleep")
    already.shutting_down.set()
    outcome = process.run(already, timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Raised) and outcome.ending is Ending.STOPPED


def test_a_stop_arriving_after_its_attempt_touches_neither_the_child_nor_the_next_attempt(process_of):
    """Between attempts the child's main thread reads the pipe; during one its stop reader does. Catches a
    late stop (forwarded as its attempt ended) taken for an attempt, or set on the next attempt's context, and
    an attempt read by the stop reader and lost (the next run would wait until its timeout)."""

    def naps(context: JobContext) -> tuple[int, str, bool]:
        if context.params.get("nap"):
            context.wait(0.3)  # raises Stopped if a stop reached this attempt
        return os.getpid(), context.job_id, context.should_stop()

    process = process_of(Handlers(t_nap=naps))
    first = context("t.nap")
    outcome = process.run(first, timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Returned)
    child_pid = outcome.result[0]
    for number in range(20):
        process._child._forward(first.fencing_token, frozenset({StopReason.CANCEL_REQUESTED}))
        started = time.monotonic()
        attempt = context("t.nap", {"nap": number % 2}, attempt=2)
        outcome = process.run(attempt, timeout_s=30, stop_grace_s=5)
        assert outcome == Returned((child_pid, attempt.job_id, False)), number
        assert time.monotonic() - started < 5


def test_a_stop_the_handler_ignores_ends_its_child_after_the_grace(process_of):
    """Catches a cancelled (or lease-lost, or shutting-down) handler that ignores the stop keeping its slot
    until its timeout: the worker ends it stop_grace_s after asking."""
    process = process_of(Handlers(t_hang=hang))
    running = context("t.hang")
    threading.Timer(0.2, running.lease_lost.set).start()
    started = time.monotonic()
    outcome = process.run(running, timeout_s=30, stop_grace_s=0.5)
    assert outcome == Killed(frozenset({StopReason.LEASE_LOST}))
    assert time.monotonic() - started < 0.2 + 0.5 + KILL_GRACE_S


@pytest.mark.parametrize("result", [lambda: None, threading.Lock()], ids=["lambda", "lock"])
def test_a_result_that_cannot_travel_back_is_unsendable_and_the_child_serves_on(process_of, result):
    """Catches a result that does not pickle killing the child's answer (the attempt would hang to its
    timeout) or the child itself."""
    process = process_of(Handlers(t_odd=lambda context: result, t_pid=pid_of))
    outcome = process.run(context("t.odd"), timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Unsendable) and outcome.reason.startswith("does not pickle")
    assert isinstance(process.run(context("t.pid"), timeout_s=30, stop_grace_s=5), Returned)


@pytest.mark.parametrize(("die", "exitcode"), [
    (lambda: os._exit(3), 3), (lambda: os.kill(os.getpid(), signal.SIGKILL), -signal.SIGKILL),
], ids=["os._exit", "SIGKILL"])
def test_a_child_that_dies_mid_attempt_is_reported_vanished_and_replaced(process_of, die, exitcode):
    """Catches a worker that waits for an answer that will never come (until the timeout), and one that
    keeps handing attempts to a dead child."""
    process = process_of(Handlers(t_die=lambda context: die(), t_pid=pid_of))
    started = time.monotonic()
    assert process.run(context("t.die"), timeout_s=30, stop_grace_s=5) == Vanished(exitcode)
    assert time.monotonic() - started < 2
    assert isinstance(process.run(context("t.pid"), timeout_s=30, stop_grace_s=5), Returned)


def test_a_handler_registered_after_the_fork_is_run_by_a_new_child(process_of):
    """Catches a kept child that only knows the handlers of its fork: a type registered later would be
    unknown to it, one registered again would run its old code."""
    handlers = Handlers(t_pid=pid_of)
    process = process_of(handlers)
    first = process.run(context("t.pid"), timeout_s=30, stop_grace_s=5)
    handlers.handlers["t.late"] = lambda context: ("late", os.getpid())
    handlers.version += 1
    late = process.run(context("t.late"), timeout_s=30, stop_grace_s=5)
    assert isinstance(first, Returned) and isinstance(late, Returned)
    assert late.result[0] == "late" and late.result[1] != first.result
    assert gone(first.result)


def test_close_ends_the_child_and_a_child_outlives_no_worker(process_of):
    """Catches children left behind: by close (a worker that stopped), and by a worker process that died
    without closing anything (kill -9): each child ends within ORPHAN_CHECK_S."""
    process = process_of(Handlers(t_pid=pid_of))
    outcome = process.run(context("t.pid"), timeout_s=30, stop_grace_s=5)
    assert isinstance(outcome, Returned)
    process.close()
    assert gone(outcome.result)

    told = FORK.SimpleQueue()
    worker = os.fork()
    if worker == 0:  # a worker process that starts a child, then dies without a word
        try:
            orphan = HandlerProcess(Handlers(t_pid=pid_of))
            answer = orphan.run(context("t.pid"), timeout_s=30, stop_grace_s=5)
            told.put(answer.result if isinstance(answer, Returned) else None)
        finally:
            os._exit(0)
    os.waitpid(worker, 0)
    orphan_pid = told.get()
    assert orphan_pid is not None
    assert eventually_gone(orphan_pid, within_s=ORPHAN_CHECK_S + 2)

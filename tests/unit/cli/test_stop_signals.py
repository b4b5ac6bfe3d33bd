"""StopSignals: how `onward worker`, `onward endpoint` and `onward up` wait for Ctrl-C or SIGTERM. Python runs a
signal's handler in the main thread between two bytecodes, wherever that thread is: inside a print, inside
Event.wait holding the Event's lock, between a `with`'s acquire and its exit."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from onward.cli.arguments import StopSignals

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def handlers_restored() -> Iterator[None]:
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def test_a_signal_while_the_main_thread_holds_an_events_lock_is_counted_without_waiting_for_it() -> None:
    """The endpoint's CI failure: a SIGINT that came inside Event.wait (its lock held by the main thread) raised
    KeyboardInterrupt there and the command's `stop.set()` then waited forever for that lock; a handler calling
    `stop.set()` would wait for it the same way. Breaks (hangs) with a handler that takes any lock."""
    event = threading.Event()
    signals = StopSignals()
    with event._cond:  # as Event.wait holds it between checking the flag and sleeping on its condition
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecodes: the main thread runs the pending handler at one of them
            if signals.count:
                break
    assert signals.count == 1
    signals.wait()  # returns: the signal came before the wait


def test_sigterm_and_sigint_both_count_even_where_sigint_started_ignored() -> None:
    """A shell's background job starts with SIGINT ignored, and Ctrl-C must still stop it. Breaks without
    StopSignals installing its handler for both signals."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signals = StopSignals()
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
    signals.wait()
    os.kill(os.getpid(), signal.SIGINT)
    signals.wait(beyond=1)
    assert signals.count == 2


def test_the_second_signal_is_what_a_drain_is_hurried_by() -> None:
    """`onward worker`: the first signal starts the graceful stop, the second releases the running jobs at once
    (`pool.drain(hurried=lambda: signals.count > 1)`)."""
    signals = StopSignals()
    os.kill(os.getpid(), signal.SIGTERM)
    signals.wait()
    assert signals.count == 1
    os.kill(os.getpid(), signal.SIGINT)
    signals.wait(beyond=1)
    assert signals.count > 1

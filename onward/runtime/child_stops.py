"""What a handler's child process reads from its pipe while an attempt runs: the stops its worker forwards
(StopRequest), read by a thread of its own (StopReader), and when to give up on a worker that went away."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onward.runtime.execution import JobContext, StopReason

ORPHAN_CHECK_S = 0.5  # how often a child checks that its worker is still there
EXIT_ORPHANED = 70  # a child whose worker went away ends at once: its attempt is nobody's now


@dataclass(frozen=True)
class StopRequest:
    """Worker -> child: the attempt `fencing_token` is asked to stop for `reason`."""

    fencing_token: str
    reason: StopReason


class StopReader:
    """Reads the pipe while an attempt runs (and only then: between attempts the main thread reads it, so the
    two never read at once) and sets the stops the worker forwards on that attempt's context. Ends the child
    when the worker has gone or the pipe is unreadable."""

    def __init__(self, connection: Connection, worker_pid: int) -> None:
        self._connection = connection
        self._worker_pid = worker_pid
        self._lock = threading.Lock()  # held while reading, and to start or end an attempt
        self._current: tuple[str, JobContext] | None = None
        self._running = threading.Event()

    def attempt_started(self, fencing_token: str, context: JobContext) -> None:
        with self._lock:
            self._current = (fencing_token, context)
        self._running.set()

    def attempt_ended(self) -> None:
        """From now on the main thread reads the pipe (returns once a read under way has ended)."""
        with self._lock:
            self._current = None
            self._running.clear()

    def run(self) -> None:
        try:
            while True:
                self._running.wait()
                if not self._connection.poll(ORPHAN_CHECK_S):
                    if os.getppid() != self._worker_pid:
                        break
                    continue
                with self._lock:
                    if self._current is None or not self._connection.poll(0):
                        continue  # the attempt ended: what arrived is the main thread's to read
                    message = self._connection.recv()
                    if isinstance(message, StopRequest) and self._current[0] == message.fencing_token:
                        self._current[1].flag(message.reason).set()
        except BaseException:  # noqa: BLE001 - EOF (the worker closed it), or anything: a deaf child must not live
            pass
        os._exit(EXIT_ORPHANED)

"""A running handler's progress (issue 38), from `JobContext.progress(fraction, message)` to the store.

In the worker, one ProgressReporter per attempt takes every report and writes at most one update per
`interval_s` (2 s by default) through JobStore.report_progress: the first report at once, then the latest one
once the interval since the previous write has passed. Reports in between replace each other (the latest wins)
and none is left behind: a value still pending when the handler goes quiet is written when its interval ends,
by the reporter's own thread, so the last report before a quiet period is always written (unless the attempt
ends first: its final status replaces any progress anyway). Each write has the next sequence number of the
attempt; a write that failed (throttled, a conflict) is tried again with the latest value at the next
interval. Once the store says the attempt no longer holds the job, the reporter stops writing. `close()`
ends it before the worker reports the attempt's outcome, waiting for a write under way, so a progress write
never races the attempt's own report.

In a handler's child process (onward.runtime.execution), the context's reports go to the worker through the
child's pipe as ProgressNote messages (ProgressPipe), and the worker hands them to the attempt's reporter.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

from aws_lambda_powertools import Logger

from onward.domain.models import Lease
from onward.domain.progress import checked_progress
from onward.store.progress import ProgressAnswer

logger = Logger(service="onward-worker")

PROGRESS_INTERVAL_S = 2.0  # at most one progress write per attempt in this time


class ProgressStore(Protocol):
    def report_progress(self, lease: Lease, *, version: int, seq: int, fraction: float,
                        message: str | None) -> ProgressAnswer: ...


class ProgressReporter:
    """One attempt's progress, rate-limited to one write per `interval_s` (thread-safe)."""

    def __init__(self, store: ProgressStore, lease: Lease, *, interval_s: float = PROGRESS_INTERVAL_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._lease = lease
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._version = lease.job.version
        self._seq = 0
        self._pending: tuple[float, str | None] | None = None
        self._last_write = -float("inf")
        self._ended = False  # closed, or the attempt lost the job
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self.written = 0  # updates the store wrote

    def report(self, fraction: float, message: str | None = None) -> None:
        """Take a report (checked: onward.domain.progress.checked_progress); it is written within `interval_s`
        unless a newer one replaces it first."""
        value = checked_progress(fraction, message)
        with self._changed:
            if self._ended:
                return
            self._pending = value
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"progress-{self._lease.fencing_token}",
                                                daemon=True)
                self._thread.start()
            self._changed.notify()

    def close(self) -> None:
        """The attempt is over: drop what is pending, and return once a write under way has ended."""
        with self._changed:
            self._ended = True
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while (taken := self._next()) is not None:
            seq, (fraction, message) = taken
            try:
                answer = self._store.report_progress(self._lease, version=self._version, seq=seq,
                                                     fraction=fraction, message=message)
            except Exception:
                logger.warning("progress write failed; the latest value is tried again", exc_info=True,
                               extra={"job_id": self._lease.job_id, "attempt": self._lease.attempt})
                self._retry((fraction, message))
                continue
            self._version = answer.version
            if not answer.held:
                with self._changed:
                    self._ended = True
                return
            if answer.written:
                self.written += 1
            else:
                self._retry((fraction, message))

    def _next(self) -> tuple[int, tuple[float, str | None]] | None:
        """Waits for a pending value and the end of the interval since the last write; None once ended."""
        with self._changed:
            while not self._ended:
                wait_s = self._last_write + self._interval_s - self._monotonic()
                if self._pending is not None and wait_s <= 0:
                    value, self._pending = self._pending, None
                    self._seq += 1
                    self._last_write = self._monotonic()
                    return self._seq, value
                self._changed.wait(None if self._pending is None else wait_s)
            return None

    def _retry(self, value: tuple[float, str | None]) -> None:
        with self._changed:
            if self._pending is None:
                self._pending = value


@dataclass(frozen=True)
class ProgressNote:
    """Child -> worker: attempt `fencing_token` reported progress."""

    fencing_token: str
    fraction: float
    message: str | None


class ProgressPipe:
    """The child's side of its pipe for what it sends while and after an attempt runs: progress notes (from
    any thread of the handler) and the attempt's answer, one send at a time."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    def sender(self, fencing_token: str) -> Callable[[float, str | None], None]:
        """The progress sink of attempt `fencing_token`'s context in the child."""
        def send(fraction: float, message: str | None) -> None:
            with contextlib.suppress(OSError):  # the worker has gone (the child ends soon): never the handler's error
                self.send(ProgressNote(fencing_token, fraction, message))
        return send

    def send(self, message: object) -> None:
        with self._lock:
            self._connection.send(message)

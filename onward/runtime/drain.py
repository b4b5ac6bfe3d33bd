"""Running due jobs for a bounded time with a few workers at once: what one invocation of the Lambda worker
(onward/entrypoints/worker.py) does, with no knowledge of Lambda.

`Drain(workers, time_left_s=..., reserve_s=lease).run()` runs each worker's `run_once` (claim the job the
store's fair claim picks, run it to its end) in a thread of its own, again and again, until either

- nothing is due: a claim found nothing and no other worker of the drain is running a job (inside a
  `run_once` it entered before this claim began), or
- time is short: at most `reserve_s` is left (a lease: a job claimed later could not run a lease's worth
  before the caller's time ends).

A worker whose claim found nothing while another still runs a job does not end: it claims again after a
short jittered wait (IDLE_POLL: 0.125 to 0.25 s at first, doubling up to 0.5 to 1 s). On Lambda the
invocation lasts as long as its longest job anyway, and the wake-ups that arrive meanwhile for the same stream
slot wait behind it: without these claims a job created then would wait for that job to end instead of
starting within a second.

A job's failure is the job's (its retry policy decides); what the drain reports is whether the store could
be worked at all: `answered` is false only when every `run_once` it made raised.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aws_lambda_powertools import Logger

from onward.domain.backoff import BackoffPolicy
from onward.domain.errors import RegionFenced
from onward.runtime.execution import SimulatedCrash

logger = Logger(service="onward-worker")

# How soon a worker whose claim found nothing claims again while a sibling still runs a job.
IDLE_POLL = BackoffPolicy(base_s=0.25, cap_s=1.0)


class JobRunner(Protocol):
    """What the drain drives: onward.runtime.worker.Worker's `run_once`."""

    def run_once(self) -> bool:
        """Claim one job and run it to its end; False when nothing was due."""
        ...


@dataclass(frozen=True)
class DrainReport:
    """What a drain did. `ran`: jobs claimed and run (a simulated crash counts: its job was claimed).
    `empty_claims`: claims that found nothing due. `failures`: `run_once` calls that raised.
    `out_of_time`: a worker stopped because at most `reserve_s` was left (jobs may still be due)."""

    ran: int
    empty_claims: int
    failures: int
    out_of_time: bool

    @property
    def answered(self) -> bool:
        """Whether the store answered at least once (a claim, empty or not, that did not raise), or nothing was
        tried. False means this drain could not work at all (the store unreachable, throttled, misnamed)."""
        return self.failures == 0 or self.ran + self.empty_claims > 0


class Drain:
    """`workers` (one thread each) claiming and running due jobs until nothing is due or at most `reserve_s`
    of `time_left_s()` is left. `time_left_s` is called from the workers' threads. One use per instance."""

    def __init__(self, workers: Sequence[JobRunner], *, time_left_s: Callable[[], float], reserve_s: float,
                 idle: BackoffPolicy = IDLE_POLL, sleep: Callable[[float], None] = time.sleep) -> None:
        if not workers:
            raise ValueError("a drain needs at least one worker")
        self._workers = list(workers)
        self._time_left_s = time_left_s
        self._reserve_s = reserve_s
        self._idle = idle
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tickets = itertools.count()  # the order in which workers entered run_once
        self._running: dict[int, int] = {}  # worker index -> its ticket, while inside run_once
        self._ran = self._empty = self._failures = 0
        self._out_of_time = False

    def run(self) -> DrainReport:
        """Drain in the workers' threads; returns when every one has stopped."""
        threads = [threading.Thread(target=self._loop, args=(n, worker), name=f"drain-{n}", daemon=True)
                   for n, worker in enumerate(self._workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return DrainReport(ran=self._ran, empty_claims=self._empty, failures=self._failures,
                           out_of_time=self._out_of_time)

    def _loop(self, me: int, worker: JobRunner) -> None:
        empty_in_a_row = 0
        while True:
            left_s = self._time_left_s()
            if left_s <= self._reserve_s:
                with self._lock:
                    self._out_of_time = True
                return
            with self._lock:
                ticket = next(self._tickets)
                self._running[me] = ticket
            worked = self._run_once(worker)
            with self._lock:
                del self._running[me]
                # A sibling that entered run_once before this claim did is running a job (or a claim that
                # outlasted this one); one that entered later is only claiming, as this worker just did: two
                # idle workers waiting for each other would never end.
                sibling_working = any(other < ticket for other in self._running.values())
            if worked:
                empty_in_a_row = 0
                continue
            if not sibling_working:
                return  # nothing due, and no sibling holds a job that could end and make room
            empty_in_a_row += 1
            self._sleep(min(self._idle.delay(empty_in_a_row), max(0.0, left_s - self._reserve_s)))

    def _run_once(self, worker: JobRunner) -> bool:
        """One claim-and-run; counts what happened. True when a job was claimed."""
        try:
            worked = worker.run_once()
        except SimulatedCrash:  # a demo/drill crash: the job's lease is left to lapse, the reaper hands it back
            logger.warning("worker crashed mid-job (simulated): lease left to expire")
            worked = True
        except RegionFenced as fenced:  # not home, or fenced by the region epoch (issue 39): not a failure
            logger.warning("the attempt's report was dropped: this Region is not home", extra={"error": str(fenced)})
            worked = True
        except Exception:
            logger.exception("claiming or running a job failed")
            with self._lock:
                self._failures += 1
            return False
        with self._lock:
            if worked:
                self._ran += 1
            else:
                self._empty += 1
        return worked

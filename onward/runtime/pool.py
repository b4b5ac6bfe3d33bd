"""A pool of Workers in one process, each on its own thread: the production runtime of `onward worker` (and
of the local platform's workers). Knows nothing of local emulation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from onward.runtime.declared_types import declare_types
from onward.runtime.task_protection import ProtectionKeeper, TaskProtection
from onward.runtime.worker import Registry, Worker
from onward.store.service import JobStore
from onward.telemetry import OverlapsPublisher

RELEASE_WAIT_S = 15.0  # after the stop grace: for a released job's report to commit (botocore's retries)
JOIN_POLL_S = 0.1


@dataclass(frozen=True)
class Drained:
    """How a graceful stop went. `held`: the jobs held during it (running when it began, or claimed by a claim
    already under way then). `ended`: those whose attempt ended by itself (reported) within the stop timeout.
    `released`: those still running at the stop timeout and so handed back, not charged an attempt. `stuck`:
    worker threads still alive after it all (a release that could not commit in time: that job's lease lapses
    and the reaper hands it back; counted in `held` only)."""

    held: int
    ended: int
    released: int
    stuck: int


class WorkerPool:
    """`size` Workers (ids w-00, w-01, ...) claiming from one store with the handlers of `registry`, each
    lease `lease_s` long, publishing the AttemptOverlaps metric after each attempt that found any (`overlaps`).
    `drain` stops them gracefully (running jobs may end first), `stop` at once (a
    running job is asked to stop and released); both join their threads."""

    def __init__(self, store: JobStore, registry: Registry, size: int, lease_s: float, *,
                 stop_grace_s: float = 5.0, protection: TaskProtection | None = None) -> None:
        """`stop_grace_s`: how long a handler asked to stop may take before its process is ended. `protection`:
        the ECS task's scale-in protection, held while any worker holds a job (onward.runtime.task_protection)."""
        self._stop_grace_s = stop_grace_s
        self._declared = (store, registry)  # retry policies per type (issue 37): published at start
        # Overlaps its workers' reports and renewals find, published as they are found (AttemptOverlaps, as the
        # Lambda worker publishes them per invocation).
        self.overlaps = OverlapsPublisher(store.stats.overlaps_found)
        self._workers = [Worker(store, registry, worker_id=f"w-{n:02d}", lease_s=lease_s,
                                stop_grace_s=stop_grace_s, attempt_ended=self.overlaps.publish,
                                held_changed=self._held_changed)
                         for n in range(size)]
        self._threads: list[threading.Thread] = []
        self._keeper = None if protection is None else ProtectionKeeper(protection, self._workers, stop_grace_s)

    def _held_changed(self) -> None:
        if self._keeper is not None:
            self._keeper.changed()

    def start(self) -> None:
        declare_types(*self._declared)
        self._threads = [threading.Thread(target=w.run, name=w.worker_id, daemon=True) for w in self._workers]
        for thread in self._threads:
            thread.start()
        if self._keeper is not None:
            self._keeper.start()

    @property
    def running(self) -> int:
        """Jobs held now."""
        return sum(worker.busy for worker in self._workers)

    def drain(self, stop_timeout_s: float, hurried: Callable[[], bool] = lambda: False) -> Drained:
        """The graceful stop (SIGTERM): no worker claims again from now on; the jobs running may end by
        themselves within `stop_timeout_s` (or until `hurried()`); then those still running are asked to
        stop, their processes ended `stop_grace_s` later if they ignore it, and their jobs released. Returns
        once every thread has ended, or RELEASE_WAIT_S after that. At most stop_timeout_s + stop_grace_s +
        RELEASE_WAIT_S in all: what the container's stop timeout must exceed."""
        # Counted from what the workers did, not from who is busy now: a claim under way when the stop began
        # (its transaction committed, its answer not yet back) holds a job a moment later.
        run_before = sum(worker.attempts_run for worker in self._workers)
        handed_back_before = sum(worker.attempts_handed_back for worker in self._workers)
        for worker in self._workers:
            worker.stop_claiming()
        deadline = time.monotonic() + stop_timeout_s
        while (any(thread.is_alive() for thread in self._threads) and not hurried()
               and (left_s := deadline - time.monotonic()) > 0):
            time.sleep(min(JOIN_POLL_S, left_s))
        for worker, thread in zip(self._workers, self._threads, strict=True):
            if thread.is_alive():
                worker.shutdown()
        self._join(self._stop_grace_s + RELEASE_WAIT_S)
        stuck = [worker for worker, thread in zip(self._workers, self._threads, strict=True) if thread.is_alive()]
        run = sum(worker.attempts_run for worker in self._workers) - run_before
        released = sum(worker.attempts_handed_back for worker in self._workers) - handed_back_before
        return Drained(held=run + sum(worker.busy for worker in stuck), ended=run - released, released=released,
                       stuck=len(stuck))

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop at once: each running job is asked to stop and released."""
        for worker in self._workers:
            worker.shutdown()
        self._join(timeout_s)

    def _join(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._keeper is not None:
            self._keeper.stop()

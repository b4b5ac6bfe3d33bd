"""A pool of Workers in one process, each on its own thread: the production runtime of `onward worker` (and
of the local platform's workers). Knows nothing of local emulation."""

from __future__ import annotations

import threading

from onward.store import JobStore
from onward.worker import Registry, Worker


class WorkerPool:
    """`size` Workers (ids w-00, w-01, ...) claiming from one store with the handlers of `registry`, each
    lease `lease_s` long. `stop` shuts each down (a running job is asked to stop and released), then joins
    their threads."""

    def __init__(self, store: JobStore, registry: Registry, size: int, lease_s: float) -> None:
        self._workers = [Worker(store, registry, worker_id=f"w-{n:02d}", lease_s=lease_s)
                         for n in range(size)]
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads = [threading.Thread(target=w.run, name=w.worker_id, daemon=True) for w in self._workers]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        for worker in self._workers:
            worker.shutdown()
        for thread in self._threads:
            thread.join(timeout=timeout_s)

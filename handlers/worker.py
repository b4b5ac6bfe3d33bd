"""The Lambda worker's function (WorkerFunction, WorkerRuntime=lambda): woken by `queued` events,
it runs due jobs for a bounded time (onward.entrypoints.worker)."""

from onward.entrypoints.worker import handler

__all__ = ["handler"]

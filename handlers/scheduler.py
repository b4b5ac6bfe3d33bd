"""The scheduler's function (SchedulerFunction, every minute): the jobs of due schedules are created
(onward.entrypoints.scheduler)."""

from onward.entrypoints.scheduler import handler

__all__ = ["handler"]

"""The reaper's function (ReaperFunction, on a schedule): jobs whose lease lapsed go back to the queue
or to quarantine (onward.entrypoints.reaper)."""

from onward.entrypoints.reaper import handler

__all__ = ["handler"]

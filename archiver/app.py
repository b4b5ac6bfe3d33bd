"""The archiver's function (ArchiverFunction): the events stream -> the run-history archive, each finished job
once per final version (onward.entrypoints.archiver)."""

from onward.entrypoints.archiver import handler

__all__ = ["handler"]

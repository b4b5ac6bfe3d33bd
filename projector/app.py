"""The projector's function (ProjectorFunction): the events stream -> the status view, guarded by
version (onward.entrypoints.projector)."""

from onward.entrypoints.projector import handler

__all__ = ["handler"]

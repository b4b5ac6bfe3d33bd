"""The relay's function (RelayFunction): the outbox table's stream -> the events stream (Kinesis), with
its own checkpoint (onward.entrypoints.relay)."""

from onward.entrypoints.relay import handler

__all__ = ["handler"]

"""The virtual clock role of the recorder: the system virtual clock of fair dispatch (onward.domain.dispatch),
kept in a few shards, read as their maximum and only ever raised."""

from __future__ import annotations

from abc import ABC, abstractmethod


class VirtualClock(ABC):
    """The system virtual clock's shards. Thread-safe."""

    @abstractmethod
    def clock(self) -> float:
        """The system virtual clock: the highest of its CLOCK_SHARDS items (0 before any claim)."""

    @abstractmethod
    def advance_clock(self, shard: int, value: float) -> bool:
        """Raise one clock item to `value`, never lowering it: False when it was already there or higher."""

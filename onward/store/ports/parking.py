"""The parking role of the recorder: queue entries whose waiting jobs are all in backoff leave the `active`
index for the `parked` one until the earliest is due, and are woken back (onward.store.wake_schedule)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from onward.domain.clock import EpochMs


class Parking(ABC):
    """Parked queue entries: park, find those due, wake. Thread-safe."""

    @abstractmethod
    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        """Move a queue entry whose waiting jobs are not due before `until` from the `active` index to the
        `parked` one, only if no job entered it since it was read (`entered`): False otherwise."""

    @abstractmethod
    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        """(tenant, ready shard) of parked queue entries due by `now`, from each `parked` partition."""

    @abstractmethod
    def wake(self, tenant_id: str, shard: int, now: EpochMs) -> bool:
        """Put a parked queue entry back in the `active` index, in the partition drawn for entering it `now`
        (index_shards.active_shard); False: it was not parked."""

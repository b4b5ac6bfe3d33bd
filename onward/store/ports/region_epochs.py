"""The region fence's ports (issue 39): the writer's epoch a store writes under, and the epoch item's book
(`REGION` / `EPOCH` in the jobs table) that a failover raises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from onward.domain.regions import RegionEpoch
from onward.store.ports.tenant_values import Tenant


@dataclass
class WriterEpoch:
    """The epoch a store writes under, shared by the parts of one store that build write plans; changed at
    run time by the authority lease (JobStore.set_region_epoch) when the witness names a new one."""

    value: int = 0


class RegionEpochBook(Protocol):
    """The epoch item, as each recorder keeps it (strongly consistent in its own Region)."""

    def read(self) -> RegionEpoch:
        """The epoch item; RegionEpoch.never_failed_over() when there is none."""
        ...

    def raise_to(self, epoch: RegionEpoch) -> bool:
        """Write `epoch` on the condition that the item's epoch is `epoch.epoch - 1` (no item counts as 0);
        False, nothing written, when it is not."""
        ...

    def mark_adopted(self, epoch: int, at: int) -> bool:
        """Record on the epoch item that epoch `epoch`'s adoption is done (`adopted_at`, the first time kept), on
        the condition that the item is at `epoch`; False, nothing written, when it is not."""
        ...

    def unadopted(self, epoch: int, cursor: str | None, limit: int) -> tuple[list[str], str | None]:
        """Ids of up to about `limit` jobs that have not ended and whose row's epoch is below `epoch`
        (queued, retry_wait, running, held aside), from `cursor` (None: the start), and the cursor of the
        next page (None: none left). A page may hold fewer, even none, while the cursor goes on."""
        ...

    def rebuild_counters(self, epoch: int, tenants: Sequence[Tenant], clock: float) -> int:
        """The RUNNING counters of `tenants` (the registered ones) set to nothing running, and their queue
        entries' bands set to the queued and retry_wait rows of each ready shard (those with jobs put in the
        `active` index, keyed `clock` unless they have a key), stamped `epoch`: the number of items written."""
        ...

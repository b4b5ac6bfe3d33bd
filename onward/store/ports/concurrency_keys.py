"""The concurrency keys role of the recorder (issue 37, item 2): a key's item per (tenant, key) counting its
jobs `running` and `held` (held aside waiting for a slot), and what a transition does to it, as domain values.

- a claim of a job with a key takes a slot in its own transaction: `running + 1` on the condition `running <
  limit` (the job's limit); refused (CommitOutcome.KEY_AT_LIMIT), the store holds the job aside instead
  (HeldJobs.hold with `while_at_limit`: `held + 1` on the condition `running >= limit`, in the hold's own
  transaction);
- every transition that ends an attempt of such a job gives the slot back: `running - 1`, on the condition
  that `held` is still the value the store read before deciding, and, when that value is above 0, puts the
  oldest held job of the key back in its ready queue in the same transaction (`held - 1`; the held row on
  the condition that it is still held under the key). A hold that commits between the read and the end
  changes `held`, so the end is refused (KEY_MOVED), reads again and releases that job: no job is left held
  while a slot is free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onward.domain.concurrency import KeyCount
from onward.store.ports.rows import JobRow

if TYPE_CHECKING:
    from onward.store.ports.write_plans import WaitingUpdate


@dataclass(frozen=True)
class SlotTake:
    """A claim's slot: `running + 1` on the key's item, on the condition `running < limit`."""

    tenant_id: str
    key: str
    limit: int


@dataclass(frozen=True)
class HeldRelease:
    """The held job an ending attempt puts back in its ready queue: its row as read (held under `hold_key`),
    and its queue entry's update as a job entering it (summed with the ending job's: one item per write)."""

    row: JobRow
    hold_key: str
    waiting: WaitingUpdate


@dataclass(frozen=True)
class SlotReturn:
    """An ending attempt's slot given back: `running - 1` on the condition that `held` is `held_read`; with
    `release`, that held job back in its queue and `held - 1`."""

    tenant_id: str
    key: str
    held_read: int
    release: HeldRelease | None = None


@dataclass(frozen=True)
class KeyLimit:
    """A hold's condition: the key's item still at its limit (`running >= limit`); the hold adds 1 to `held`."""

    tenant_id: str
    key: str
    limit: int


class ConcurrencyCounts(ABC):
    @abstractmethod
    def key_count(self, tenant_id: str, key: str) -> KeyCount:
        """The key's item as it is now (strongly consistent); zeros when it has none."""

"""Unique jobs (issue 37) in the store's ports: what a create writes to take its tenant's unique key, on which
condition, and the read of a key's item. Each recorder keeps the key's item in the create's own atomic write
(onward.store.dynamo.unique_keys, onward.store.memory.unique_keys); onward.store.unique_keys decides."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from onward.domain.clock import EpochMs
from onward.domain.uniqueness import UniqueHold


@dataclass(frozen=True)
class UniqueClaim:
    """A create's take of its tenant's unique key `key`: the key's item will say `hold` (the new job, until
    when). The condition, in the create's transaction:

    - `previous_holder` None: no item for the key, or its window ended by `now` (`held_until <= now`: TTL
      deletes an item up to days late, so the stored expiry is compared, never its presence);
    - `previous_holder` a job id (a takeover, decided from a read of the item and of that job's row): the
      item still names that job, and that job's row is finished (any terminal state) or gone.
    """

    key: str
    hold: UniqueHold
    now: EpochMs
    previous_holder: str | None = None

    def taking_over(self, holder: str) -> UniqueClaim:
        return UniqueClaim(self.key, self.hold, self.now, holder)

    def at(self, now: EpochMs) -> UniqueClaim:
        """The first condition again, at a later `now` (a window found ended, or an item found gone)."""
        return UniqueClaim(self.key, self.hold, now)


class UniqueKeyReads(ABC):
    """The read of a unique key's item (strongly consistent)."""

    @abstractmethod
    def unique_hold(self, tenant_id: str, key: str) -> UniqueHold | None:
        """What the tenant's unique key's item says; None when there is none."""

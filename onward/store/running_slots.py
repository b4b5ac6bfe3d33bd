"""A tenant's RUNNING counters as one claim read them, and which of them the claim charges (pure)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RunningSlots:
    """A tenant's RUNNING counters as this claim read them, with the shards refused since."""

    running: list[int]
    caps: tuple[int | None, ...]
    entry_caps: tuple[int | None, ...] | None = None  # TenantState.entry_caps (None: the caps)
    lift_vt: int | None = None  # the returning tenant's lift the claim raises (dispatch.Candidate.lift_offset_ms)

    def pick(self, rng: random.Random, *, flex: bool, prefer: int | None = None) -> int | None:
        """The shard to charge: `prefer` (the ready shard the job is taken from, whose queue entry keeps that
        shard's counter: one item updated, issue 34) while it has room, else the one with the most room under
        its cap (any, least running, when flexing or uncapped); None when every shard is at its cap."""
        shards = range(len(self.caps))
        if prefer is not None and prefer in shards and self._has_room(prefer, flex):
            return prefer
        if flex or self.caps[0] is None:
            least = min(self.running)
            return rng.choice([shard for shard in shards if self.running[shard] == least])
        if sum(self.running) >= sum(cap or 0 for cap in self.caps):
            return None  # at its cap as read (after a cap was lowered, shards can hold more than their share)
        room = [(cap - self.running[shard], shard) for shard in shards if (cap := self.caps[shard]) is not None]
        best = max(room)[0]
        if best <= 0:
            return None
        return rng.choice([shard for left, shard in room if left == best])

    def _has_room(self, shard: int, flex: bool) -> bool:
        cap = self.caps[shard]
        if flex or cap is None:
            return True
        return self.running[shard] < cap and sum(self.running) < sum(cap or 0 for cap in self.caps)

    def admission_cap(self, shard: int) -> int | None:
        """What the counter on the shard's queue entry must stay below (None: no cap)."""
        return (self.entry_caps or self.caps)[shard]

    def full(self, shard: int) -> None:
        cap = self.caps[shard]
        self.running[shard] = max(self.running[shard], cap if cap is not None else 0)

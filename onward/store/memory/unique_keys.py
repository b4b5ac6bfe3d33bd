"""Unique jobs (issue 37) in memory: a tenant's unique key's hold as a domain value in MemoryState, checked and
put inside the create's own all-or-nothing write under the state's lock, on the UniqueClaim's condition as
onward.store.dynamo.unique_keys states it for DynamoDB."""

from __future__ import annotations

from onward.domain.states import is_terminal
from onward.domain.uniqueness import UniqueHold
from onward.store.memory.state import MemoryState
from onward.store.ports.unique_keys import UniqueClaim, UniqueKeyReads
from onward.store.ports.write_plans import NewJobWrite


def unique_held(state: MemoryState, write: NewJobWrite) -> bool:
    """Whether the write's UniqueClaim's condition fails (the caller holds the lock)."""
    taking: UniqueClaim | None = write.unique
    if taking is None:
        return False
    hold = state.unique_holds.get((write.job.tenant_id, taking.key))
    if taking.previous_holder is None:
        return hold is not None and (hold.held_until is None or hold.held_until > taking.now)
    if hold is not None and hold.job_id != taking.previous_holder:
        return True
    holder = state.rows.get(taking.previous_holder)
    return holder is not None and not is_terminal(holder.job.state)


def put_unique(state: MemoryState, write: NewJobWrite) -> None:
    """Keep the write's hold of its unique key (the caller holds the lock and checked unique_held)."""
    if write.unique is not None:
        state.unique_holds[(write.job.tenant_id, write.unique.key)] = write.unique.hold


class MemoryUniqueKeys(UniqueKeyReads):
    """The read of a unique key's hold, for MemoryRecorder (its `_state`)."""

    _state: MemoryState

    def unique_hold(self, tenant_id: str, key: str) -> UniqueHold | None:
        with self._state.lock:
            return self._state.unique_holds.get((tenant_id, key))

"""Concurrency keys in memory (onward.store.ports.concurrency_keys): each key's counts under the state's lock, with
the conditions of the DynamoDB items (onward.store.dynamo.concurrency_keys)."""

from __future__ import annotations

from dataclasses import replace

from onward.domain.concurrency import KeyCount
from onward.store.memory.held_jobs import release_row
from onward.store.memory.state import MemoryState
from onward.store.ports.concurrency_keys import ConcurrencyCounts, SlotReturn, SlotTake
from onward.store.ports.outcomes import Role
from onward.store.ports.write_plans import WaitingUpdate


def slot_failures(state: MemoryState, slot: SlotTake | SlotReturn | None) -> set[Role]:
    """The conditions of a transition's slot that fail now."""
    if slot is None:
        return set()
    count = state.key_counts.get((slot.tenant_id, slot.key), KeyCount())
    failed = set()
    if isinstance(slot, SlotTake):
        if count.running >= slot.limit:
            failed.add(Role.CONCURRENCY)
        return failed
    if count.held != slot.held_read:
        failed.add(Role.CONCURRENCY)
    if slot.release is not None:
        stored = state.rows.get(slot.release.row.job.job_id)
        if stored is None or stored.held_by != slot.release.hold_key:
            failed.add(Role.HELD_RELEASE)
    return failed


def apply_slot(state: MemoryState, slot: SlotTake | SlotReturn | None) -> list[WaitingUpdate]:
    """Apply a transition's slot (its conditions checked); the queue entry update of the job it releases."""
    if slot is None:
        return []
    count = state.key_counts.get((slot.tenant_id, slot.key), KeyCount())
    if isinstance(slot, SlotTake):
        state.key_counts[(slot.tenant_id, slot.key)] = replace(count, running=count.running + 1)
        return []
    state.key_counts[(slot.tenant_id, slot.key)] = replace(count, running=count.running - 1)
    if slot.release is None:
        return []
    release_row(state, slot.release.row.job.job_id, slot.release.hold_key)  # (takes 1 off `held`)
    return [slot.release.waiting]


class MemoryConcurrencyCounts(ConcurrencyCounts):
    _state: MemoryState

    def key_count(self, tenant_id: str, key: str) -> KeyCount:
        with self._state.lock:
            return self._state.key_counts.get((tenant_id, key), KeyCount())

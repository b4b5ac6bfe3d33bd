"""Held jobs in memory (onward.store.held_jobs.HeldJobs): the rows' `held_by` and a held index per partition (the
DynamoDB one's: onward.store.held_partitions), under the state's lock, with the conditions of the DynamoDB ones."""

from __future__ import annotations

from dataclasses import replace

from onward.domain.concurrency import KeyCount, key_of_hold
from onward.domain.pauses import Pause
from onward.domain.states import CLAIMABLE_STATES
from onward.store.held_jobs import HeldJob, first_held, in_held_order
from onward.store.held_partitions import entry_partition, entry_partitions
from onward.store.memory.state import MemoryState
from onward.store.pauses import MemoryFlowBook
from onward.store.ports.concurrency_keys import KeyLimit
from onward.store.ports.ready_queues import ready_queue
from onward.store.ports.rows import JobRow
from onward.store.ports.write_plans import WaitingUpdate, queue_entry_updates


def add_held(state: MemoryState, tenant_id: str, hold_key: str, delta: int) -> None:
    """A concurrency key's `held` count, when `hold_key` is a key's (concurrency keys, issue 37)."""
    key = key_of_hold(hold_key)
    if key is not None:
        count = state.key_counts.get((tenant_id, key), KeyCount())
        state.key_counts[(tenant_id, key)] = replace(count, held=count.held + delta)


def release_row(state: MemoryState, job_id: str, hold_key: str, partition: str | None = None) -> JobRow | None:
    """Take a held row out of its hold (row, its held entry in `partition` or wherever it may be, key count):
    the row as it was, None when it was not held under `hold_key` (its entry dropped all the same). The caller
    puts it in its queue entry. Under the state's lock."""
    for place in [partition] if partition else entry_partitions(hold_key, job_id):
        state.held.get(place, {}).pop(job_id, None)
    stored = state.rows.get(job_id)
    if stored is None or stored.held_by != hold_key:
        return None
    state.put_row(stored._replace(held_by=None))
    add_held(state, stored.job.tenant_id, hold_key, -1)
    return stored


class MemoryHeldJobs:
    def __init__(self, state: MemoryState, flow_book: MemoryFlowBook) -> None:
        self._state = state
        self._flow_book = flow_book

    def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None,
             while_at_limit: KeyLimit | None = None) -> bool:
        state = self._state
        job = row.job
        with state.lock:
            stored = state.rows.get(job.job_id)
            at_limit = while_at_limit is None or state.key_counts.get(
                (while_at_limit.tenant_id, while_at_limit.key), KeyCount()).running >= while_at_limit.limit
            if (stored is None or stored.held_by is not None or stored.job.state not in CLAIMABLE_STATES
                    or (stored.job.state, stored.job.version) != (job.state, job.version)
                    or (while_paused is not None and while_paused not in self._flow_book.switches().pauses)
                    or not at_limit):
                return False
            state.put_row(stored._replace(held_by=hold_key))
            queue = ready_queue(stored.job, stored.ready_shards)
            for entry in queue_entry_updates([WaitingUpdate(job.tenant_id, queue, -1)]):
                state.apply_entry(entry)
            partition = entry_partition(hold_key, job.job_id)
            state.held.setdefault(partition, {})[job.job_id] = HeldJob(job.job_id, job.tenant_id, job.not_before,
                                                                       partition)
            add_held(state, job.tenant_id, hold_key, 1)
            return True

    def held(self, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        return first_held(self.held_in, hold_key, tenant_id, limit)

    def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        with self._state.lock:
            jobs = [job for job in self._state.held.get(partition, {}).values() if tenant_id in (None, job.tenant_id)]
        return sorted(jobs, key=in_held_order)[:limit]

    def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:
        state = self._state
        with state.lock:
            stored = release_row(state, job_id, hold_key, entry.partition if entry else None)
            if stored is None:
                return False
            queue = ready_queue(stored.job, stored.ready_shards)
            for update in queue_entry_updates([WaitingUpdate(stored.job.tenant_id, queue, 1, clock, job_id=job_id)]):
                state.apply_entry(update)
            return True

"""Concurrency keys on the store's transitions (issue 37, item 2): what a transition of a job with a key does to
the key's item (onward.store.ports.concurrency_keys), and the hold of a job whose claim found the key at its limit.

- a claim takes a slot in its own transaction (`SlotTake`: no read; the condition `running < limit`);
- its refusal (the key at its limit) holds the job aside (onward.store.held_jobs, hold key `concurrency#<key>`)
  on the condition that the key is still at its limit, so the job holds no worker and no place at the head of
  its tenant's queue; when the condition fails (a slot came free meanwhile) the claim decides again;
- an end of an attempt (complete, fail, reap, release, cancel acknowledgement, snooze: `ends_attempt`) reads
  the key's item, and when jobs are held, the oldest (by due time) and its row, and gives the slot back with
  that job put back in its queue, in its own transaction (`SlotReturn`), on the condition that `held` is still
  the value read. A cancel of a held job puts it back first (Holding.put_back), which takes 1 off `held`.
"""

from __future__ import annotations

from collections.abc import Callable

from onward.domain.concurrency import hold_key, key_of_hold, limited_sentence
from onward.domain.lifecycle import Change
from onward.domain.models import Job
from onward.store.held_jobs import HeldJobs
from onward.store.ports.concurrency_keys import ConcurrencyCounts, HeldRelease, KeyLimit, SlotReturn, SlotTake
from onward.store.ports.ready_queues import ready_queue
from onward.store.ports.rows import JobRow
from onward.store.ports.write_plans import WaitingUpdate, ends_attempt

HELD_READ = 4  # held entries an end reads to find the oldest whose row is held (a stray entry is passed)


class JobHeld(Exception):
    """The claimed job's concurrency key is at its limit: the job is held aside until a slot comes free."""


class ConcurrencySlots:
    """The concurrency key side of one JobStore's transitions. Thread-safe (it keeps nothing)."""

    def __init__(self, counts: ConcurrencyCounts, book: HeldJobs, read_row: Callable[[str], JobRow | None],
                 virtual_clock: Callable[[], float]) -> None:
        self._counts = counts
        self._book = book
        self._read_row = read_row
        self._virtual_clock = virtual_clock
        self.holds = 0  # jobs this store held on their key (for tests and benches)
        self.releases = 0  # held jobs its ends put back

    def for_commit(self, change: Change) -> SlotTake | SlotReturn | None:
        """What `change` does to its job's key: a claim's slot, an end's slot given back (with the oldest held
        job put back, read now), or nothing."""
        job = change.after
        if job.concurrency_key is None or job.concurrency_limit is None:
            return None
        if change.open_run is not None:
            return SlotTake(job.tenant_id, job.concurrency_key, job.concurrency_limit)
        if not ends_attempt(change):
            return None
        count = self._counts.key_count(job.tenant_id, job.concurrency_key)
        return SlotReturn(job.tenant_id, job.concurrency_key, count.held,
                          self._oldest_held(job) if count.held > 0 else None)

    def _oldest_held(self, job: Job) -> HeldRelease | None:
        hold = hold_key(job.concurrency_key or "")
        for held in self._book.held(hold, job.tenant_id, HELD_READ):
            row = self._read_row(held.job_id)
            if row is not None and row.held_by == hold:
                entering = WaitingUpdate(job.tenant_id, ready_queue(row.job, row.ready_shards), 1,
                                         self._virtual_clock(), job_id=row.job.job_id)
                return HeldRelease(row, hold, entering)
        return None  # (none found: a release raced this read; the condition on `held` refuses the end)

    def hold(self, row: JobRow) -> bool:
        """Hold a job whose claim found its key at its limit (False: the key has a free slot now, or the row
        moved: decide again)."""
        job = row.job
        if job.concurrency_key is None or job.concurrency_limit is None:
            return False
        held = self._book.hold(row, hold_key(job.concurrency_key), None,
                               KeyLimit(job.tenant_id, job.concurrency_key, job.concurrency_limit))
        self.holds += held
        return held

    def limited_by(self, row: JobRow) -> str | None:
        """`explain`'s sentence for a job held on its key ("N of LIMIT running for ..."), None when it is not."""
        key = key_of_hold(row.held_by)
        if key is None or row.job.concurrency_limit is None:
            return None
        return limited_sentence(key, self._counts.key_count(row.job.tenant_id, key), row.job.concurrency_limit)

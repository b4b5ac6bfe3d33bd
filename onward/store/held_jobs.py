"""Holding jobs aside: a waiting job that may not start for a while (its type is paused, its concurrency key
at its limit) is moved out of its ready queue into a held index keyed by what holds it, keeping its due time,
and put back with that due time once released, so it keeps its place.

Why: the claim reads a ready queue's head without the jobs' types. A paused type's jobs at the head would be
read, and passed, by every claim, and once CANDIDATES_PER_QUERY of them led a queue they would hide the tenant's
other jobs behind them. Held aside, they are read once (by the claim that holds each), and the tenant's queue
entry counts only the jobs it can run (its fair share, its place in the `active` index, a cap's flex).

The rules every `HeldJobs` keeps (in memory onward.store.memory.held_jobs, on DynamoDB
onward.store.dynamo.held_jobs; tests/contract/test_held_jobs_contract.py runs one suite on both), each hold and
each release one atomic write:
- hold: only while the job row is at the version and state the claim read, claimable, in its ready queue and
  not held, and (for a pause) while the pause is in force: the row is marked `held_by`, out of the ready index,
  its queue entry's band count and `waiting` one lower, a held entry `<tenant>#<due>#<job>` put in its partition
  (onward.store.held_partitions: a paused type's spread over shards by job id);
- release: only while the row is held under that key: the row back in its ready index at its due time, the
  held entry deleted, its queue entry one higher as a job entering it (back in the `active` index, at the
  clock if it had left it, its tenant returning: lifted to the clock, banking no credit for the hold);
- no other transition commits on a held row (its condition: not held): a cancel puts the job back first
  (JobStore), a claim refuses it.
A hold that raced a resume cannot strand a job: the resume deletes the pause first, so a hold committed after
it fails its condition, and the sweep that follows reads the held entries after it (consistently).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from onward.domain.clock import Clock, EpochMs
from onward.domain.pauses import Pause
from onward.store.held_partitions import partitions
from onward.store.ports.concurrency_keys import KeyLimit
from onward.store.ports.rows import JobRow

RELEASE_PAGE = 100  # held entries read per page of a release sweep


class HeldJob(NamedTuple):
    job_id: str
    tenant_id: str
    due_at: EpochMs
    partition: str = ""  # the partition its entry was read in (onward.store.held_partitions); "": not read


ReadPartition = Callable[[str, str | None, int], list[HeldJob]]  # HeldJobs.held_in


def in_held_order(job: HeldJob) -> tuple[str, EpochMs, str]:
    """The order of held entries in a partition (its sort key), and of a hold key's merged: tenant, due, job."""
    return job.tenant_id, job.due_at, job.job_id


def first_held(read: ReadPartition, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
    """The first `limit` entries of `hold_key` over all its partitions (`read`: one partition's first ones)."""
    jobs = [job for partition in partitions(hold_key) for job in read(partition, tenant_id, limit)]
    return sorted(jobs, key=in_held_order)[:limit]


def every_held(read: ReadPartition, hold_key: str, tenant_id: str | None, page: int) -> Iterator[HeldJob]:
    """Every entry of `hold_key` (of one tenant, or every one) in held order over all its partitions, each read
    `page` entries at a time, in turn (a sweep's time is in its releases, two requests a job: reading 33
    partitions concurrently would save little of it). A partition whose page is used up is read again from its
    start: the caller has released what it was given meanwhile (its entries deleted), and one whose release
    failed is given again, as a sweep that reads a page again would."""
    buffers: dict[str, deque[HeldJob]] = {}
    unread: set[str] = set()  # partitions whose last page was full
    for partition in partitions(hold_key):
        buffers[partition] = deque()
        unread.add(partition)
    while True:
        for partition in [partition for partition, buffer in buffers.items() if partition in unread and not buffer]:
            page_read = read(partition, tenant_id, page)
            buffers[partition].extend(page_read)
            if len(page_read) < page:
                unread.discard(partition)
        filled = [buffer for buffer in buffers.values() if buffer]
        if not filled:
            return
        yield min(filled, key=lambda buffer: in_held_order(buffer[0])).popleft()


class HeldJobs(Protocol):
    """Where held jobs are kept, and the atomic writes that hold and release them (the module's docstring)."""

    def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None,
             while_at_limit: KeyLimit | None = None) -> bool:
        """Hold the job aside under `hold_key`: False when a condition failed (nothing written). With
        `while_at_limit` (concurrency keys): only while the key's item has `limit` running, adding 1 to its
        `held`; its release takes 1 off."""

    def held(self, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        """The first `limit` jobs held under `hold_key` (of one tenant, or every one), by tenant then due
        time, over all its partitions (first_held); read consistently."""

    def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        """The first `limit` entries of one partition (onward.store.held_partitions), of one tenant or every
        one, by tenant then due time; read consistently."""

    def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:
        """Put the job back in its ready queue at its due time (`clock`: the system virtual clock, its queue
        entry's key if it enters the `active` index): False when it was not held under `hold_key` (a held
        entry whose row is not held under it is stray: dropped). `entry`: the entry the caller read (its
        partition); None: the entry is deleted wherever it may be (onward.store.held_partitions.entry_partitions)."""


def pause_hold_key(job_type: str) -> str:
    """The hold key of a paused type's jobs (every tenant's: a tenant's own pause of it releases its part)."""
    return f"paused#{job_type}"


class Released(NamedTuple):
    released: int
    more: bool  # stopped at its budget with jobs still held: sweep again


class Holding:
    """Holds and releases jobs through a HeldJobs, with the system virtual clock for what it releases."""

    def __init__(self, book: HeldJobs, virtual_clock: Callable[[], float], clock: Clock) -> None:
        self._book = book
        self._virtual_clock = virtual_clock
        self._clock = clock

    def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None = None,
             while_at_limit: KeyLimit | None = None) -> bool:
        return self._book.hold(row, hold_key, while_paused, while_at_limit)

    def put_back(self, row: JobRow) -> JobRow:
        """A held row put back in its ready queue (by this call, or by another one meanwhile): as it is now, but
        for what a write since did (which the caller's commit, conditional on the version, finds)."""
        if row.held_by is not None:
            self._book.release(row.job.job_id, row.held_by, self._virtual_clock())
        return row._replace(held_by=None)

    def release_all(self, hold_key: str, tenant_id: str | None = None, *, budget_s: float | None = None,
                    progress: Callable[[int], None] | None = None) -> Released:
        """Release every job held under `hold_key` (of one tenant, or every one), in due order per tenant over
        all its partitions (every_held), until none is left or `budget_s` is spent (then `more`); `progress`
        hears the count so far after each RELEASE_PAGE tried, and at the end."""
        started = time.monotonic()
        released = tried = 0
        entries = every_held(self._book.held_in, hold_key, tenant_id, RELEASE_PAGE)
        for job in entries:
            released += self._book.release(job.job_id, hold_key, self._virtual_clock(), job)
            tried += 1
            if tried % RELEASE_PAGE:
                continue
            if progress is not None:
                progress(released)
            if budget_s is not None and time.monotonic() - started >= budget_s:
                return Released(released, more=next(entries, None) is not None)
        if progress is not None and tried % RELEASE_PAGE:
            progress(released)
        # A release that lost a race (a transaction conflict) leaves its entry; a stray one is dropped. Only a
        # read tells them apart, and a sweep that answered "done" over a job still held would strand it.
        lost_a_race = tried > released
        return Released(released, more=lost_a_race and self._any_held(hold_key, tenant_id))

    def _any_held(self, hold_key: str, tenant_id: str | None) -> bool:
        return next(every_held(self._book.held_in, hold_key, tenant_id, 1), None) is not None


class _HoldingNothing:
    """The HeldJobs of a recorder that keeps none: nothing is held (a claim passes a paused job where it is)."""

    def hold(self, row: JobRow, hold_key: str, while_paused: Pause | None,
             while_at_limit: KeyLimit | None = None) -> bool:
        return False

    def held(self, hold_key: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        return []

    def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        return []

    def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:
        return False


def held_jobs_of(recorder: object) -> HeldJobs:
    """The HeldJobs a recorder keeps beside its jobs (`held_jobs`: both recorders have one), or none."""
    book = getattr(recorder, "held_jobs", None)
    return book if book is not None else _HoldingNothing()

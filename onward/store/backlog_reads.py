"""What a count of the backlog reads (onward.maintenance.backlog): the queue entries that may hold due jobs,
their waiting counts, a ready queue's jobs counted on either side of now, and the jobs running under a lease;
each read says how many requests it took. onward.store.dynamo.backlog_reads answers it on DynamoDB."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from onward.domain.clock import EpochMs
from onward.store.ports import QueueEntry
from onward.store.ports.ready_queues import ReadyQueue

COUNT_CAP = 1_000  # items one counting Query may read in a ready queue (about 45 read units at most)


@dataclass(frozen=True)
class Count:
    items: int
    complete: bool  # every item of the range was counted (no page left)


class BacklogReads(Protocol):
    def entries_with_work(self, now: EpochMs) -> tuple[set[tuple[str, int]], int]:
        """(tenant, ready shard) of every queue entry in the claim order, and of every parked one whose park
        has ended by `now`; and the requests it took."""

    def queue_entries(self, entries: list[tuple[str, int]]) -> tuple[list[QueueEntry], int]:
        """Those queue entries' waiting counts (eventually consistent), and the requests it took."""

    def count_queue(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, *, due: bool) -> Count:
        """How many jobs of one ready queue are due by `now` (`due`) or not yet, up to COUNT_CAP (one request)."""

    def due_head(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[tuple[str, EpochMs]]:
        """(job type, due at) of the first `limit` jobs of one ready queue due by `now`, earliest first (one
        request): the per-type split of onward.maintenance.backlog_types."""

    def count_running(self) -> tuple[int, int]:
        """How many jobs run under a lease, and the requests it took."""

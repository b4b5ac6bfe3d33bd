"""What the in-memory recorder holds, under one lock: domain values (job rows, runs and their results, events,
Idempotency-Keys, tenants, counters, queue entries, the virtual clock) and the ready and lease indexes over
the rows, each kept in the order DynamoDB's index gives."""

from __future__ import annotations

import heapq
import json
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.concurrency import KeyCount
from onward.domain.dispatch import Usage
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.progress import ProgressEvent
from onward.domain.states import CLAIMABLE_STATES, JobState
from onward.domain.uniqueness import UniqueHold
from onward.store.held_jobs import HeldJob
from onward.store.ports.index_shards import active_shard, lease_shard
from onward.store.ports.ready_queues import ReadyQueue, ready_queue
from onward.store.ports.rows import IdempotencyRecord, JobRow
from onward.store.ports.tenant_values import QueueEntry, Tenant
from onward.store.ports.write_plans import QueueEntryUpdate, RunningUpdate


def _number(text: str) -> int | float:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def stored(value: Any) -> Any:
    """A deep copy of a JSON document to keep, with numbers as DynamoDB keeps them (an integral float reads
    back as an int)."""
    return json.loads(json.dumps(value), parse_float=_number)


def copied(value: Any) -> Any:
    """A deep copy of a kept JSON document (dicts, lists, scalars), for a reader to keep."""
    if type(value) is dict:
        return {name: copied(inner) for name, inner in value.items()}
    if type(value) is list:
        return [copied(inner) for inner in value]
    return value


def detached_job(job: Job) -> Job:
    """The job with its params copied: a reader's, whatever it does to them."""
    return job.model_copy(update={"params": copied(job.params)})


def first(entries: Iterable[tuple[tuple[Any, ...], Any]], limit: int) -> list[Any]:
    """The values of up to `limit` (sort key, value) pairs, lowest sort key first."""
    return [value for _, value in heapq.nsmallest(limit, entries, key=lambda entry: entry[0])]


@dataclass
class StoredRun:
    """A run record, when the first overlap marked on it began (its key in the `overlaps` index) and, on the
    run that completed its job, the job's result (`has_result`: None is a result too)."""

    run: Run
    overlap_at: EpochMs | None = None
    result: Any = None
    has_result: bool = False


@dataclass
class RunningCounter:
    """One of a tenant's RUNNING counters. `charged`: an attempt was ever counted in it (a flexing claim's
    check finds no counter below a cap on one never charged); its lift (`usage.lift_vt`) is the highest of
    the one a resume raised (`item_lift`: on DynamoDB the older RUNNING item's) and the one claims serving the
    returning tenant raised (`entry_lift`: on DynamoDB the queue entry's, issue 34); None: none raised."""

    usage: Usage = field(default_factory=Usage)
    charged: bool = False
    item_lift: int | None = None
    entry_lift: int | None = None


@dataclass
class QueueEntryState:
    """A tenant's queue entry of one ready shard: its waiting jobs by priority band, the jobs that ever
    entered it, and its place: in the `active` index (keyed `active_vt`, which it keeps while out of it), or
    parked until `parked_until`."""

    tenant_id: str
    shard: int
    bands: dict[int, int] = field(default_factory=dict)
    waiting: int = 0
    entered: int = 0
    active_vt: float | None = None
    active: bool = False
    partition: int = 0  # its `active` partition while `active` (index_shards.active_shard: drawn as it entered)
    parked_until: EpochMs | None = None
    returned_at: float | None = math.inf  # QueueEntry.returned_at (inf: removed, as DynamoDB's attribute)

    @property
    def in_active(self) -> bool:
        return self.active and self.active_vt is not None

    def value(self) -> QueueEntry:
        return QueueEntry(self.tenant_id, self.shard, dict(self.bands), self.active_vt if self.active else None,
                          self.entered, self.returned_at)

    def order(self) -> tuple[str, str]:
        """Its place among entries of equal index key: by tenant, then ready shard as text (the order of the
        index's item keys; tenant ids hold no character that sorts before their separator)."""
        return self.tenant_id, str(self.shard)


class MemoryState:
    """Everything one in-memory deployment holds. Callers hold `lock` while they read or change it."""

    def __init__(self, active_shards: int) -> None:
        self.active_shards = active_shards
        self.lock = threading.Lock()
        self.rows: dict[str, JobRow] = {}
        self.runs: dict[str, dict[int, StoredRun]] = {}
        # results as kept before issue 34 (an item of their own, now on the completing run record): read as
        # a fallback, only tests put them (onward.store.memory.recorder.MemoryRecorder.keep_result_the_old_way)
        self.old_results: dict[str, Any] = {}
        self.events: dict[str, dict[int, OutboxEvent]] = {}
        self.progress: dict[str, list[ProgressEvent]] = {}  # progress events (issue 38), apart from `events`
        self.keys: dict[tuple[str, str], IdempotencyRecord] = {}
        self.tenants: dict[str, Tenant] = {}
        self.running: dict[tuple[str, int], RunningCounter] = {}
        self.queues: dict[tuple[str, int], QueueEntryState] = {}
        self.clock: dict[int, float] = {}
        self.ready: dict[tuple[str, ReadyQueue], dict[str, EpochMs]] = {}  # jobs due, by their due time
        self.leases: dict[int, dict[str, EpochMs]] = {}  # running jobs by lease shard, by lease expiry
        # unique jobs (issue 37): each tenant's unique keys' holds, by (tenant, key)
        self.unique_holds: dict[tuple[str, str], UniqueHold] = {}
        # rate limits (issue 37): definitions and GCRA buckets' TATs by (tenant, key) (onward.store.memory.rate_buckets)
        self.rate_limits: dict[tuple[str, str], Any] = {}
        self.rate_tats: dict[tuple[str, str], int] = {}
        # concurrency keys (issue 37): each key's counts by (tenant, key), and the jobs held aside by partition
        # (onward.store.held_partitions; onward.store.memory.held_jobs, onward.store.memory.concurrency_keys)
        self.key_counts: dict[tuple[str, str], KeyCount] = {}
        self.held: dict[str, dict[str, HeldJob]] = {}

    # --- job rows and their indexes ---------------------------------------------------------------------

    def put_row(self, row: JobRow) -> None:
        """Keep a job row and move it in the ready and lease indexes (in `ready` while queued or retry_wait,
        in `leases` while running)."""
        job = row.job
        old = self.rows.get(job.job_id)
        if old is not None:
            self.ready.get((old.job.tenant_id, ready_queue(old.job, old.ready_shards)), {}).pop(job.job_id, None)
            self.leases.get(lease_shard(job.job_id), {}).pop(job.job_id, None)
        if job.state in CLAIMABLE_STATES and row.held_by is None:  # (a held job is out of its queue)
            self.ready.setdefault((job.tenant_id, ready_queue(job, row.ready_shards)), {})[job.job_id] = (
                job.not_before)
        if job.state is JobState.RUNNING and job.lease_expires_at is not None:
            self.leases.setdefault(lease_shard(job.job_id), {})[job.job_id] = job.lease_expires_at
        self.rows[job.job_id] = row

    def row(self, job_id: str) -> JobRow | None:
        row = self.rows.get(job_id)
        return None if row is None else row._replace(job=detached_job(row.job))

    # --- counters ---------------------------------------------------------------------------------------

    def counter(self, tenant_id: str, shard: int) -> RunningCounter:
        return self.running.setdefault((tenant_id, shard), RunningCounter())

    def apply_running(self, update: RunningUpdate) -> None:
        counter = self.counter(update.tenant_id, update.shard)
        counter.usage = counter.usage.apply(update.usage)
        counter.charged = counter.charged or update.usage.running != 0
        if update.lift_vt is not None:  # (lift_refused checked it is higher)
            counter.entry_lift = update.lift_vt
            counter.usage = counter.usage.lifted(update.lift_vt)

    def lift_refused(self, update: RunningUpdate) -> bool:
        """A claim's lift's condition failed: the counter it charges holds a claim's lift as high."""
        counter = self.running.get((update.tenant_id, update.shard))
        return (update.lift_vt is not None and counter is not None and counter.entry_lift is not None
                and counter.entry_lift >= update.lift_vt)

    def admitted(self, update: RunningUpdate) -> bool:
        """The Admission's condition: below the cap on the counter it charges (no counter counts as 0)."""
        counter = self.running.get((update.tenant_id, update.shard))
        if update.below_cap is None or counter is None or not counter.charged:
            return True
        return counter.usage.running < update.below_cap

    def at_cap(self, tenant_id: str, shard: int, cap: int) -> bool:
        counter = self.running.get((tenant_id, shard))
        return counter is not None and counter.charged and counter.usage.running >= cap

    def apply_entry(self, update: QueueEntryUpdate) -> None:
        """What a write does to a queue entry: its band counts and total; jobs entering count in `entered`,
        wake it, and put it in the `active` index at `active_vt` unless it has a key; a claim leaving it
        re-keys it."""
        entry = self.queues.setdefault((update.tenant_id, update.shard),
                                       QueueEntryState(update.tenant_id, update.shard))
        for priority, delta in update.bands:
            entry.bands[priority] = entry.bands.get(priority, 0) + delta
        entry.waiting += update.delta
        if update.entering:
            entry.entered += update.entering
            entry.parked_until = None
        if update.served:
            entry.returned_at = None
        elif update.entering and update.active_vt is not None and entry.returned_at == math.inf:
            entry.returned_at = stored(update.active_vt)
        if update.active_vt is not None:
            if update.entering:
                if not entry.active:
                    entry.partition = active_shard(entry.tenant_id, entry.shard, self.active_shards,
                                                   update.entering_job)
                entry.active = True
                if entry.active_vt is None:
                    entry.active_vt = stored(update.active_vt)
            else:
                entry.active_vt = stored(update.active_vt)

    def entries(self, include: Callable[[QueueEntryState], bool]) -> list[QueueEntryState]:
        return [entry for entry in self.queues.values() if include(entry)]

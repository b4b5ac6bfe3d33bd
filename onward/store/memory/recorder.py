"""The job store's recorder in memory: the roles of onward.store.ports over domain values in dicts under one
lock (onward.store.memory.state), with the same conditions and all-or-nothing writes as on DynamoDB, the same
`ready`, `leases`, `active` and `parked` index orders, and the outbox kept per job in version order.

For tests and simulations: `JobStore.in_memory()` runs the whole service layer (lifecycle decisions,
dispatch order, re-decisions after a lost race) over it, with no AWS. What it does not reproduce:
DynamoDB's TransactionConflict (one lock serializes every write, so no write ever meets another in
flight), index lag (its indexes are exact at once), item size limits (a batch of creates is refused past
4 MB of its jobs' own JSON only) and TTLs (nothing expires).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.models import OutboxEvent, Run
from onward.domain.uniqueness import UniqueHold
from onward.store.job_types import MemoryJobTypes
from onward.store.memory.concurrency_keys import MemoryConcurrencyCounts
from onward.store.memory.held_jobs import MemoryHeldJobs
from onward.store.memory.indexes import MemoryLeaseIndex, MemoryParking, MemoryTenantCounters, MemoryVirtualClock
from onward.store.memory.job_log import MemoryJobLog
from onward.store.memory.progress_log import MemoryProgressLog
from onward.store.memory.rate_buckets import MemoryRateBuckets
from onward.store.memory.region_epochs import MemoryRegionEpochs
from onward.store.memory.state import MemoryState, QueueEntryState, RunningCounter, detached_job
from onward.store.memory.unique_keys import MemoryUniqueKeys
from onward.store.pauses import MemoryFlowBook
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS
from onward.store.ports.recorder import JobRecorder
from onward.store.ports.rows import IdempotencyRecord, JobRow
from onward.store.ports.tenant_values import Tenant


@dataclass(frozen=True)
class MemoryContents:
    """A copy of everything a MemoryRecorder holds, for tests and audits: job rows, run records (with the
    `overlaps` index key of each: when its first overlap began), results (of the run that completed the job:
    `run_results`, by job and attempt; kept the way before issue 34: `old_results`), events by version,
    Idempotency-Keys, tenants, RUNNING counters, queue entries and the virtual clock's shards."""

    rows: dict[str, JobRow]
    runs: dict[str, list[tuple[Run, EpochMs | None]]]
    run_results: dict[tuple[str, int], Any]
    old_results: dict[str, Any]
    events: dict[str, list[OutboxEvent]]
    keys: dict[tuple[str, str], IdempotencyRecord]
    tenants: dict[str, Tenant]
    running: dict[tuple[str, int], RunningCounter]
    queues: dict[tuple[str, int], QueueEntryState]
    clock: dict[int, float]
    # unique jobs (issue 37): each tenant's unique keys' holds, by (tenant, key)
    unique_holds: dict[tuple[str, str], UniqueHold] = field(default_factory=dict)


class MemoryRecorder(MemoryJobLog, MemoryLeaseIndex, MemoryTenantCounters, MemoryParking, MemoryVirtualClock,
                     MemoryProgressLog, MemoryUniqueKeys, MemoryRateBuckets, MemoryConcurrencyCounts, JobRecorder):
    """A JobRecorder in this process's memory (one per simulated deployment; thread-safe)."""

    def __init__(self, active_shards: int = DEFAULT_ACTIVE_SHARDS) -> None:
        self._state = MemoryState(active_shards)
        self.type_declarations = MemoryJobTypes()  # the declared job types (issue 37)
        self.flow_book = MemoryFlowBook()  # pauses and the drain switch (issue 37: pause)
        self.held_jobs = MemoryHeldJobs(self._state, self.flow_book)  # jobs held aside (issue 37: pause)
        self.region_epochs = MemoryRegionEpochs(self._state)  # the epoch item (issue 39: region fence)

    def overlapping_jobs(self, since: EpochMs, until: EpochMs) -> list[str]:
        """Ids of the jobs with a run in the `overlaps` index keyed from `since` to `until` (inclusive), in key
        order, each once (onward.operator.overlaps's twin: every run is read, they are few here)."""
        with self._state.lock:
            found = sorted((kept.overlap_at, job_id) for job_id, runs in self._state.runs.items()
                           for kept in runs.values()
                           if kept.overlap_at is not None and since <= kept.overlap_at <= until)
        return list(dict.fromkeys(job_id for _, job_id in found))

    def contents(self) -> MemoryContents:
        """A copy of everything it holds (MemoryContents)."""
        state = self._state
        with state.lock:
            return MemoryContents(
                rows={job_id: row._replace(job=detached_job(row.job)) for job_id, row in state.rows.items()},
                runs={job_id: [(runs[attempt].run.model_copy(deep=True), runs[attempt].overlap_at)
                               for attempt in sorted(runs)] for job_id, runs in state.runs.items()},
                run_results={(job_id, attempt): copy.deepcopy(kept.result) for job_id, runs in state.runs.items()
                             for attempt, kept in runs.items() if kept.has_result},
                old_results=copy.deepcopy(state.old_results),
                events={job_id: [versions[version].model_copy(deep=True) for version in sorted(versions)]
                        for job_id, versions in state.events.items()},
                keys=dict(state.keys),
                tenants=dict(state.tenants),
                running={key: copy.copy(counter) for key, counter in state.running.items()},
                queues={key: copy.deepcopy(entry) for key, entry in state.queues.items()},
                clock=dict(state.clock),
                unique_holds=dict(state.unique_holds),
            )

    def keep_result_the_old_way(self, job_id: str) -> None:
        """Move the job's result off the run record that holds it into a result of its own, as a deployed
        stack keeps the results of jobs completed before issue 34: for tests of the readers' fallback."""
        with self._state.lock:
            for kept in self._state.runs.get(job_id, {}).values():
                if kept.has_result:
                    self._state.old_results[job_id] = kept.result
                    kept.result, kept.has_result = None, False

    def replace_job(self, job_id: str, **fields: Any) -> None:
        """Change a kept job row's fields as they are, bypassing every condition (what a console edit of a
        row, or a row left by older code, would be): for tests that need such a row."""
        with self._state.lock:
            row = self._state.rows[job_id]
            self._state.put_row(row._replace(job=row.job.model_copy(update=fields)))

"""How much work waits for workers right now, as the ECS workers' scaling reads it: the waiting jobs due now
(`due`: queued or retry_wait, due by now, held by no worker) and the jobs running under a lease (`running`).
The reaper counts them once a minute (onward.entrypoints.reaper) and publishes them as the metrics BacklogDue
and JobsRunning (namespace Onward); template.yaml's WorkerScaling policy sets the worker tasks to
ceil((due + running) / jobs per task), from WorkerMinTasks (0 allowed) to WorkerMaxTasks.

The count never reads a tenant that has nothing due, so its cost follows the queues with work, not the
registered tenants (onward.store.backlog_reads; on DynamoDB onward.store.dynamo.backlog_reads):
1. the `active` index (every partition, KEYS_ONLY) lists the queue entries that may hold due jobs, and the
   `parked` index those whose jobs were all in backoff but whose park has ended (due again, though no claim
   has woken them: with no worker running, none will);
2. one BatchGetItem per 100 such entries reads their waiting counts per priority band (`w<p>`);
3. per band with waiting jobs, one Query (Select=COUNT) on its `ready` partition counts the jobs NOT due
   yet (delayed, or in backoff), usually none: due = waiting - not due. Only when COUNT_CAP or more are not
   due does a second Query count the due ones directly; past COUNT_CAP on both sides the queue counts as
   `waiting - COUNT_CAP`, an upper bound, and only while at least COUNT_CAP of its jobs really are due;
4. running jobs: one Query (Select=COUNT) per `leases` partition (LEASE_SHARDS), at most the jobs running.

Requests per count: ACTIVE_SHARDS + PARKED_SHARDS + LEASE_SHARDS Queries (more only past 1 MB of keys
in a partition), plus ceil(E / 100) BatchGetItems and about one Query per band with work of the E entries
read; each Query reads a few items, so most cost 0.5 read units. Reads are eventually consistent: the count
is a gauge, a job created a moment ago may count from the next minute on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onward.domain.clock import Clock, system_clock
from onward.maintenance.backlog_types import TYPE_SAMPLE, DueHead, TypeDepth
from onward.maintenance.backlog_types import by_type as split_by_type
from onward.store.backlog_reads import COUNT_CAP, BacklogReads, Count
from onward.store.ports.ready_queues import ReadyQueue


@dataclass(frozen=True)
class Backlog:
    """One count: waiting jobs due now, jobs running under a lease, and the DynamoDB requests it took."""

    due: int
    running: int
    requests: int
    due_by_tenant: dict[str, int] = field(default_factory=dict)  # `due` by tenant (its OpenTelemetry gauge)
    # by tenant, then job type (onward.maintenance.backlog_types); only when count(by_type=True)
    due_by_type: dict[str, dict[str, TypeDepth]] = field(default_factory=dict)


def due_in_queue(waiting: int, not_due: Count, due: Count | None) -> int:
    """The due jobs of one ready queue holding `waiting` jobs, from the count of those not due yet and,
    when that one stopped at its cap, the count of the due ones (see the module's docstring)."""
    if not_due.complete:
        return max(0, waiting - not_due.items)
    if due is not None and due.complete:
        return due.items
    return max(COUNT_CAP, waiting - COUNT_CAP)


class BacklogCounter:
    """Counts the backlog of a deployment's job store."""

    def __init__(self, reads: BacklogReads, clock: Clock = system_clock) -> None:
        self._reads = reads
        self._clock = clock

    def count(self, *, by_type: bool = False) -> Backlog:
        """The backlog; with `by_type`, also each tenant's due jobs per type and their age (one more Query per
        band with due jobs: onward.maintenance.backlog_types)."""
        now = self._clock()
        heads: dict[str, list[DueHead]] = {}
        entries, requests = self._reads.entries_with_work(now)
        queues, used = self._reads.queue_entries(sorted(entries))
        requests += used
        due = 0
        due_by_tenant: dict[str, int] = {}
        for entry in queues:
            for band in entry.bands_with_work():
                queue = ReadyQueue(entry.shard, band)
                later = self._reads.count_queue(entry.tenant_id, queue, now, due=False)
                requests += 1
                sooner = None
                if not later.complete:
                    sooner = self._reads.count_queue(entry.tenant_id, queue, now, due=True)
                    requests += 1
                in_queue = due_in_queue(entry.bands[band], later, sooner)
                if by_type and in_queue > 0:
                    head = self._reads.due_head(entry.tenant_id, queue, now, TYPE_SAMPLE)
                    requests += 1
                    heads.setdefault(entry.tenant_id, []).append(DueHead(in_queue, head))
                due += in_queue
                due_by_tenant[entry.tenant_id] = due_by_tenant.get(entry.tenant_id, 0) + in_queue
        running, used = self._reads.count_running()
        types = {tenant: split_by_type(tenant_heads, now) for tenant, tenant_heads in heads.items()}
        return Backlog(due, running, requests + used, due_by_tenant, types)

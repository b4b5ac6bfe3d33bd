"""The job store's ports: the recorder's protocol split by role (job log, lease index, tenant counters,
parking, virtual clock; JobRecorder their union), the write plans it commits and the values it answers."""

from onward.store.ports.job_log import JobLog
from onward.store.ports.lease_index import LeaseIndex
from onward.store.ports.outcomes import CommitOutcome, CreateOutcome, ManyCreated, RenewalAnswer, Role, judge
from onward.store.ports.parking import Parking
from onward.store.ports.ready_queues import ReadyQueue, ready_queue, ready_shard
from onward.store.ports.recorder import JobRecorder
from onward.store.ports.rows import ActiveEntry, ActiveHead, DueJob, IdempotencyRecord, JobHistory, JobRow
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import QueueEntry, Tenant, TenantState
from onward.store.ports.virtual_clock import VirtualClock
from onward.store.ports.write_plans import (
    Admission,
    NewJobWrite,
    OverlapMark,
    QueueEntryUpdate,
    RunningUpdate,
    TransitionWrite,
    WaitingUpdate,
    ends_attempt,
    queue_entry_updates,
    running_update,
    waiting_update,
)

__all__ = [
    "ActiveEntry", "ActiveHead", "Admission", "CommitOutcome", "CreateOutcome", "DueJob", "IdempotencyRecord",
    "JobHistory", "JobLog", "JobRecorder", "JobRow", "LeaseIndex", "ManyCreated", "NewJobWrite", "OverlapMark",
    "Parking", "QueueEntry", "QueueEntryUpdate", "ReadyQueue", "RenewalAnswer", "Role", "RunningUpdate", "Tenant",
    "TenantCounters", "TenantState", "TransitionWrite", "VirtualClock", "WaitingUpdate", "ends_attempt", "judge",
    "queue_entry_updates", "ready_queue", "ready_shard", "running_update", "waiting_update",
]

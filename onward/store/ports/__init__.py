"""The job store's ports: the recorder's protocol split by role (job log, lease index, tenant counters,
parking, virtual clock; JobRecorder their union), the write plans it commits and the values it answers."""

from onward.store.ports.job_log import JobLog
from onward.store.ports.lease_index import LeaseIndex
from onward.store.ports.outcomes import CommitOutcome, CreateOutcome, ManyCreated, RenewalAnswer, Role, judge
from onward.store.ports.parking import Parking
from onward.store.ports.recorder import JobRecorder
from onward.store.ports.rows import ActiveEntry, DueJob, IdempotencyRecord, JobRow
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import (
    QueueEntry,
    Tenant,
    TenantState,
    queue_entry_from_values,
    tenant_from_values,
    tenant_state,
    usage_from_values,
)
from onward.store.ports.transaction_limits import (
    TRANSACTION_MAX_ACTIONS,
    TRANSACTION_MAX_BYTES,
    check_one_transaction,
    transaction_cuts,
    transaction_size,
)
from onward.store.ports.virtual_clock import VirtualClock
from onward.store.ports.write_plans import (
    Admission,
    JobRowUpdate,
    NewJobWrite,
    OverlapMark,
    QueueEntryUpdate,
    RunClose,
    RunningUpdate,
    TransitionWrite,
    WaitingUpdate,
    ends_attempt,
    queue_entry_updates,
    running_update,
    waiting_update,
)

__all__ = [
    "TRANSACTION_MAX_ACTIONS", "TRANSACTION_MAX_BYTES", "ActiveEntry", "Admission", "CommitOutcome",
    "CreateOutcome", "DueJob", "IdempotencyRecord", "JobLog", "JobRecorder", "JobRow", "JobRowUpdate",
    "LeaseIndex", "ManyCreated", "NewJobWrite", "OverlapMark", "Parking", "QueueEntry", "QueueEntryUpdate",
    "RenewalAnswer", "Role", "RunClose", "RunningUpdate", "Tenant", "TenantCounters", "TenantState",
    "TransitionWrite", "VirtualClock", "WaitingUpdate", "check_one_transaction", "ends_attempt", "judge",
    "queue_entry_from_values", "queue_entry_updates", "running_update", "tenant_from_values", "tenant_state",
    "transaction_cuts", "transaction_size", "usage_from_values", "waiting_update",
]

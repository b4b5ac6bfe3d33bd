"""The whole recorder: JobRecorder, the union of the roles (job log, lease index, tenant counters, parking,
virtual clock, progress), as the adapters implement it; each consumer in the store depends only on the roles it uses."""

from __future__ import annotations

from onward.store.ports.concurrency_keys import ConcurrencyCounts
from onward.store.ports.job_log import JobLog
from onward.store.ports.lease_index import LeaseIndex
from onward.store.ports.parking import Parking
from onward.store.ports.progress_log import ProgressLog
from onward.store.ports.rate_buckets import RateBuckets
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.unique_keys import UniqueKeyReads
from onward.store.ports.virtual_clock import VirtualClock


class JobRecorder(JobLog, LeaseIndex, TenantCounters, Parking, VirtualClock, ProgressLog,
                  UniqueKeyReads, RateBuckets, ConcurrencyCounts):  # unique, rate limits, concurrency (issue 37)
    """Storage for JobStore: every role in one adapter (onward.store.dynamo.recorder, onward.store.memory.recorder).
    Reads are strongly consistent; index queries (`due`, `expired_leases`, `active_head`) may lag behind the
    rows (DynamoDB's indexes do), so the store always re-reads a row before deciding. Implementations are
    thread-safe."""

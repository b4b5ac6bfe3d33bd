"""A tenant's ready queues as the store sees them (pure): one shard of one priority band each, which shard a
job waits in, and over how many partitions the head every claim reads (the `active` entries) is spread.
How a queue is keyed in DynamoDB is onward.store.dynamo.keys's (`ready_partition`)."""

from __future__ import annotations

from typing import NamedTuple

from onward.domain.models import Job

# The partitions of the `active` head: a deployment setting (Settings.active_shards, template parameter
# ActiveShards). A queue entry entering and leaving costs 2 write units, so tenants whose every job is alone
# need 32 partitions for 10,000 jobs/s; a claim reads the head of each (once per HEAD_CACHE_MS per process).
# Only ever raised: entries in a partition past a lowered count are not read until a job enters them again.
DEFAULT_ACTIVE_SHARDS = 4  # a local stack (`onward up`, tests): each head read is a Query per partition
MAX_ACTIVE_SHARDS = 64


class ReadyQueue(NamedTuple):
    """One ready queue of a tenant: one shard of one priority band. A claim reads the bands from the highest
    priority down, so a due job of a higher priority goes first."""

    shard: int
    priority: int


def ready_shard(job_id: str, shards: int) -> int:
    """The ready shard a job waits in, of its tenant's `shards`."""
    return int(job_id[:8], 16) % shards


def ready_queue(job: Job, shards: int) -> ReadyQueue:
    """The ready queue a job waits in while it is queued or in retry_wait."""
    return ReadyQueue(ready_shard(job.job_id, shards), job.priority)

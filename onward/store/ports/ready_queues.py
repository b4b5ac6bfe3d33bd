"""A tenant's ready queues: one per ready shard and priority band, the job's shard drawn from its id (pure);
where each is kept is the adapter's (onward.store.dynamo.keys.ready_partition)."""

from __future__ import annotations

from typing import NamedTuple

from onward.domain.models import Job


def ready_shard(job_id: str, shards: int) -> int:
    return int(job_id[:8], 16) % shards


class ReadyQueue(NamedTuple):
    """One of a tenant's ready queues: one shard of one priority band. A claim reads the bands from the
    highest priority down, so a due job of a higher priority goes first."""

    shard: int
    priority: int


def ready_queue(job: Job, shards: int) -> ReadyQueue:
    return ReadyQueue(ready_shard(job.job_id, shards), job.priority)

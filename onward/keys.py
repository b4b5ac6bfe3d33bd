"""Where every item of the job store lives and what it holds: key strings, the `Entity` enum and the item
shapes as plain values (pure). Both recorders store exactly these items: onward.dynamo_recorder in
DynamoDB's wire format, onward.memory_recorder as they are.

Jobs table (`pk` / `sk`):
- job row `JOB#<id>` / `JOB`, with the sparse index keys `ready_pk` + `ready_due` (index `ready`: present
  only while queued or retry_wait) and `lease_pk` + `lease_expires_at` (index `leases`: only while running);
- run record `JOB#<id>` / `RUN#<attempt, 6 digits>`; result `JOB#<id>` / `RESULT`;
- idempotency `IDEM#<tenant>#<key>` / `IDEM` (the job id and the digest of the request);
- under `TENANTS`, per tenant `t`: its settings `t`, its RUNNING counter `t#RUNNING` and its WAITING
  counters `t#WAITING#<shard>#<priority>` (onward.store explains their precision and cost);
- TTL `expires_at` (epoch seconds; `retention_s` is the job retention) on a job's items once they may go:
  the job row and the result `retention_s` after the job ended (a job that has not ended has none, so it
  never expires), a run record `retention_s` after its attempt ended, an idempotency item `retention_s`
  after the job was created (the Idempotency-Key's window). Tenant items never expire.
Outbox table (`job_id` / `version`): one event per version, with `time_bucket` (index `by_time`) and
`expires_at` (TTL).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from onward.clock import EpochMs
from onward.dynamo import json_size
from onward.lifecycle import Change
from onward.models import Job, OutboxEvent, Run
from onward.states import CLAIMABLE_STATES, JobState, is_terminal

JOB_PREFIX = "JOB#"
JOB_SK = "JOB"
RUN_PREFIX = "RUN#"
RESULT_SK = "RESULT"
IDEMPOTENCY_PREFIX = "IDEM#"
IDEMPOTENCY_SK = "IDEM"
TENANTS_PK = "TENANTS"
RUNNING_SUFFIX = "#RUNNING"
WAITING_INFIX = "#WAITING#"
LEASE_PREFIX = "LEASE#"
LEASE_SHARDS = 4  # partitions of the `leases` index, so the reaper's reads are never one hot key

# Attributes of a job row that only place it (keys, indexes and TTL), not part of the Job.
JOB_STORAGE_ONLY = ("pk", "sk", "entity", "ready_pk", "ready_due", "lease_pk", "ready_shards", "expires_at")
# Attributes of a run item that only place it (keys and TTL), not part of the Run.
RUN_STORAGE_ONLY = ("pk", "sk", "entity", "expires_at")
# Attributes of an outbox item that only place it (index and TTL), not part of the event.
OUTBOX_STORAGE_ONLY = ("time_bucket", "expires_at")


class Entity(StrEnum):
    """What an item of the jobs table is (its `entity` attribute; idempotency items have none)."""

    JOB = "job"
    RUN = "run"
    RESULT = "result"
    TENANT = "tenant"  # a tenant's dispatch settings
    TENANT_RUNNING = "tenant_running"  # a tenant's RUNNING counter (dispatch.Usage)
    TENANT_WAITING = "tenant_waiting"  # one of a tenant's WAITING counters (one per ReadyQueue)


class Key(NamedTuple):
    """The primary key of an item of the jobs table."""

    pk: str
    sk: str


def job_pk(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}"


def job_id_of(pk: str) -> str:
    """The job id in a job item's partition key."""
    return pk.removeprefix(JOB_PREFIX)


def job_key(job_id: str) -> Key:
    return Key(job_pk(job_id), JOB_SK)


def run_sk(attempt: int) -> str:
    return f"{RUN_PREFIX}{attempt:06d}"


def run_key(job_id: str, attempt: int) -> Key:
    return Key(job_pk(job_id), run_sk(attempt))


def result_key(job_id: str) -> Key:
    return Key(job_pk(job_id), RESULT_SK)


def idempotency_key(tenant_id: str, key: str) -> Key:
    return Key(f"{IDEMPOTENCY_PREFIX}{tenant_id}#{key}", IDEMPOTENCY_SK)


def tenant_key(tenant_id: str) -> Key:
    return Key(TENANTS_PK, tenant_id)


def running_key(tenant_id: str) -> Key:
    return Key(TENANTS_PK, f"{tenant_id}{RUNNING_SUFFIX}")


def tenant_of(sk: str) -> str:
    """The tenant an item under `TENANTS` belongs to (tenant ids hold no `#`)."""
    return sk.split("#", 1)[0]


def ready_shard(job_id: str, shards: int) -> int:
    return int(job_id[:8], 16) % shards


class ReadyQueue(NamedTuple):
    """One partition of a tenant's `ready` index: one shard of one priority band. A claim reads the bands
    from the highest priority down, so a due job of a higher priority goes first."""

    shard: int
    priority: int

    def partition(self, tenant_id: str) -> str:
        return f"{tenant_id}#{self.shard}#{self.priority}"


def ready_queue(job: Job, shards: int) -> ReadyQueue:
    return ReadyQueue(ready_shard(job.job_id, shards), job.priority)


def waiting_key(tenant_id: str, queue: ReadyQueue) -> Key:
    return Key(TENANTS_PK, f"{tenant_id}{WAITING_INFIX}{queue.shard}#{queue.priority}")


def lease_partition(job_id: str) -> str:
    return lease_shard_partition(int(job_id[-8:], 16) % LEASE_SHARDS)


def lease_shard_partition(shard: int) -> str:
    """The `leases` index partition of one lease shard (0 .. LEASE_SHARDS - 1)."""
    return f"{LEASE_PREFIX}{shard}"


def time_bucket(occurred_at: str) -> str:
    """The `by_time` index partition of an outbox event: its hour, e.g. 2026-11-30T06 (the index is read
    hour by hour by onward.outbox.OutboxReader.window)."""
    return occurred_at[:13]


# --- TTL ---------------------------------------------------------------------------------------------------

def ttl_after(at: EpochMs, retention_s: int) -> int:
    """The `expires_at` of an item kept `retention_s` after `at`: epoch SECONDS, as DynamoDB's TTL reads it."""
    return at // 1000 + retention_s


def job_expires_at(job: Job, retention_s: int) -> int | None:
    """When a job's row (and its result) may go: `retention_s` after the transition that ended it; None while
    it has not ended, so a queued or running job never expires. A replay (dead or quarantined -> queued)
    makes it None again, and the row loses its `expires_at`."""
    return ttl_after(job.updated_at, retention_s) if is_terminal(job.state) else None


# --- item shapes (plain values; None attributes are left out, as DynamoDB stores them) ---------------------

def job_item(job: Job, ready_shards: int, retention_s: int) -> dict[str, Any]:
    """The job row as stored, with the sparse index keys that put it in `ready` or `leases`, and its TTL
    once it has ended (`retention_s`: the job retention, job_expires_at)."""
    pk, sk = job_key(job.job_id)
    row = {"pk": pk, "sk": sk, "entity": Entity.JOB.value, **job.model_dump(mode="json")}
    row["ready_shards"] = ready_shards
    row["expires_at"] = job_expires_at(job, retention_s)
    if job.state in CLAIMABLE_STATES:
        row["ready_pk"] = ready_queue(job, ready_shards).partition(job.tenant_id)
        row["ready_due"] = job.not_before
    if job.state is JobState.RUNNING:
        row["lease_pk"] = lease_partition(job.job_id)
    return {name: value for name, value in row.items() if value is not None}


def job_from_values(values: dict[str, Any]) -> tuple[Job, int]:
    """The Job a stored job row holds, and the number of ready shards it was queued under."""
    shards = values.get("ready_shards", 1)
    return Job.model_validate({n: v for n, v in values.items() if n not in JOB_STORAGE_ONLY}), shards


def run_item(run: Run) -> dict[str, Any]:
    """An attempt's run record as the claim opens it: no `expires_at` while the attempt runs (the transition
    that ends it stamps one: recorder.TransitionWrite.of)."""
    pk, sk = run_key(run.job_id, run.attempt)
    values = {"pk": pk, "sk": sk, "entity": Entity.RUN.value, **run.model_dump(mode="json")}
    return {name: value for name, value in values.items() if value is not None}


def run_from_values(values: dict[str, Any]) -> Run:
    """The run record a stored run item (sk `RUN#<attempt>`) holds."""
    return Run.model_validate({n: v for n, v in values.items() if n not in RUN_STORAGE_ONLY})


def result_item(change: Change, retention_s: int) -> dict[str, Any]:
    """The completing transition's result (`value` is stored even when it is None), expiring with the job
    row it ended."""
    pk, sk = result_key(change.after.job_id)
    item = {"pk": pk, "sk": sk, "entity": Entity.RESULT.value, "attempt": change.after.attempt,
            "size_bytes": json_size(change.result), "value": change.result}
    expires = job_expires_at(change.after, retention_s)
    if expires is not None:
        item["expires_at"] = expires
    return item


def idempotency_item(job: Job, key: str, digest: str, retention_s: int) -> dict[str, Any]:
    """The Idempotency-Key `key` of the job's tenant, used by the request of `digest` to create `job`; kept
    `retention_s` after the job was created (the key's window: a retry after it creates a new job)."""
    pk, sk = idempotency_key(job.tenant_id, key)
    return {"pk": pk, "sk": sk, "job_id": job.job_id, "digest": digest,
            "expires_at": ttl_after(job.created_at, retention_s)}


def tenant_item(tenant_id: str, weight: float, cap: int | None, ready_shards: int) -> dict[str, Any]:
    pk, sk = tenant_key(tenant_id)
    values = {"pk": pk, "sk": sk, "entity": Entity.TENANT.value, "weight": weight, "cap": cap,
              "ready_shards": ready_shards}
    return {name: value for name, value in values.items() if value is not None}


def outbox_item(change: Change, retention_s: int) -> dict[str, Any]:
    """The outbox event of a committed transition, with its `by_time` bucket and its TTL."""
    size = json_size(change.result) if change.has_result else None
    event = OutboxEvent.of(change.after, result=change.result, result_size=size)
    item = {
        **event.model_dump(mode="json", by_alias=True),
        "time_bucket": time_bucket(event.occurred_at),
        "expires_at": ttl_after(change.after.updated_at, retention_s),
    }
    return {name: value for name, value in item.items() if value is not None}


def event_from_values(values: dict[str, Any]) -> OutboxEvent:
    return OutboxEvent.model_validate({n: v for n, v in values.items() if n not in OUTBOX_STORAGE_ONLY})

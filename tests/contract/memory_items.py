"""What the in-memory recorder holds, rendered as the DynamoDB items the same writes leave on DynamoDB (the
shapes of onward.store.dynamo.keys, with the TTLs the store stamps): so that one raw view, read behind the
store's back, compares both backends item for item (tests/contract/test_backends_agree.py) and checks
atomicity on each (a write refused leaves every item as it was)."""

from __future__ import annotations

import math
from typing import Any

from onward.domain.clock import epoch_ms
from onward.domain.models import Job, Run
from onward.domain.retention import RetentionPolicy
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.keys import (
    RESULT_ATTRIBUTE,
    RESULT_SIZE_ATTRIBUTE,
    SERVED_SINCE_RETURN,
    Entity,
    active_shard_partition,
    band_attribute,
    clock_key,
    idempotency_item,
    job_expires_at,
    job_item,
    open_attempt_fields,
    overlap_partition,
    parked_partition,
    queue_key,
    result_key,
    run_item,
    running_key,
    tenant_items,
    time_bucket,
    ttl_after,
)
from onward.store.dynamo.unique_keys import unique_item
from onward.store.memory.recorder import MemoryContents
from onward.store.memory.state import QueueEntryState, RunningCounter, stored
from onward.store.ports.unique_keys import UniqueClaim

Items = list[dict[str, Any]]


def _run(run: Run, overlap_at: int | None, job_retention_s: int) -> dict[str, Any]:
    """A run record: its TTL from when its attempt ended (a run fenced while open: from the late report)."""
    item = run_item(run)
    ended = run.finished_at if run.finished_at is not None else run.late_report_at
    if run.outcome is not None and ended is not None:
        item["expires_at"] = ttl_after(ended, job_retention_s)
    if overlap_at is not None:
        item["overlap_pk"], item["overlap_at"] = overlap_partition(overlap_at), overlap_at
    return item


def _partial(item: dict[str, Any]) -> dict[str, Any]:
    """A running attempt's record as DynamoDB holds it before the attempt's close: only what a progress update or
    an overlap mark wrote (the rest is the job row's, issue 34)."""
    return {name: value for name, value in item.items()
            if name in ("pk", "sk", "progress", "overlapped_with", "overlap_pk", "overlap_at")}


def _reported_size(contents: MemoryContents, job_id: str) -> int:
    """The size of a job's result as reported, before it was kept (its completion's event has it)."""
    return max(event.result_size_bytes or 0 for event in contents.events[job_id])


def _counter_attributes(counter: RunningCounter) -> dict[str, Any]:
    """A RUNNING counter's attributes on the queue entry that keeps it (issue 34): each only once something was
    added to it (DynamoDB's ADD leaves zero terms out)."""
    usage = counter.usage
    item: dict[str, Any] = {}
    if counter.charged:
        item["running"], item["started_ms_sum"] = usage.running, usage.started_ms_sum
    if usage.ended_ms:
        item["ended_ms"] = usage.ended_ms
    if usage.ended:
        item["ended"] = usage.ended
    if counter.entry_lift is not None:  # the lift a claim serving the returning tenant raised on it
        item["lift_vt"] = counter.entry_lift
    return item


def _lift(tenant_id: str, shard: int, counter: RunningCounter) -> dict[str, Any]:
    """The older RUNNING item that holds the lift a resume raised."""
    pk, sk = running_key(tenant_id, shard)
    return {"pk": pk, "sk": sk, "entity": Entity.TENANT_RUNNING.value, "tenant_id": tenant_id, "shard": shard,
            "lift_vt": counter.item_lift}


def _counters(contents: MemoryContents, active_shards: int) -> Items:
    """The queue entries, each with the RUNNING counter of its shard, and the items holding lifts."""
    entries = {(entry.tenant_id, entry.shard): _queue(entry, active_shards) for entry in contents.queues.values()}
    lifts = []
    for (tenant_id, shard), counter in contents.running.items():
        if attributes := _counter_attributes(counter):
            pk, sk = queue_key(tenant_id, shard)
            blank = {"pk": pk, "sk": sk, "entity": Entity.TENANT_QUEUE.value, "tenant_id": tenant_id, "shard": shard}
            entries[(tenant_id, shard)] = entries.get((tenant_id, shard), blank) | attributes
        if counter.item_lift is not None:
            lifts.append(_lift(tenant_id, shard, counter))
    return [*lifts, *entries.values()]


def _queue(entry: QueueEntryState, active_shards: int) -> dict[str, Any]:
    pk, sk = queue_key(entry.tenant_id, entry.shard)
    item: dict[str, Any] = {"pk": pk, "sk": sk, "entity": Entity.TENANT_QUEUE.value, "tenant_id": entry.tenant_id,
                            "shard": entry.shard, "waiting": entry.waiting}
    item |= {band_attribute(priority): count for priority, count in entry.bands.items()}
    if entry.entered:
        item["entered"] = entry.entered
    if entry.returned_at is None:
        item["returned_vt"] = SERVED_SINCE_RETURN
    elif entry.returned_at != math.inf:
        item["returned_vt"] = entry.returned_at
    if entry.active_vt is not None:
        item["active_vt"] = entry.active_vt
    if entry.active:
        item["active_pk"] = active_shard_partition(entry.partition)
    if entry.parked_until is not None:
        item["parked_pk"] = parked_partition(entry.tenant_id, entry.shard)
        item["parked_until"] = entry.parked_until
    return item


def _run_retention_s(job: Job, run: Run, policy: RetentionPolicy) -> int:
    """A run record's retention as the store chose it when the attempt ended: the job's outcome's when the
    attempt ended the job (the job's last attempt, ended at its last transition), else the longest of its
    outcomes' (RetentionPolicy.for_job)."""
    ended_the_job = run.attempt == job.attempt and run.finished_at == job.updated_at
    return policy.for_job(job.tenant_id, job.type, job.state.value if ended_the_job else "running")


def jobs_table(contents: MemoryContents, *, active_shards: int, job_retention_s: int,
               policy: RetentionPolicy | None = None) -> Items:
    """Every item of the jobs table the held values are on DynamoDB; `policy`: the store's retention policy
    (default: `job_retention_s` for every outcome), `job_retention_s` the Idempotency-Key's window."""
    policy = policy or RetentionPolicy.uniform(job_retention_s)
    items: Items = []
    for row in contents.rows.values():
        job = row.job
        items.append(job_item(job, row.ready_shards, policy.for_job(job.tenant_id, job.type, job.state.value),
                              row.running_shard) | (open_attempt_fields(row.opened) if row.opened else {}))
    for job_id, runs in contents.runs.items():
        job = contents.rows[job_id].job
        running = contents.rows[job_id].open_run()
        for run, overlap_at in runs:
            item = _run(run, overlap_at, _run_retention_s(job, run, policy))
            if running is not None and run.attempt == running.attempt and run.outcome is None:
                item = _partial(item)  # (the running attempt's record before its close: issue 34)
            if (job_id, run.attempt) in contents.run_results:  # the completing run's (issue 34)
                item |= {RESULT_ATTRIBUTE: contents.run_results[(job_id, run.attempt)],
                         RESULT_SIZE_ATTRIBUTE: _reported_size(contents, job_id)}
            items.append(item)
    for job_id, value in contents.old_results.items():  # the layout before issue 34
        job = contents.rows[job_id].job
        pk, sk = result_key(job_id)
        result = {"pk": pk, "sk": sk, "entity": Entity.RESULT.value, "attempt": job.attempt,
                  "size_bytes": _reported_size(contents, job_id), "value": value}
        expires = job_expires_at(job, policy.for_job(job.tenant_id, job.type, job.state.value))
        items.append(result if expires is None else {**result, "expires_at": expires})
    for (_, key), record in contents.keys.items():
        items.append(idempotency_item(contents.rows[record.job_id].job, key, record.digest, job_retention_s))
    for (tenant_id, key), hold in contents.unique_holds.items():  # unique jobs (issue 37)
        items.append(from_item(unique_item(tenant_id, UniqueClaim(key, hold, 0))))
    for tenant in contents.tenants.values():
        items += tenant_items(tenant.tenant_id, tenant.policy.weight, tenant.policy.cap, tenant.ready_shards,
                              tenant.base)
    items += _counters(contents, active_shards)
    for shard, value in contents.clock.items():
        pk, sk = clock_key(shard)
        items.append({"pk": pk, "sk": sk, "entity": Entity.CLOCK.value, "v": value})
    return [stored(item) for item in items]  # numbers as DynamoDB keeps them


def outbox_table(contents: MemoryContents, *, retention_s: int) -> Items:
    """Every item of the outbox table the held events are on DynamoDB."""
    items: Items = []
    for events in contents.events.values():
        for event in events:
            values = {name: value for name, value in event.model_dump(mode="json", by_alias=True).items()
                      if value is not None}
            values["time_bucket"] = time_bucket(event.occurred_at, event.job_id, event.version)
            values["expires_at"] = ttl_after(epoch_ms(event.occurred_at), retention_s)
            items.append(values)
    return [stored(item) for item in items]

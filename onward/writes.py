"""What a transition writes: item keys and shapes, and the TransactWriteItems actions a `Change` becomes
(pure: no I/O). The store (onward.store) reads, decides with onward.lifecycle, and commits these.

Under the partition key `TENANTS` live each tenant's registry item and its dispatch counters (see
onward.store for their layout and precision).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from onward.clock import EpochMs
from onward.dispatch import UsageChange, on_claim, on_end
from onward.dynamo import Item, from_item, json_size, to_attribute, to_item
from onward.lifecycle import Change
from onward.models import Job, OutboxEvent, Run
from onward.states import CLAIMABLE_STATES, JobState, RunOutcome

LEASE_SHARDS = 4  # partitions of the `leases` index, so the reaper's reads are never one hot key
TENANTS_PK = "TENANTS"


class TenantEntity(StrEnum):
    """The kinds of item under the `TENANTS` partition key (their `entity` attribute)."""

    SETTINGS = "tenant"
    RUNNING = "tenant_running"
    WAITING = "tenant_waiting"


@dataclass(frozen=True)
class Slot:
    """How a claim takes a running slot: keep the tenant below `cap` (None: flex, or no cap), lift a
    returning tenant's used worker time to `lift_to_ms` (only if it still has nothing running), and, when
    flexing, only while every tenant in `others_at_cap` (tenant id, cap) is still at its cap."""

    cap: int | None
    lift_to_ms: int | None = None
    others_at_cap: tuple[tuple[str, int], ...] = ()


def time_bucket(occurred_at: str) -> str:
    """The `by_time` index partition of an outbox event: its hour, e.g. 2026-11-30T06 (the index is read
    hour by hour by onward.outbox.OutboxReader.window)."""
    return occurred_at[:13]


def job_key(job_id: str) -> Item:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}


def run_key(job_id: str, attempt: int) -> Item:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": f"RUN#{attempt:06d}"}}


def idempotency_item_key(tenant_id: str, key: str) -> Item:
    return {"pk": {"S": f"IDEM#{tenant_id}#{key}"}, "sk": {"S": "IDEM"}}


def ready_shard(job_id: str, shards: int) -> int:
    return int(job_id[:8], 16) % shards


def running_key(tenant_id: str) -> Item:
    return {"pk": {"S": TENANTS_PK}, "sk": {"S": f"{tenant_id}#RUNNING"}}


class ReadyQueue(NamedTuple):
    """One partition of a tenant's `ready` index: one shard of one priority band. A claim reads the bands
    from the highest priority down, so a due job of a higher priority goes first."""

    shard: int
    priority: int

    def partition(self, tenant_id: str) -> str:
        return f"{tenant_id}#{self.shard}#{self.priority}"


def ready_queue(job: Job, shards: int) -> ReadyQueue:
    return ReadyQueue(ready_shard(job.job_id, shards), job.priority)


def waiting_key(tenant_id: str, queue: ReadyQueue) -> Item:
    return {"pk": {"S": TENANTS_PK}, "sk": {"S": f"{tenant_id}#WAITING#{queue.shard}#{queue.priority}"}}


def job_attributes(job: Job, ready_shards: int) -> dict[str, Any]:
    """The job row as stored, with the sparse index keys that put it in `ready` or `leases`."""
    row = {"pk": f"JOB#{job.job_id}", "sk": "JOB", "entity": "job", **job.model_dump(mode="json")}
    row["ready_shards"] = ready_shards
    if job.state in CLAIMABLE_STATES:
        row["ready_pk"] = ready_queue(job, ready_shards).partition(job.tenant_id)
        row["ready_due"] = job.not_before
    if job.state is JobState.RUNNING:
        row["lease_pk"] = f"LEASE#{int(job.job_id[-8:], 16) % LEASE_SHARDS}"
    return {name: value for name, value in row.items() if value is not None}


def job_from_item(item: Item) -> tuple[Job, int]:
    values = from_item(item)
    shards = values.pop("ready_shards", 1)
    for derived in ("pk", "sk", "entity", "ready_pk", "ready_due", "lease_pk"):
        values.pop(derived, None)
    return Job.model_validate(values), shards


def run_from_item(item: Item) -> Run:
    """The run record an item of the jobs table (sk `RUN#<attempt>`) holds."""
    values = from_item(item)
    for derived in ("pk", "sk", "entity"):
        values.pop(derived, None)
    return Run.model_validate(values)


def ends_attempt(change: Change) -> bool:
    """True for a transition that stops a running attempt (its RUNNING counter goes down)."""
    return (change.before is not None and change.before.state is JobState.RUNNING
            and change.after.state is not JobState.RUNNING)


@dataclass(frozen=True)
class TransitionWrites:
    """Builds the actions of one transition's transaction for these tables."""

    jobs_table: str
    outbox_table: str
    retention_s: int

    def open_run(self, change: Change) -> dict[str, Any]:
        assert change.open_run is not None
        return {"Put": {
            "TableName": self.jobs_table,
            "Item": {**run_key(change.after.job_id, change.open_run.attempt),
                     **to_item({"entity": "run", **change.open_run.model_dump(mode="json")})},
            "ConditionExpression": "attribute_not_exists(pk)",
        }}

    def result_put(self, change: Change) -> dict[str, Any]:
        return {"Put": {
            "TableName": self.jobs_table,
            "Item": {"pk": {"S": f"JOB#{change.after.job_id}"}, "sk": {"S": "RESULT"},
                     **to_item({"entity": "result", "attempt": change.after.attempt,
                                "size_bytes": json_size(change.result)}),
                     "value": to_attribute(change.result)},
            "ConditionExpression": "attribute_not_exists(pk)",
        }}

    def job_update(self, change: Change, shards: int) -> dict[str, Any]:
        before = job_attributes(change.before, shards)  # type: ignore[arg-type]
        after = job_attributes(change.after, shards)
        changed = {name: value for name, value in after.items() if before.get(name) != value}
        removed = [name for name in before if name not in after]
        names = {f"#a{i}": name for i, name in enumerate([*changed, *removed])}
        aliases = {name: alias for alias, name in names.items()}
        values = {f":v{i}": to_attribute(value) for i, value in enumerate(changed.values())}
        clauses = []
        if changed:
            clauses.append("SET " + ", ".join(f"{aliases[n]} = :v{i}" for i, n in enumerate(changed)))
        if removed:
            clauses.append("REMOVE " + ", ".join(aliases[n] for n in removed))
        names |= {"#state": "state", "#version": "version", "#attempt": "attempt"}
        values |= {
            ":expected_state": {"S": change.before.state.value},  # type: ignore[union-attr]
            ":expected_version": {"N": str(change.before.version)},  # type: ignore[union-attr]
            ":expected_attempt": {"N": str(change.before.attempt)},  # type: ignore[union-attr]
        }
        condition = "#state = :expected_state AND #version = :expected_version AND #attempt = :expected_attempt"
        if change.close_run is not None and change.close_run.outcome is RunOutcome.LEASE_EXPIRED:
            # A heartbeat may have renewed the lease since the reaper read the row.
            names["#lease"] = "lease_expires_at"
            values[":reaped_at"] = {"N": str(change.close_run.finished_at)}
            condition += " AND #lease <= :reaped_at"
        return {"Update": {
            "TableName": self.jobs_table,
            "Key": job_key(change.after.job_id),
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }}

    def waiting_update(self, change: Change, shards: int) -> dict[str, Any] | None:
        """+1 / -1 on the tenant's WAITING counter of the job's ready shard when the job enters / leaves
        the queue (queued or retry_wait)."""
        was = change.before is not None and change.before.state in CLAIMABLE_STATES
        delta = (change.after.state in CLAIMABLE_STATES) - was
        if not delta:
            return None
        queue = ready_queue(change.after, shards)
        return {"Update": {
            "TableName": self.jobs_table,
            "Key": waiting_key(change.after.tenant_id, queue),
            "UpdateExpression": "SET #entity = :entity, #shard = :shard, #priority = :priority ADD #waiting :delta",
            "ExpressionAttributeNames": {"#entity": "entity", "#shard": "shard", "#priority": "priority",
                                         "#waiting": "waiting"},
            "ExpressionAttributeValues": {":entity": {"S": TenantEntity.WAITING.value},
                                          ":shard": {"N": str(queue.shard)}, ":priority": {"N": str(queue.priority)},
                                          ":delta": {"N": str(delta)}},
        }}

    def running_update(
        self, change: Change, slot: Slot | None, claimed_at: EpochMs | None
    ) -> dict[str, Any] | None:
        """The tenant's RUNNING counter when an attempt starts (claim: `dispatch.on_claim`, conditional on
        the cap unless flexing, and the lift of a returning tenant) or ends (`dispatch.on_end`: complete,
        fail, reap, release, cancel acknowledgement)."""
        before = change.before
        was_running = before is not None and before.state is JobState.RUNNING
        delta = (change.after.state is JobState.RUNNING) - was_running
        if not delta:
            return None
        names = {"#entity": "entity"}
        values: dict[str, Any] = {":entity": {"S": TenantEntity.RUNNING.value}}
        sets = ["#entity = :entity"]
        condition = None
        if delta > 0:
            assert change.open_run is not None
            usage_change = on_claim(change.open_run.claimed_at)
            slot = slot or Slot(cap=None)
            if slot.lift_to_ms is not None:
                assert usage_change.ended_ms == 0
                names["#lifted"] = "ended_ms"
                sets.append("#lifted = :lift")
                values |= {":lift": {"N": str(slot.lift_to_ms)}, ":zero": {"N": "0"}}
                condition = "attribute_not_exists(#running) OR #running = :zero"
            elif slot.cap is not None:
                values[":cap"] = {"N": str(slot.cap)}
                condition = "attribute_not_exists(#running) OR #running < :cap"
        else:
            assert before is not None and change.close_run is not None
            assert claimed_at is not None, "the store reads it from the run record when the caller has none"
            usage_change = on_end(claimed_at, change.close_run.finished_at)
        adds = usage_adds(usage_change, names, values)
        update: dict[str, Any] = {
            "TableName": self.jobs_table,
            "Key": running_key(change.after.tenant_id),
            "UpdateExpression": f"SET {', '.join(sets)} ADD {adds}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if condition is not None:
            update["ConditionExpression"] = condition
        return {"Update": update}

    def still_at_cap(self, tenant_id: str, cap: int) -> dict[str, Any]:
        """A flexing claim's check that another tenant with waiting jobs is still at its cap."""
        return {"ConditionCheck": {
            "TableName": self.jobs_table,
            "Key": running_key(tenant_id),
            "ConditionExpression": "#running >= :cap",
            "ExpressionAttributeNames": {"#running": "running"},
            "ExpressionAttributeValues": {":cap": {"N": str(cap)}},
        }}

    def run_close(self, change: Change) -> dict[str, Any]:
        closure = change.close_run
        assert closure is not None
        fields = {"outcome": closure.outcome.value, "finished_at": closure.finished_at}
        if closure.error is not None:
            fields["error"] = closure.error.model_dump(mode="json")
        return {"Update": {
            "TableName": self.jobs_table,
            "Key": run_key(change.after.job_id, closure.attempt),
            "UpdateExpression": "SET " + ", ".join(f"#{name} = :{name}" for name in fields),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#outcome)",
            "ExpressionAttributeNames": {f"#{name}": name for name in fields},
            "ExpressionAttributeValues": {f":{name}": to_attribute(value) for name, value in fields.items()},
        }}

    def outbox_put(self, change: Change) -> dict[str, Any]:
        size = json_size(change.result) if change.has_result else None
        event = OutboxEvent.of(change.after, result=change.result, result_size=size)
        committed_s = change.after.updated_at // 1000
        item = {
            **event.model_dump(mode="json", by_alias=True),
            "time_bucket": time_bucket(event.occurred_at),
            "expires_at": committed_s + self.retention_s,
        }
        return {"Put": {
            "TableName": self.outbox_table,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(job_id)",
        }}


def usage_adds(change: UsageChange, names: dict[str, str], values: dict[str, Any]) -> str:
    """`change` as the ADD clause of an update expression (names and values put into `names`, `values`);
    `running` is always named (conditions use it), zero terms are left out."""
    names["#running"] = "running"
    clauses = []
    for attribute, amount in (("running", change.running), ("ended_ms", change.ended_ms),
                              ("started_ms_sum", change.started_ms_sum)):
        if amount:
            names[f"#{attribute}"] = attribute
            values[f":{attribute}"] = {"N": str(amount)}
            clauses.append(f"#{attribute} :{attribute}")
    return ", ".join(clauses)

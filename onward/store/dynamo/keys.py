"""Where every item of the job store lives and what it holds: key strings, the `Entity` enum and the item
shapes as plain values (pure). onward.store.dynamo.recorder stores them in DynamoDB's wire format (the
in-memory recorder holds domain values, not these items).

Jobs table (`pk` / `sk`):
- job row `JOB#<id>` / `JOB`, with the sparse index keys `ready_pk` + `ready_due` (index `ready`: present
  only while queued or retry_wait) and `lease_pk` + `lease_expires_at` (index `leases`: only while running);
  while running, its attempt's claim `run_claimed_at` + `run_lease_expires_at` (ports.rows.OpenAttempt) and the
  counter it is charged to: `charged_entry` (queue entry j), or `running_shard` (RUNNING counter j, a claim
  before the counters moved onto the queue entries);
- run record `JOB#<id>` / `RUN#<attempt, 6 digits>`, written whole by the transaction that ends its attempt
  (the claim writes none: a running attempt's run is read from the row, merged with a partial record holding
  only its progress or overlap marks, if any), the completing attempt's with the job's result (`result`,
  `result_size_bytes`); a job completed before results moved there
  (issue 34) may have it in a result item `JOB#<id>` / `RESULT`, read as a fallback; a run whose running
  interval overlapped another attempt's (onward.domain.overlaps) carries the sparse index keys `overlap_pk`
  (`OVERLAP#<UTC day>`) + `overlap_at` (index `overlaps`, KEYS_ONLY: when the overlap began; `onward overlaps`);
- idempotency `IDEM#<tenant>#<key>` / `IDEM` (the job id and the digest of the request);
- unique key `UNIQUE#<tenant>#<key>` / `UNIQUE` (the job holding it and until when: onward.store.dynamo.unique_keys);
- a tenant's settings (weight, cap, ready_shards, and its virtual base `base_vt` / `base_ms`:
  dispatch.VirtualBase, moved when its weight changes) twice, written together only when an operator or the
  tenant's first job registers it (onward.store.tenants): `TENANT#t` / `SETTINGS`, the copy claims read (a key
  of its own, so no partition is read by every claim), and under `TENANTS` / `t`, the registry that
  operators list;
- per tenant `t`, under keys of its own (no key is written by every tenant's jobs): its queue entries
  `TENANT#t#QUEUE#<k>` / `QUEUE`, one per ready shard, each also the RUNNING counter of running shard `k`
  (dispatch.Usage: `running`, `ended_ms`, `started_ms_sum`, `ended`; the cap split over them, and `lift_vt`, the
  lift the claims serving the returning tenant raised there), so that a claim charging the shard it takes its
  job from updates one item (issue 34); its older RUNNING counters `TENANT#t#RUNNING#<j>` / `RUNNING`, which
  hold the lift a resume raises (`lift_vt`, on the first) and what attempts claimed before the counters moved
  were charged (written by those attempts' ends only; a shard's usage is the sum of both items' counts, its
  lift their highest); and on each queue entry: `waiting` and per priority band
  `w<p>` (queued + retry_wait jobs there), and while it may hold work the sparse index keys `active_pk`
  (`ACTIVE#<h>`, h a hash of tenant and shard over the deployment's active shards) + `active_vt` (index `active`,
  KEYS_ONLY: the claim reads only its head, onward.store.claims); an entry whose waiting jobs are all in backoff
  is parked instead: `parked_pk` (`PARKED#<h>`) + `parked_until` (index `parked`, KEYS_ONLY), woken back
  into `active` when they fall due, or at once by any job entering it (`entered` counts those);
- the system virtual clock: `CLOCK#<i>` / `CLOCK` (`v`), CLOCK_SHARDS items, the clock being their maximum;
- rate limits (issue 37): a tenant's limit definitions `RATELIMITS#t` / `<key>` (`limit`, `period_s`), and
  each GCRA bucket `RATE#t#<key>` / `BUCKET` (`tat`, epoch microseconds: onward.domain.rate_limits);
- TTL `expires_at` (epoch seconds; `retention_s` is the job retention) on a job's items once they may go:
  the job row (and an old result item) `retention_s` after the job ended (a job that has not ended has none, so it
  never expires), a run record `retention_s` after its attempt ended, an idempotency item `retention_s`
  after the job was created (the Idempotency-Key's window). Tenant items never expire.
Outbox table (`job_id` / `version`): one event per version, with `time_bucket` (index `by_time`: the hour and
one of TIME_SHARDS shards, `2026-11-30T06#17`, so no hour is one hot partition) and `expires_at` (TTL).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from onward.domain.clock import EpochMs, iso
from onward.domain.dispatch import VirtualBase
from onward.domain.documents import json_size
from onward.domain.lifecycle import Change
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.schema_versions import (
    EVENT_SCHEMA,
    ITEM_SHAPE,
    ITEM_SHAPE_ATTRIBUTE,
    check_major,
    item_shape,
    known_fields,
)
from onward.domain.states import CLAIMABLE_STATES, JobState, is_terminal
from onward.store.ports.index_shards import active_shard, lease_shard, parked_shard
from onward.store.ports.ready_queues import ReadyQueue, ready_queue
from onward.store.ports.rows import OpenAttempt, old_counter_shard, on_old_counter

JOB_PREFIX = "JOB#"
JOB_SK = "JOB"
RUN_PREFIX = "RUN#"
RESULT_SK = "RESULT"  # a job's result item, as written before results moved onto the run record (issue 34)
RESULT_ATTRIBUTE = "result"  # a run record's: the job's result, on the run of the attempt that completed it
RESULT_SIZE_ATTRIBUTE = "result_size_bytes"
IDEMPOTENCY_PREFIX = "IDEM#"
IDEMPOTENCY_SK = "IDEM"
UNIQUE_PREFIX = "UNIQUE#"  # unique jobs (issue 37)
UNIQUE_SK = "UNIQUE"
TENANTS_PK = "TENANTS"
TENANT_PREFIX = "TENANT#"
SETTINGS_SK = "SETTINGS"
RUNNING_SK = "RUNNING"
LIFT_ATTRIBUTE = "lift_vt"  # a counter's lift (dispatch.Usage.lift_vt), on a queue entry or an older RUNNING item
QUEUE_SK = "QUEUE"
CLOCK_PREFIX = "CLOCK#"
CLOCK_SK = "CLOCK"
ACTIVE_PREFIX = "ACTIVE#"
PARKED_PREFIX = "PARKED#"
LEASE_PREFIX = "LEASE#"
OVERLAP_PREFIX = "OVERLAP#"
# The `by_time` index's partitions (the other indexes' shards: onward.store.ports.index_shards).
TIME_SHARDS = 64  # `by_time`: 3 events per job, each version its own shard: about 21,000 jobs/s

# Attributes of a job row that only place it (keys, indexes and TTL), not part of the Job.
RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT = "run_claimed_at", "run_lease_expires_at"  # a running row's OpenAttempt
JOB_STORAGE_ONLY = ("pk", "sk", "entity", "ready_pk", "ready_due", "lease_pk", "ready_shards", "running_shard",
                    "charged_entry",
                    "expires_at", "region_epoch", RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT)
# Attributes of a run item that only place it (keys, the `overlaps` index and TTL), not part of the Run.
RUN_STORAGE_ONLY = ("pk", "sk", "entity", "expires_at", "overlap_pk", "overlap_at", "region_epoch")
# Attributes of an outbox item that only place it (index and TTL), not part of the event.
OUTBOX_STORAGE_ONLY = ("time_bucket", "expires_at", "region_epoch")
# A queue entry's `returned_vt` once a claim served it since jobs entered it (virtual times are >= 0).
SERVED_SINCE_RETURN = -1


class Entity(StrEnum):
    """What an item of the jobs table is (its `entity` attribute; idempotency items have none)."""

    JOB = "job"
    RUN = "run"
    RESULT = "result"  # written before issue 34 (results are on the run record now): read, never written
    TENANT = "tenant"  # a tenant's dispatch settings
    TENANT_RUNNING = "tenant_running"  # one of a tenant's RUNNING counters (dispatch.Usage of a running shard)
    TENANT_QUEUE = "tenant_queue"  # one of a tenant's queue entries (waiting jobs of a ready shard, by band)
    CLOCK = "clock"  # one shard of the system virtual clock
    UNIQUE_KEY = "unique_key"  # a tenant's unique key and the job holding it (issue 37)
    RATE_LIMIT = "rate_limit"  # rate limits (issue 37): one of a tenant's limit definitions
    RATE_BUCKET = "rate_bucket"  # rate limits (issue 37): one GCRA bucket (its TAT)


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


def unique_key(tenant_id: str, key: str) -> Key:
    """A tenant's unique key's item (unique jobs, issue 37)."""
    return Key(f"{UNIQUE_PREFIX}{tenant_id}#{key}", UNIQUE_SK)


def tenant_key(tenant_id: str) -> Key:
    """The tenant's entry in the registry operators list."""
    return Key(TENANTS_PK, tenant_id)


def settings_key(tenant_id: str) -> Key:
    """The tenant's settings as claims read them."""
    return Key(f"{TENANT_PREFIX}{tenant_id}", SETTINGS_SK)


def running_key(tenant_id: str, shard: int) -> Key:
    """One of the tenant's RUNNING counters (running shard `shard`)."""
    return Key(f"{TENANT_PREFIX}{tenant_id}#RUNNING#{shard}", RUNNING_SK)


def queue_key(tenant_id: str, shard: int) -> Key:
    """The tenant's queue entry of ready shard `shard`."""
    return Key(f"{TENANT_PREFIX}{tenant_id}#QUEUE#{shard}", QUEUE_SK)


def clock_key(shard: int) -> Key:
    return Key(f"{CLOCK_PREFIX}{shard}", CLOCK_SK)


# rate limits (issue 37): a tenant's definitions in one partition (a Query lists them; claims cache them),
# each bucket in a partition of its own (every claim of its key writes it: onward.store.dynamo.rate_items)
RATE_LIMITS_PREFIX = "RATELIMITS#"
RATE_BUCKET_PREFIX = "RATE#"
RATE_BUCKET_SK = "BUCKET"


def rate_limits_pk(tenant_id: str) -> str:
    return f"{RATE_LIMITS_PREFIX}{tenant_id}"


def rate_limit_key(tenant_id: str, key: str) -> Key:
    return Key(rate_limits_pk(tenant_id), key)


def rate_bucket_key(tenant_id: str, key: str) -> Key:
    return Key(f"{RATE_BUCKET_PREFIX}{tenant_id}#{key}", RATE_BUCKET_SK)


def active_partition(tenant_id: str, shard: int, active_shards: int, entering: str) -> str:
    """The `active` index partition a tenant's queue entry takes as it enters the index (active_shard)."""
    return active_shard_partition(active_shard(tenant_id, shard, active_shards, entering))


def active_shard_partition(index: int) -> str:
    return f"{ACTIVE_PREFIX}{index}"


def parked_partition(tenant_id: str, shard: int) -> str:
    """The `parked` index partition of a tenant's queue entry."""
    return parked_shard_partition(parked_shard(tenant_id, shard))


def parked_shard_partition(index: int) -> str:
    return f"{PARKED_PREFIX}{index}"


def band_attribute(priority: int) -> str:
    """The attribute of a queue entry counting the waiting jobs of one priority band."""
    return f"w{priority}"


def ready_partition(tenant_id: str, queue: ReadyQueue) -> str:
    """The `ready` index partition of one of a tenant's ready queues."""
    return f"{tenant_id}#{queue.shard}#{queue.priority}"


def lease_partition(job_id: str) -> str:
    return lease_shard_partition(lease_shard(job_id))


def lease_shard_partition(shard: int) -> str:
    """The `leases` index partition of one lease shard (0 .. LEASE_SHARDS - 1)."""
    return f"{LEASE_PREFIX}{shard}"


def overlap_partition(at: EpochMs) -> str:
    """The `overlaps` index partition of an overlap that began at `at`: its UTC day, e.g. OVERLAP#2026-11-30
    (overlaps are rare: a day's fit one partition, and a window is read day by day)."""
    return f"{OVERLAP_PREFIX}{iso(at)[:10]}"


def time_bucket(occurred_at: str, job_id: str, version: int) -> str:
    """The `by_time` index partition of an outbox event: its hour and a time shard of the job's version,
    e.g. 2026-11-30T06#17 (the index is read hour by hour, every shard of each: `time_buckets`)."""
    return f"{occurred_at[:13]}#{zlib.crc32(f'{job_id}#{version}'.encode()) % TIME_SHARDS}"


def time_buckets(hour: str) -> list[str]:
    """Every `by_time` partition of one hour (e.g. 2026-11-30T06)."""
    return [f"{hour}#{shard}" for shard in range(TIME_SHARDS)]


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

def item_bytes(values: dict[str, Any]) -> int:
    """An upper bound of the size DynamoDB counts for an item of plain values (its rules: attribute names
    and strings in UTF-8 bytes, a number 1 byte per two significant digits plus 1, 1 byte for a boolean or
    null, a list or map 3 bytes plus 1 per element): what a transaction's 4 MB of items is counted in."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in values.items())


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        digits = len(repr(value).lstrip("-").replace(".", "").replace("e", "").replace("+", "").replace("-", ""))
        return digits // 2 + 2
    if isinstance(value, dict):
        return 3 + sum(1 + len(str(name).encode()) + _value_bytes(inner) for name, inner in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 3 + sum(1 + _value_bytes(inner) for inner in value)
    return json_size(value)  # anything else is stored as its JSON would be: at most that


def shape_stamp() -> dict[str, int]:
    """What a job, run or result item carries of its shape's major (onward.domain.schema_versions): nothing
    for shape 1, whose items are stamped by the attribute's absence, so that the readers released before
    shapes existed (which refuse an attribute they do not know) read every shape-1 item; `shape` from 2 on."""
    return {} if ITEM_SHAPE == 1 else {ITEM_SHAPE_ATTRIBUTE: ITEM_SHAPE}


def job_item(job: Job, ready_shards: int, retention_s: int, running_shard: int | None = None) -> dict[str, Any]:
    """The job row as stored, with the sparse index keys that put it in `ready` or `leases`, the counter its
    attempt is charged to while it runs (`running_shard`: queue entry j, or below 0 an older RUNNING counter,
    ports.rows.on_old_counter), and its TTL once it has ended (`retention_s`: the job retention,
    job_expires_at)."""
    pk, sk = job_key(job.job_id)
    row = {"pk": pk, "sk": sk, "entity": Entity.JOB.value, **shape_stamp(), **job.model_dump(mode="json")}
    row["ready_shards"] = ready_shards
    if job.state is JobState.RUNNING:
        charged = running_shard or 0
        if charged < 0:
            row["running_shard"] = old_counter_shard(charged)
        else:
            row["charged_entry"] = charged
    row["expires_at"] = job_expires_at(job, retention_s)
    if job.state in CLAIMABLE_STATES:
        row["ready_pk"] = ready_partition(job.tenant_id, ready_queue(job, ready_shards))
        row["ready_due"] = job.not_before
    if job.state is JobState.RUNNING:
        row["lease_pk"] = lease_partition(job.job_id)
    return {name: value for name, value in row.items() if value is not None}


def job_from_values(values: dict[str, Any]) -> tuple[Job, int, int]:
    """The Job a stored job row holds, the number of ready shards it was queued under and the counter its
    running attempt is charged to (0 when it is not running; below 0: an older RUNNING counter)."""
    item_shape(values, "job row")
    shards = values.get("ready_shards", 1)
    job = Job.model_validate(known_fields(values, Job.model_fields.keys() - set(JOB_STORAGE_ONLY)))
    if "charged_entry" in values:
        return job, shards, values["charged_entry"]
    if "running_shard" in values:
        return job, shards, on_old_counter(values["running_shard"])
    return job, shards, 0


def open_attempt_of(values: Mapping[str, Any]) -> OpenAttempt | None:
    """A stored job row's running attempt's claim (None: not running, or claimed by a release before issue 34's
    change, whose claim opened a run record instead)."""
    if RUN_CLAIMED_AT not in values or RUN_LEASE_EXPIRES_AT not in values:
        return None
    return OpenAttempt(int(values[RUN_CLAIMED_AT]), int(values[RUN_LEASE_EXPIRES_AT]))


def open_attempt_fields(opened: OpenAttempt) -> dict[str, Any]:
    """What the claim sets on the job row of the attempt it starts."""
    return {RUN_CLAIMED_AT: opened.claimed_at, RUN_LEASE_EXPIRES_AT: opened.lease_expires_at}


def run_item(run: Run) -> dict[str, Any]:
    """An attempt's run record as stored: the whole Run (no `expires_at`: the transition that ends an attempt
    sets it beside the outcome); a release before issue 34's change put it at the claim."""
    pk, sk = run_key(run.job_id, run.attempt)
    values = {"pk": pk, "sk": sk, "entity": Entity.RUN.value, **shape_stamp(), **run.model_dump(mode="json")}
    return {name: value for name, value in values.items() if value is not None and value != []}


def run_from_values(values: dict[str, Any]) -> Run:
    """The run record a stored run item (sk `RUN#<attempt>`) holds (`overlapped_with` is a number set on
    DynamoDB: read back in attempt order)."""
    item_shape(values, "run record")
    run = known_fields(values, Run.model_fields.keys() - set(RUN_STORAGE_ONLY))
    if "overlapped_with" in run:
        run["overlapped_with"] = sorted(run["overlapped_with"])
    return Run.model_validate(run)


def run_result_fields(change: Change) -> dict[str, Any]:
    """What the completing transition sets on the run record it closes: the result (stored even when it is
    None) and its size as JSON, as the result item held them (`value`, `size_bytes`) before issue 34."""
    return {RESULT_ATTRIBUTE: change.result, RESULT_SIZE_ATTRIBUTE: json_size(change.result)}


def run_result(values: Mapping[str, Any]) -> tuple[bool, Any]:
    """Whether a stored run record (plain values) carries its job's result, and the result (None is one)."""
    return RESULT_ATTRIBUTE in values, values.get(RESULT_ATTRIBUTE)


def result_from_values(values: Mapping[str, Any]) -> Any:
    """The value a stored result item holds (None is a result too): the layout before issue 34."""
    item_shape(values, "result")
    return values.get("value")


def idempotency_item(job: Job, key: str, digest: str, retention_s: int) -> dict[str, Any]:
    """The Idempotency-Key `key` of the job's tenant, used by the request of `digest` to create `job`; kept
    `retention_s` after the job was created (the key's window: a retry after it creates a new job)."""
    pk, sk = idempotency_key(job.tenant_id, key)
    return {"pk": pk, "sk": sk, "job_id": job.job_id, "digest": digest,
            "expires_at": ttl_after(job.created_at, retention_s)}


def tenant_items(tenant_id: str, weight: float, cap: int | None, ready_shards: int,
                 base: VirtualBase) -> list[dict[str, Any]]:
    """A tenant's settings as stored: its settings item, then its registry entry (the same values)."""
    values = {"entity": Entity.TENANT.value, "tenant_id": tenant_id, "weight": weight, "cap": cap,
              "ready_shards": ready_shards, "base_vt": base.virtual, "base_ms": base.worker_ms}
    return [{"pk": key.pk, "sk": key.sk, **{name: value for name, value in values.items() if value is not None}}
            for key in (settings_key(tenant_id), tenant_key(tenant_id))]


def tenant_id_of(pk: str) -> str:
    """The tenant of a RUNNING counter's or queue entry's partition key (tenant ids hold no `#`)."""
    return pk.removeprefix(TENANT_PREFIX).split("#", 1)[0]


def shard_of(pk: str) -> int:
    """The shard of a RUNNING counter's or queue entry's partition key."""
    return int(pk.rsplit("#", 1)[1])


def outbox_item(change: Change, retention_s: int) -> dict[str, Any]:
    """The outbox event of a committed transition, with its `by_time` bucket and its TTL."""
    size = json_size(change.result) if change.has_result else None
    event = OutboxEvent.of(change.after, result=change.result, result_size=size)
    item = {
        **event.model_dump(mode="json", by_alias=True),
        "time_bucket": time_bucket(event.occurred_at, event.job_id, event.version),
        "expires_at": ttl_after(change.after.updated_at, retention_s),
    }
    return {name: value for name, value in item.items() if value is not None}


def event_from_values(values: dict[str, Any]) -> OutboxEvent:
    check_major("outbox event", values.get("schema"), EVENT_SCHEMA)
    return OutboxEvent.model_validate({n: v for n, v in values.items() if n not in OUTBOX_STORAGE_ONLY})


# region fence (issue 39): the epoch item `REGION` / `EPOCH` (onward.store.dynamo.region_epochs), and the
# attribute every item a write plan puts or updates carries (the epoch it was written under)
REGION_PK = "REGION"
EPOCH_SK = "EPOCH"
REGION_EPOCH_ATTRIBUTE = "region_epoch"


def region_epoch_key() -> Key:
    return Key(REGION_PK, EPOCH_SK)

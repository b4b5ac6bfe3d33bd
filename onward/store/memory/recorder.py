"""The job store's recorder in memory: the same items as on DynamoDB (onward.store.dynamo.keys), in dicts under one
lock,
with the same conditions and all-or-nothing writes (onward.store.ports), the same `ready`, `leases` and
`active` index order, and the outbox kept per job in version order.

For tests and simulations: `JobStore.in_memory()` runs the whole service layer (lifecycle decisions,
dispatch order, re-decisions after a lost race) over it, with no AWS. What it does not reproduce:
DynamoDB's TransactionConflict (one lock serializes every write, so no write ever meets another in
flight), index lag (its indexes are exact at once), and item size limits.
"""

from __future__ import annotations

import heapq
import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.errors import StoreInvariantViolation
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import JobState, RunOutcome
from onward.store.dynamo.counter_items import tenant_from_values, tenant_state
from onward.store.dynamo.keys import (
    CLOCK_SHARDS,
    DEFAULT_ACTIVE_SHARDS,
    PARKED_SHARDS,
    RUN_PREFIX,
    TENANTS_PK,
    Entity,
    Key,
    active_partition,
    active_shard_partition,
    band_attribute,
    clock_key,
    event_from_values,
    idempotency_key,
    job_from_values,
    job_id_of,
    job_key,
    job_pk,
    lease_shard_partition,
    overlap_partition,
    parked_partition,
    parked_shard_partition,
    queue_key,
    ready_partition,
    result_key,
    run_from_values,
    run_key,
    running_key,
    settings_key,
    shard_of,
    tenant_id_of,
    tenant_items,
)
from onward.store.dynamo.plan_items import (
    job_row_update,
    new_job_items,
    opened_run,
    result,
    run_close,
    transition_event,
)
from onward.store.dynamo.transaction_limits import check_one_transaction
from onward.store.ports import (
    ActiveEntry,
    CommitOutcome,
    CreateOutcome,
    DueJob,
    IdempotencyRecord,
    JobRecorder,
    JobRow,
    ManyCreated,
    NewJobWrite,
    OverlapMark,
    QueueEntryUpdate,
    RenewalAnswer,
    Role,
    RunningUpdate,
    Tenant,
    TenantState,
    TransitionWrite,
    WaitingUpdate,
    judge,
    queue_entry_updates,
)
from onward.store.ports.ready_queues import ReadyQueue

Values = dict[str, Any]


def _number(text: str) -> int | float:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def _stored(values: Any) -> Any:
    """A deep copy to store, with numbers as DynamoDB keeps them (an integral float reads back as an int)."""
    return json.loads(json.dumps(values), parse_float=_number)


def _copy(value: Any) -> Any:
    """A deep copy of a stored value (JSON values only: dicts, lists, scalars), for a reader to keep."""
    if type(value) is dict:
        return {name: _copy(inner) for name, inner in value.items()}
    if type(value) is list:
        return [_copy(inner) for inner in value]
    return value


class MemoryRecorder(JobRecorder):
    """A JobRecorder in this process's memory (one per simulated deployment; thread-safe)."""

    def __init__(self, active_shards: int = DEFAULT_ACTIVE_SHARDS) -> None:
        self._active_shards = active_shards
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Values]] = {}  # the jobs table: pk -> sk -> item
        self._outbox: dict[str, dict[int, Values]] = {}  # the outbox table: job_id -> version -> item
        self._ready: dict[str, dict[str, EpochMs]] = {}  # index `ready`: ready_pk -> job id -> ready_due
        self._leases: dict[str, dict[str, EpochMs]] = {}  # index `leases`: lease_pk -> job id -> expiry
        self._active: dict[str, dict[str, float]] = {}  # index `active`: active_pk -> entry's pk -> active_vt
        self._parked: dict[str, dict[str, EpochMs]] = {}  # index `parked`: parked_pk -> entry's pk -> until

    # --- items ----------------------------------------------------------------------------------------------

    def _get(self, key: Key) -> Values | None:
        return self._items.get(key.pk, {}).get(key.sk)

    def _exists(self, item: Mapping[str, Any]) -> bool:
        """Whether an item is stored at the key of `item`."""
        return self._get(Key(item["pk"], item["sk"])) is not None

    def _put(self, item: Values) -> None:
        self._items.setdefault(item["pk"], {})[item["sk"]] = item

    def _put_job_row(self, row: Values) -> None:
        """Write a job row and move its entries in the sparse indexes (present only with both keys)."""
        job_id = job_id_of(row["pk"])
        old = self._get(job_key(job_id))
        for index, partition, sort in ((self._ready, "ready_pk", "ready_due"),
                                       (self._leases, "lease_pk", "lease_expires_at")):
            if old is not None and partition in old and sort in old:
                index[old[partition]].pop(job_id, None)
            if partition in row and sort in row:
                index.setdefault(row[partition], {})[job_id] = row[sort]
        self._put(row)

    def _read(self, key: Key) -> Values | None:
        with self._lock:
            item = self._get(key)
            return None if item is None else _copy(item)

    # --- reads ----------------------------------------------------------------------------------------------

    def job(self, job_id: str) -> JobRow | None:
        with self._lock:
            return self._job_row(job_id)

    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        with self._lock:
            row = self._job_row(job_id)
        return row if row is not None and row.job.tenant_id == tenant_id else None

    def _job_row(self, job_id: str) -> JobRow | None:
        """The job's row, from a copy of its item; the caller holds the lock."""
        item = self._get(job_key(job_id))
        return None if item is None else JobRow(*job_from_values(_copy(item)))

    def run(self, job_id: str, attempt: int) -> Run | None:
        item = self._read(run_key(job_id, attempt))
        return None if item is None else run_from_values(item)

    def runs(self, job_id: str) -> list[Run]:
        with self._lock:
            items = self._items.get(job_pk(job_id), {})
            found = [_copy(items[sk]) for sk in sorted(items) if sk.startswith(RUN_PREFIX)]
        return [run_from_values(item) for item in found]

    def result(self, job_id: str) -> Any:
        item = self._read(result_key(job_id))
        return None if item is None else item.get("value")

    def events(self, job_id: str) -> list[OutboxEvent]:
        with self._lock:
            versions = self._outbox.get(job_id, {})
            found = [_copy(versions[version]) for version in sorted(versions)]
        return [event_from_values(item) for item in found]

    def all_jobs(self) -> Iterator[Job]:
        for item in self.jobs_table():
            if item.get("entity") == Entity.JOB:
                yield job_from_values(item)[0]

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        item = self._read(idempotency_key(tenant_id, key))
        return None if item is None else IdempotencyRecord(item["job_id"], item["digest"])

    # --- writes ---------------------------------------------------------------------------------------------

    def create(self, write: NewJobWrite) -> CreateOutcome:
        items = new_job_items(write)
        job, event = _stored(items.job), _stored(items.outbox)
        with self._lock:
            if items.idempotency is not None and self._exists(items.idempotency):
                return CreateOutcome.KEY_USED
            if self._exists(job) or self._has_event(event):
                raise StoreInvariantViolation(f"the create of job {write.change.after.job_id} was refused: "
                                              "its job id or first event exists")
            self._put_job_row(job)
            self._put_event(event)
            if write.waiting is not None:
                self._apply_waiting(write.waiting)
            if items.idempotency is not None:
                self._put(_stored(items.idempotency))
        return CreateOutcome.CREATED

    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        check_one_transaction(writes)
        items = [new_job_items(write) for write in writes]
        jobs, events = [_stored(job.job) for job in items], [_stored(job.outbox) for job in items]
        with self._lock:
            if any(self._exists(job) for job in jobs) or any(self._has_event(event) for event in events):
                raise StoreInvariantViolation(f"a create of {len(writes)} jobs was refused: a job id or a first "
                                              "event exists")
            keys_used = frozenset(position for position, job_items in enumerate(items)
                                  if job_items.idempotency is not None and self._exists(job_items.idempotency))
            if keys_used:
                return ManyCreated(CreateOutcome.KEY_USED, keys_used)
            for job_items, job, event in zip(items, jobs, events, strict=True):
                self._put_job_row(job)
                self._put_event(event)
                if job_items.idempotency is not None:
                    self._put(_stored(job_items.idempotency))
            for entry in queue_entry_updates(write.waiting for write in writes if write.waiting is not None):
                self._apply_entry(entry)
        return ManyCreated(CreateOutcome.CREATED)

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        event = _stored(transition_event(write))
        with self._lock:
            failed = self._failed_conditions(write, event)
            if failed:
                change = write.change
                return judge(failed, conflict=False, refused=(
                    f"{change.transition.value} of job {change.after.job_id} v{change.after.version} "
                    f"refused: {sorted(role.value for role in failed)}"))
            self._apply(write, event)
        return CommitOutcome.COMMITTED

    def _failed_conditions(self, write: TransitionWrite, event: Values) -> set[Role]:
        """Every condition of the write, checked before anything is written (as DynamoDB checks all)."""
        failed: set[Role] = set()
        row = self._get(job_key(write.job_id))
        state, version, attempt = write.expected
        lapsed_by = write.lapsed_by
        if row is None or (row.get("state"), row.get("version"), row.get("attempt")) != (
                state.value, version, attempt):
            failed.add(Role.JOB)
        elif lapsed_by is not None and not row.get("lease_expires_at", lapsed_by + 1) <= lapsed_by:
            failed.add(Role.JOB)  # a heartbeat renewed the lease after the reaper read the row
        opened, close, result_item = opened_run(write), run_close(write), result(write)
        if opened is not None and self._exists(opened):
            failed.add(Role.RUN_OPENED)
        if close is not None:
            run = self._get(run_key(close.job_id, close.attempt))
            if run is None or "outcome" in run:
                failed.add(Role.RUN_CLOSED)
        if result_item is not None and self._exists(result_item):
            failed.add(Role.RESULT)
        if write.running is not None and not self._admitted(write.running):
            failed.add(Role.RUNNING)
        if self._has_event(event):
            failed.add(Role.OUTBOX)
        for tenant_id, shard, cap in write.still_at_cap:
            counter = self._get(running_key(tenant_id, shard))
            if counter is None or "running" not in counter or not counter["running"] >= cap:
                failed.add(Role.STILL_AT_CAP)
        return failed

    def _admitted(self, update: RunningUpdate) -> bool:
        counter = self._get(running_key(update.tenant_id, update.shard)) or {}
        running = counter.get("running")
        if update.below_cap is not None:
            return running is None or running < update.below_cap
        return True

    def _apply(self, write: TransitionWrite, event: Values) -> None:
        update = job_row_update(write)
        row = dict(self._get(job_key(update.job_id)) or {})
        row.update(_stored(update.set))
        for name in update.remove:
            row.pop(name, None)
        self._put_job_row(row)
        opened, close, result_item = opened_run(write), run_close(write), result(write)
        if opened is not None:
            self._put(_stored(opened))
        if close is not None:
            run = self._get(run_key(close.job_id, close.attempt))
            assert run is not None
            run.update(_stored(close.fields))
        if result_item is not None:
            self._put(_stored(result_item))
        if write.running is not None:
            self._apply_running(write.running)
        if write.waiting is not None:
            self._apply_waiting(write.waiting)
        self._put_event(event)

    def _counter(self, key: Key, entity: Entity) -> Values:
        counter = self._get(key)
        if counter is None:
            counter = {"pk": key.pk, "sk": key.sk}
            self._put(counter)
        counter["entity"] = entity.value
        return counter

    def _apply_running(self, update: RunningUpdate) -> None:
        counter = self._counter(running_key(update.tenant_id, update.shard), Entity.TENANT_RUNNING)
        counter["tenant_id"], counter["shard"] = update.tenant_id, update.shard
        usage = update.usage
        for attribute, amount in (("running", usage.running), ("ended_ms", usage.ended_ms),
                                  ("started_ms_sum", usage.started_ms_sum)):
            if amount:  # as writes.usage_adds: zero terms are left out
                counter[attribute] = counter.get(attribute, 0) + amount

    def _apply_waiting(self, update: WaitingUpdate) -> None:
        (entry,) = queue_entry_updates([update])
        self._apply_entry(entry)

    def _apply_entry(self, update: QueueEntryUpdate) -> None:
        """As writes.TransitionWrites.queue_entry_update."""
        entry = self._counter(queue_key(update.tenant_id, update.shard), Entity.TENANT_QUEUE)
        entry["tenant_id"], entry["shard"] = update.tenant_id, update.shard
        for priority, delta in update.bands:
            band = band_attribute(priority)
            entry[band] = entry.get(band, 0) + delta
        entry["waiting"] = entry.get("waiting", 0) + update.delta
        if update.entering:
            entry["entered"] = entry.get("entered", 0) + update.entering
            entry.pop("parked_pk", None)
            entry.pop("parked_until", None)
        if update.active_vt is not None:
            if update.entering:
                entry["active_pk"] = active_partition(update.tenant_id, update.shard, self._active_shards)
                entry.setdefault("active_vt", _stored(update.active_vt))
            else:
                entry["active_vt"] = _stored(update.active_vt)
        self._index_entry(entry)

    def _index_entry(self, entry: Values) -> None:
        """Move a queue entry in the sparse `active` and `parked` indexes (present only with both keys)."""
        for index, partition, sort in ((self._active, "active_pk", "active_vt"),
                                       (self._parked, "parked_pk", "parked_until")):
            for entries in index.values():
                entries.pop(entry["pk"], None)
            if partition in entry and sort in entry:
                index.setdefault(entry[partition], {})[entry["pk"]] = entry[sort]

    def _has_event(self, event: Values) -> bool:
        return event["version"] in self._outbox.get(event["job_id"], {})

    def _put_event(self, event: Values) -> None:
        self._outbox.setdefault(event["job_id"], {})[event["version"]] = event

    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs) -> RenewalAnswer:
        with self._lock:
            row = self._get(job_key(job_id))
            if row is None or (row.get("state"), row.get("attempt"), row.get("lease_owner")) != (
                    JobState.RUNNING.value, attempt, worker_id):
                return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)
            self._put_job_row({**row, "lease_expires_at": expires_at})
            return RenewalAnswer(held=True, cancel_requested=bool(row.get("cancel_requested", False)),
                                 lease_expires_at=expires_at)

    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        with self._lock:
            run = self._get(run_key(job_id, attempt))
            if run is None or run.get("worker_id") != worker_id or run.get("outcome") not in (
                    None, RunOutcome.LEASE_EXPIRED.value):
                return False
            run.update({"reclaimed_as": run.get("outcome"), "outcome": RunOutcome.FENCED.value,
                        "late_report": late_report.value, "late_report_at": at})
            run.setdefault("expires_at", expires_at)  # as if_not_exists on DynamoDB
            self._mark_overlap(run, overlap)
            return True

    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        with self._lock:
            run = self._get(run_key(job_id, attempt))
            if run is None or run.get("worker_id") != worker_id or run.get("outcome") not in (
                    RunOutcome.LEASE_EXPIRED.value, RunOutcome.FENCED.value) or "lease_lost_at" in run:
                return False
            run["lease_lost_at"] = at
            self._mark_overlap(run, overlap)
            return True

    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        with self._lock:
            run = self._get(run_key(job_id, attempt))
            if run is None:
                return False
            self._mark_overlap(run, overlap)
            return True

    @staticmethod
    def _mark_overlap(run: Values, overlap: OverlapMark | None) -> None:
        """As writes.overlap_clauses: the attempts added to the set, the index keys kept from the first mark."""
        if overlap is None:
            return
        run["overlapped_with"] = sorted({*run.get("overlapped_with", ()), *overlap.attempts})
        if "overlap_pk" not in run:
            run["overlap_pk"], run["overlap_at"] = overlap_partition(overlap.began_at), overlap.began_at

    # --- indexes --------------------------------------------------------------------------------------------

    @staticmethod
    def _first(index: Mapping[str, EpochMs], include: Any, limit: int) -> list[str]:
        """Up to `limit` job ids of one index partition in its sort order (sort key, then the item's key)."""
        ordered = heapq.nsmallest(limit, ((sort, job_pk(job_id), job_id) for job_id, sort in index.items()
                                          if include(sort)))
        return [job_id for _, _, job_id in ordered]

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        with self._lock:
            index = self._ready.get(ready_partition(tenant_id, queue), {})
            # with the rows, as DynamoDB's ready index answers (it projects every attribute)
            return [DueJob(job_id, index[job_id], self._job_row(job_id))
                    for job_id in self._first(index, lambda due: due <= now, limit)]

    def expired_leases(self, shard: int, now: EpochMs, limit: int) -> list[str]:
        with self._lock:
            return self._first(self._leases.get(lease_shard_partition(shard), {}),
                               lambda expires: expires < now, limit)

    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        with self._lock:
            found = []
            for index in range(self._active_shards):
                partition = self._active.get(active_shard_partition(index), {})
                found += heapq.nsmallest(limit_per_shard, ((vt, pk) for pk, vt in partition.items()))
        entries = [ActiveEntry(tenant_id_of(pk), shard_of(pk), float(vt)) for vt, pk in found]
        entries.sort(key=lambda entry: (entry.active_vt, entry.tenant_id, entry.shard))
        return entries

    # --- tenants --------------------------------------------------------------------------------------------

    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        with self._lock:
            if tenant_ids is None:
                registry = self._items.get(TENANTS_PK, {})
                found = [_copy(registry[sk]) for sk in sorted(registry)]
            else:
                found = [_copy(item) for tenant_id in sorted(set(tenant_ids))
                         if (item := self._get(settings_key(tenant_id))) is not None]
        return {tenant.tenant_id: tenant for tenant in map(tenant_from_values, found)}

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None]) -> dict[str, TenantState]:
        states = {}
        with self._lock:
            for tenant, shards in wanted.items():
                keys = [running_key(tenant.tenant_id, shard) for shard in range(tenant.running_shards)]
                keys += [queue_key(tenant.tenant_id, shard)
                         for shard in (range(tenant.ready_shards) if shards is None else sorted(shards))]
                items = [_copy(item) for key in keys if (item := self._get(key)) is not None]
                states[tenant.tenant_id] = tenant_state(tenant, items)
        return states

    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        policy = tenant.policy
        items = _stored(tenant_items(tenant.tenant_id, policy.weight, policy.cap, tenant.ready_shards))
        with self._lock:
            if only_if_new and self._exists(items[0]):
                return False
            for item in items:
                self._put(item)
        return True

    def lift(self, tenant_id: str, offset_ms: int) -> bool:
        with self._lock:
            counter = self._get(running_key(tenant_id, 0))
            if counter is not None and counter.get("offset_ms", offset_ms - 1) >= offset_ms:
                return False
            counter = self._counter(running_key(tenant_id, 0), Entity.TENANT_RUNNING)
            counter.update({"tenant_id": tenant_id, "shard": 0, "offset_ms": offset_ms})
            return True

    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        with self._lock:
            entry = self._get(queue_key(tenant_id, shard))
            if entry is None or "active_pk" not in entry or not entry.get("active_vt", active_vt) < active_vt:
                return False
            entry["active_vt"] = _stored(active_vt)
            self._index_entry(entry)
            return True

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        with self._lock:
            entry = self._get(queue_key(tenant_id, shard))
            if entry is None or "active_pk" not in entry or entry.get("waiting", 0) > 0:
                return False
            del entry["active_pk"]
            self._index_entry(entry)
            return True

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        with self._lock:
            entry = self._get(queue_key(tenant_id, shard))
            if entry is None or "active_pk" not in entry or entry.get("entered", entered) != entered:
                return False
            del entry["active_pk"]
            entry["parked_pk"], entry["parked_until"] = parked_partition(tenant_id, shard), until
            self._index_entry(entry)
            return True

    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        with self._lock:
            found = []
            for index in range(PARKED_SHARDS):
                partition = self._parked.get(parked_shard_partition(index), {})
                found += heapq.nsmallest(limit_per_shard, ((until, pk) for pk, until in partition.items()
                                                           if until <= now))
        return [(tenant_id_of(pk), shard_of(pk)) for _, pk in found]

    def overlapping_jobs(self, since: EpochMs, until: EpochMs) -> list[str]:
        """Ids of the jobs with a run in the `overlaps` index keyed from `since` to `until` (inclusive), in key
        order, each once (onward.operator.overlaps's twin: the whole table is read, it is small here)."""
        with self._lock:
            found = sorted((run["overlap_at"], job_id_of(pk)) for pk, items in self._items.items()
                           for run in items.values() if "overlap_pk" in run and since <= run["overlap_at"] <= until)
        return list(dict.fromkeys(job_id for _, job_id in found))

    def wake(self, tenant_id: str, shard: int) -> bool:
        with self._lock:
            entry = self._get(queue_key(tenant_id, shard))
            if entry is None or "parked_pk" not in entry:
                return False
            entry["active_pk"] = active_partition(tenant_id, shard, self._active_shards)
            entry.pop("parked_pk")
            entry.pop("parked_until", None)
            self._index_entry(entry)
            return True

    def clock(self) -> float:
        with self._lock:
            values = [item["v"] for shard in range(CLOCK_SHARDS) if (item := self._get(clock_key(shard)))]
        return float(max(values, default=0.0))

    def advance_clock(self, shard: int, value: float) -> bool:
        with self._lock:
            item = self._get(clock_key(shard))
            if item is not None and item["v"] >= value:
                return False
            key = clock_key(shard)
            self._put({"pk": key.pk, "sk": key.sk, "entity": Entity.CLOCK.value, "v": _stored(value)})
            return True

    # --- for tests and audits -------------------------------------------------------------------------------

    def jobs_table(self) -> list[Values]:
        """A copy of every item of the jobs table, as a scan of it on DynamoDB would read them."""
        with self._lock:
            return [_copy(items[sk]) for pk in sorted(self._items) for items in (self._items[pk],)
                    for sk in sorted(items)]

    def put_item(self, item: Values) -> None:
        """Write a jobs-table item as it is, bypassing every condition (what a console edit of a row, or a
        row left by older code, would be): for tests that need such a row."""
        with self._lock:
            if item.get("entity") == Entity.JOB:
                self._put_job_row(_stored(item))
            else:
                self._put(_stored(item))
                if item.get("entity") == Entity.TENANT_QUEUE:
                    self._index_entry(self._items[item["pk"]][item["sk"]])

    def outbox_table(self) -> list[Values]:
        """A copy of every item of the outbox table."""
        with self._lock:
            return [_copy(versions[version]) for job_id in sorted(self._outbox)
                    for versions in (self._outbox[job_id],) for version in sorted(versions)]

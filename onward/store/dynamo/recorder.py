"""The job store's recorder on DynamoDB: every write is ONE TransactWriteItems (onward.store.dynamo.writes builds it),
reads are consistent GetItem / Query, due jobs, expired leases and the active tenants come from the sparse
`ready`, `leases` and `active` indexes, a claim's tenant counters from one BatchGetItem."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs
from onward.domain.errors import StoreContention, StoreInvariantViolation
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import RunOutcome
from onward.pipeline.outbox import OutboxReader
from onward.store.dynamo.attributes import Item, from_item, to_attribute
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.counter_items import tenant_from_values, tenant_state
from onward.store.dynamo.epoch_stamps import row_of
from onward.store.dynamo.held_jobs import DynamoConcurrencyCounts, DynamoHeldJobs
from onward.store.dynamo.history import DynamoJobHistory
from onward.store.dynamo.index_queries import DUE_BY, active_query, entry_of, parked_due_query, ready_query
from onward.store.dynamo.job_types import DynamoJobTypes
from onward.store.dynamo.keys import (
    TENANTS_PK,
    Entity,
    Key,
    active_partition,
    clock_key,
    idempotency_key,
    job_id_of,
    job_key,
    lease_shard_partition,
    parked_partition,
    queue_key,
    run_key,
    running_key,
    settings_key,
    tenant_items,
)
from onward.store.dynamo.pauses import DynamoFlowBook
from onward.store.dynamo.progress_log import DynamoProgressLog
from onward.store.dynamo.rate_buckets import DynamoRateBuckets
from onward.store.dynamo.region_epochs import DynamoRegionEpochs
from onward.store.dynamo.region_fence import renew_lease
from onward.store.dynamo.results import read_result
from onward.store.dynamo.run_reads import partition_items, runs_of_items
from onward.store.dynamo.running_marks import mark_overlap
from onward.store.dynamo.tenant_reads import tenant_item
from onward.store.dynamo.transaction_limits import check_one_transaction
from onward.store.dynamo.unique_keys import DynamoUniqueKeys
from onward.store.dynamo.writes import (
    CONDITIONAL_CHECK_FAILED,
    TRANSACTION_CONFLICT,
    Refused,
    Transaction,
    TransitionWrites,
    job_from_item,
    overlap_clauses,
    wire_item,
    wire_key,
)
from onward.store.ports import (
    ActiveEntry,
    ActiveHead,
    CommitOutcome,
    CreateOutcome,
    DueJob,
    IdempotencyRecord,
    JobHistory,
    JobRecorder,
    JobRow,
    ManyCreated,
    NewJobWrite,
    OverlapMark,
    RenewalAnswer,
    Role,
    Tenant,
    TenantState,
    TransitionWrite,
    judge,
)
from onward.store.ports.index_shards import CLOCK_SHARDS, DEFAULT_ACTIVE_SHARDS, PARKED_SHARDS, waking
from onward.store.ports.ready_queues import ReadyQueue

PARTITION_READERS = 8  # concurrent Queries of one sharded-index read
PARTITION_READER_THREAD = "onward-partition-read"  # the threads' name prefix: one pool per process, kept
_PARTITION_POOL = 2 * PARTITION_READERS  # threads of that pool: two reads at once get all they may use


class _PartitionReaders:
    """The process's threads for partition reads, started on first use and kept: a pool per read started
    and joined its threads on every claim's head read (thread starts are slow while other threads run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def map(self, read: Callable[[dict[str, Any]], dict[str, Any]],
            requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_PARTITION_POOL, thread_name_prefix=PARTITION_READER_THREAD)
            pool = self._pool
        # at most PARTITION_READERS of this read's Queries in flight at once
        pages: list[dict[str, Any]] = []
        for start in range(0, len(requests), PARTITION_READERS):
            pages += pool.map(read, requests[start:start + PARTITION_READERS])
        return pages


_partition_readers = _PartitionReaders()


UNIQUE_ROLES = (Role.UNIQUE, Role.UNIQUE_HOLDER)  # a create's unique key held (issue 37)


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _by_role(reasons: dict[Role, list[str]]) -> dict[str, list[str]]:
    return {role.value: codes for role, codes in reasons.items()}


# An attribute of every job row that is not a key of the ready index: an index item holding it holds the whole
# row (template.yaml's ready index projects every attribute; a table created before it projects keys only).
ROW_MARK = "state"


class DynamoRecorder(DynamoProgressLog, DynamoUniqueKeys, DynamoRateBuckets, DynamoConcurrencyCounts, JobRecorder):
    """A JobRecorder on the jobs and outbox tables of one deployment, through one boto3 client."""

    def __init__(self, client: Any, jobs_table: str, outbox_table: str,
                 active_shards: int = DEFAULT_ACTIVE_SHARDS) -> None:
        self._db = client
        self._jobs = jobs_table
        self._outbox = outbox_table
        self._active_shards = active_shards
        self._writes = TransitionWrites(jobs_table, outbox_table, active_shards)
        self.type_declarations = DynamoJobTypes(client, jobs_table)  # the declared job types (issue 37)
        self.flow_book = DynamoFlowBook(client, jobs_table)  # pauses and the drain switch (issue 37: pause)
        self.held_jobs = DynamoHeldJobs(client, jobs_table, self._writes)  # jobs held aside (issue 37: pause)
        self.region_epochs = DynamoRegionEpochs(client, jobs_table, active_shards)  # the epoch item (issue 39)

    # --- reads ----------------------------------------------------------------------------------------------

    def _get(self, key: Item, **options: Any) -> Item | None:
        found: Item | None = self._db.get_item(TableName=self._jobs, Key=key, ConsistentRead=True,
                                               **options).get("Item")
        return found

    def job(self, job_id: str) -> JobRow | None:
        item = self._get(wire_key(job_key(job_id)))
        return None if item is None else row_of(item)

    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        item = tenant_item(self._db, self._jobs, wire_key(job_key(job_id)), tenant_id)
        return None if item is None else row_of(item)

    def run(self, job_id: str, attempt: int) -> Run | None:
        return next((run for run in self.runs(job_id) if run.attempt == attempt), None)

    def runs(self, job_id: str) -> list[Run]:  # (one Query of the partition: the row holds the running attempt)
        return runs_of_items(partition_items(self._db, self._jobs, job_id))[1]

    def result(self, job_id: str) -> Any:
        return read_result(self._db, self._jobs, job_id)  # its completing run record (results.py)

    def events(self, job_id: str) -> list[OutboxEvent]:
        return OutboxReader(self._db, self._outbox).events_of(job_id)

    def history(self, job_id: str) -> JobHistory | None:
        """The job's partition in one Query: its row, run records and result together (history.py)."""
        return DynamoJobHistory(self._db, self._jobs, self._outbox).history(job_id)

    def all_jobs(self) -> Iterator[Job]:
        pages = self._db.get_paginator("scan").paginate(
            TableName=self._jobs,
            FilterExpression="entity = :job",
            ExpressionAttributeValues={":job": {"S": Entity.JOB.value}},
        )
        for page in pages:
            for item in page["Items"]:
                yield job_from_item(item)[0]

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        item = self._get(wire_key(idempotency_key(tenant_id, key)))
        if item is None:
            return None
        values = from_item(item)
        return IdempotencyRecord(values["job_id"], values["digest"])

    # --- writes ---------------------------------------------------------------------------------------------

    def _transact(self, transaction: Transaction) -> dict[Role, list[str]] | None:
        """Send one transaction: None when it committed, else the reasons of its cancellation by role.
        Anything but a cancellation (throttling past botocore's retries, a network error) raises."""
        refused = self._send(transaction)
        if refused is None:
            return None
        by_role: dict[Role, list[str]] = {}
        for reason in refused:
            by_role.setdefault(reason.role, []).append(reason.code)
        return by_role

    def _send(self, transaction: Transaction) -> list[Refused] | None:
        """Send one transaction: None when it committed, else the reasons of its cancellation, each with its
        action's role and write. Anything but a cancellation raises."""
        try:
            self._db.transact_write_items(TransactItems=transaction.actions)
        except ClientError as error:
            if _error_code(error) != "TransactionCanceledException":
                raise
            return transaction.refused(error.response)
        return None

    def create(self, write: NewJobWrite) -> CreateOutcome:
        reasons = self._transact(self._writes.new_job(write))
        if reasons is None:
            return CreateOutcome.CREATED
        if CONDITIONAL_CHECK_FAILED in reasons.get(Role.IDEMPOTENCY, ()):
            return CreateOutcome.KEY_USED
        if any(CONDITIONAL_CHECK_FAILED in reasons.get(role, ()) for role in UNIQUE_ROLES):
            return CreateOutcome.UNIQUE_HELD
        # Nothing was written: a conflict with a concurrent transaction (on the tenant's WAITING counter) is
        # tried again as it is.
        if any(TRANSACTION_CONFLICT in codes for codes in reasons.values()):
            return CreateOutcome.CONFLICT
        raise StoreInvariantViolation(
            f"the create of job {write.change.after.job_id} was refused: {_by_role(reasons)}")

    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        check_one_transaction(writes)
        refused = self._send(self._writes.new_jobs(writes))
        if refused is None:
            return ManyCreated(CreateOutcome.CREATED)
        keys_used = frozenset(reason.subject for reason in refused if reason.subject is not None
                              and reason.role is Role.IDEMPOTENCY and reason.code == CONDITIONAL_CHECK_FAILED)
        unique_held = frozenset(reason.subject for reason in refused if reason.subject is not None
                                and reason.role in UNIQUE_ROLES and reason.code == CONDITIONAL_CHECK_FAILED)
        broken = [reason for reason in refused if reason.code == CONDITIONAL_CHECK_FAILED
                  and reason.role is not Role.IDEMPOTENCY and reason.role not in UNIQUE_ROLES]
        if broken:  # a job id or a first event that exists: no store decides such a create
            raise StoreInvariantViolation(f"a create of {len(writes)} jobs was refused: {broken}")
        if keys_used:
            return ManyCreated(CreateOutcome.KEY_USED, keys_used)
        if unique_held:
            return ManyCreated(CreateOutcome.UNIQUE_HELD, unique_held=unique_held)
        if any(reason.code == TRANSACTION_CONFLICT for reason in refused):
            return ManyCreated(CreateOutcome.CONFLICT)
        raise StoreInvariantViolation(f"a create of {len(writes)} jobs was refused: {refused}")

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        reasons = self._transact(self._writes.transition(write))
        if reasons is None:
            return CommitOutcome.COMMITTED
        change = write.change
        return judge(
            {role for role, codes in reasons.items() if CONDITIONAL_CHECK_FAILED in codes},
            conflict=any(TRANSACTION_CONFLICT in codes for codes in reasons.values()), claim=write.claims_slot,
            refused=f"{change.transition.value} of job {change.after.job_id} v{change.after.version} "
                    f"refused: {_by_role(reasons)}",
        )

    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs, *,
                    region_epoch: int = 0) -> RenewalAnswer:  # (conditioned on the epoch: issue 39)
        return renew_lease(self._db, self._jobs, job_id, attempt, worker_id, expires_at, region_epoch)

    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        return self._mark_run(
            job_id, attempt, overlap,
            sets=["reclaimed_as = if_not_exists(outcome, :none)", "outcome = :fenced", "late_report = :claimed",
                  "late_report_at = :now", "expires_at = if_not_exists(expires_at, :ttl)"],
            condition="attribute_exists(pk) AND worker_id = :w AND "
                      "(attribute_not_exists(outcome) OR outcome = :lease_expired)",
            values={":fenced": {"S": RunOutcome.FENCED.value}, ":claimed": {"S": late_report.value},
                    ":lease_expired": {"S": RunOutcome.LEASE_EXPIRED.value},
                    ":now": {"N": str(at)}, ":w": {"S": worker_id}, ":none": {"NULL": True},
                    ":ttl": {"N": str(expires_at)}})

    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        return self._mark_run(
            job_id, attempt, overlap, sets=["lease_lost_at = :now"],
            condition="attribute_exists(pk) AND worker_id = :w AND outcome IN (:lease_expired, :fenced) AND "
                      "attribute_not_exists(lease_lost_at)",
            values={":now": {"N": str(at)}, ":w": {"S": worker_id},
                    ":lease_expired": {"S": RunOutcome.LEASE_EXPIRED.value},
                    ":fenced": {"S": RunOutcome.FENCED.value}})

    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        return mark_overlap(self._db, self._jobs, job_id, attempt, overlap)  # (or a running attempt's: issue 34)

    def _mark_run(self, job_id: str, attempt: int, overlap: OverlapMark | None, *, sets: list[str],
                  condition: str, values: dict[str, Any]) -> bool:
        """One conditional UpdateItem of a run record: `sets`, and `overlap`'s mark with them. False when the
        condition failed (nothing written)."""
        names: dict[str, str] = {}
        values = dict(values)
        adds = ""
        if overlap is not None:
            overlap_sets, add = overlap_clauses(overlap, names, values)
            sets = [*sets, *overlap_sets]
            adds = f" ADD {add}"
        request: dict[str, Any] = {
            "UpdateExpression": f"SET {', '.join(sets)}{adds}" if sets else adds.strip(),
            "ConditionExpression": condition,
        }
        if names:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = values
        return self._conditional_update(run_key(job_id, attempt), **request)

    # --- indexes --------------------------------------------------------------------------------------------

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        items = self._db.query(**ready_query(self._jobs, tenant_id, queue, DUE_BY, now), Limit=limit)["Items"]
        return [DueJob(job_id_of(item["pk"]["S"]), int(item["ready_due"]["N"]),
                       row_of(item) if ROW_MARK in item else None) for item in items]

    def expired_leases(self, shard: int, now: EpochMs, limit: int) -> list[str]:
        items = self._db.query(
            TableName=self._jobs,
            IndexName="leases",
            KeyConditionExpression="lease_pk = :p AND lease_expires_at < :now",
            ExpressionAttributeValues={":p": {"S": lease_shard_partition(shard)}, ":now": {"N": str(now)}},
            Limit=limit,
        )["Items"]
        return [job_id_of(item["pk"]["S"]) for item in items]

    def _query_partitions(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The first page of each Query, sent concurrently (at most PARTITION_READERS at once): a claim's
        read of a sharded index waits for its slowest partition, not for the sum of them (32 partitions
        on AWS; on the embedded endpoint each Query also waits behind the others' requests)."""
        return [item for page in self._query_pages(requests) for item in page["Items"]]

    def _query_pages(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The first page (the Query's answer) of each Query, sent concurrently as `_query_partitions`."""
        if len(requests) <= 1:
            return [self._db.query(**request) for request in requests]
        return _partition_readers.map(lambda request: self._db.query(**request), requests)

    def active_head(self, limit_per_shard: int) -> ActiveHead:
        pages = self._query_pages(
            [{**active_query(self._jobs, index), "Limit": limit_per_shard} for index in range(self._active_shards)])
        entries: list[ActiveEntry] = []
        unread_from: float | None = None
        for page in pages:
            read = [ActiveEntry(*entry_of(item), float(item["active_vt"]["N"])) for item in page["Items"]]
            entries += read
            if page.get("LastEvaluatedKey") is not None and read:  # a full page: more may follow its last
                unread_from = min(read[-1].active_vt, unread_from if unread_from is not None else float("inf"))
        entries.sort(key=lambda entry: (entry.active_vt, entry.tenant_id, entry.shard))
        return ActiveHead(entries, unread_from)

    # --- tenants --------------------------------------------------------------------------------------------

    def _batch_get(self, keys: list[Key], *, consistent: bool = True) -> list[dict[str, Any]]:
        """The items at `keys` (absent ones left out), by onward.store.dynamo.batch_reads."""
        read = batch_get(self._db, self._jobs, [wire_key(key) for key in keys], consistent=consistent)
        return [from_item(item) for item in read.items]

    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        if tenant_ids is not None:
            items = self._batch_get([settings_key(tenant_id) for tenant_id in sorted(set(tenant_ids))])
        else:
            pages = self._db.get_paginator("query").paginate(
                TableName=self._jobs,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": TENANTS_PK}},
                ConsistentRead=True,
            )
            items = [from_item(item) for page in pages for item in page["Items"]]
        tenants = (tenant_from_values(values) for values in items if values.get("entity") == Entity.TENANT)
        return {tenant.tenant_id: tenant for tenant in tenants}

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        keys: list[Key] = []
        for tenant in wanted:  # every running shard's counters: its queue entry's and its older RUNNING item's
            keys += [running_key(tenant.tenant_id, shard) for shard in range(tenant.running_shards)]
            keys += [queue_key(tenant.tenant_id, shard)
                     for shard in range(tenant.running_shards)]
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        # Eventually consistent by default (half the read units): the counters order the claim's candidates,
        # and the claim's transaction checks what must hold (the cap) on the items themselves.
        for values in self._batch_get(keys, consistent=consistent):
            by_tenant.setdefault(values["tenant_id"], []).append(values)
        return {tenant.tenant_id: tenant_state(tenant, by_tenant.get(tenant.tenant_id, ()), shards)
                for tenant, shards in wanted.items()}

    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        policy = tenant.policy
        settings, entry = tenant_items(tenant.tenant_id, policy.weight, policy.cap, tenant.ready_shards,
                                       tenant.base)
        condition = {"ConditionExpression": "attribute_not_exists(pk)"} if only_if_new else {}
        transaction = Transaction()
        transaction.add(Role.TENANT, {"Put": {"TableName": self._jobs, "Item": wire_item(settings), **condition}})
        transaction.add(Role.TENANT, {"Put": {"TableName": self._jobs, "Item": wire_item(entry)}})
        reasons = self._transact(transaction)
        if reasons is None:
            return True
        if only_if_new and CONDITIONAL_CHECK_FAILED in reasons.get(Role.TENANT, ()):
            return False
        raise StoreContention(f"the settings of tenant {tenant.tenant_id} met a concurrent write: "
                              f"{_by_role(reasons)}")

    def _conditional_update(self, key: Key, **request: Any) -> bool:
        try:
            self._db.update_item(TableName=self._jobs, Key=wire_key(key), **request)
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def lift(self, tenant_id: str, lift_vt: int) -> bool:
        return self._conditional_update(
            running_key(tenant_id, 0),
            UpdateExpression="SET #entity = :entity, tenant_id = :t, #shard = :zero, lift_vt = :o",
            ConditionExpression="attribute_not_exists(lift_vt) OR lift_vt < :o",
            ExpressionAttributeNames={"#entity": "entity", "#shard": "shard"},
            ExpressionAttributeValues={":entity": {"S": Entity.TENANT_RUNNING.value}, ":t": {"S": tenant_id},
                                       ":zero": {"N": "0"}, ":o": {"N": str(lift_vt)}})

    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        return self._conditional_update(
            queue_key(tenant_id, shard),
            UpdateExpression="SET active_vt = :v",
            ConditionExpression="attribute_exists(active_pk) AND active_vt < :v",
            ExpressionAttributeValues={":v": to_attribute(active_vt)})

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        return self._conditional_update(
            queue_key(tenant_id, shard),
            UpdateExpression="REMOVE active_pk, returned_vt",
            ConditionExpression="attribute_exists(active_pk) AND waiting <= :zero",
            ExpressionAttributeValues={":zero": {"N": "0"}})

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        return self._conditional_update(
            queue_key(tenant_id, shard),
            UpdateExpression="SET parked_pk = :ppk, parked_until = :u REMOVE active_pk, returned_vt",
            ConditionExpression="attribute_exists(active_pk) AND (entered = :e OR attribute_not_exists(entered))",
            ExpressionAttributeValues={":ppk": {"S": parked_partition(tenant_id, shard)}, ":u": {"N": str(until)},
                                       ":e": {"N": str(entered)}})

    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        return [entry_of(item) for item in self._query_partitions(
            [{**parked_due_query(self._jobs, index, now), "Limit": limit_per_shard} for index in range(PARKED_SHARDS)])]

    def wake(self, tenant_id: str, shard: int, now: EpochMs) -> bool:
        return self._conditional_update(
            queue_key(tenant_id, shard),
            UpdateExpression="SET active_pk = :apk REMOVE parked_pk, parked_until",
            ConditionExpression="attribute_exists(parked_pk)",
            ExpressionAttributeValues={
                ":apk": {"S": active_partition(tenant_id, shard, self._active_shards, waking(now))}})

    def clock(self) -> float:
        items = self._batch_get([clock_key(shard) for shard in range(CLOCK_SHARDS)], consistent=False)
        return max((float(values["v"]) for values in items), default=0.0)

    def advance_clock(self, shard: int, value: float) -> bool:
        return self._conditional_update(
            clock_key(shard),
            UpdateExpression="SET #entity = :entity, v = :v",
            ConditionExpression="attribute_not_exists(v) OR v < :v",
            ExpressionAttributeNames={"#entity": "entity"},
            ExpressionAttributeValues={":entity": {"S": Entity.CLOCK.value}, ":v": to_attribute(value)})

"""JobStore: the authoritative job state on DynamoDB.

Every transition is ONE TransactWriteItems: the job row (conditional on the state, attempt and version it
was decided from), the attempt's run record, the result where there is one, the tenant's dispatch
counters, and one outbox event (`attribute_not_exists`, so a version can never be published twice). What a
transition does is decided by onward.lifecycle from the current row; when the conditional write loses a
race, the store re-reads and asks again, so the caller always gets an answer that matches the committed
state.

Tenants and fair dispatch (onward.dispatch decides; this module keeps the counters it needs). Under the
partition key `TENANTS`, per tenant `t`:
- `t`: the registry item (weight, cap, ready_shards);
- `t#RUNNING`: `running`, `ended_ms`, `started_ms_sum` (dispatch.Usage). The claim adds one running
  attempt in its own transaction, with the condition `running < cap` (so a cap holds under any
  concurrency) unless it flexes; a flexing claim instead carries a ConditionCheck `running >= cap` on each
  other capped tenant with waiting jobs, so it cannot pass one that came back below its cap meanwhile.
  Every transition that ends a running attempt (complete, fail, reap, release, cancel acknowledgement)
  takes it off and adds its run time to `ended_ms`, in ITS transaction.
  The count is exact (one item, no shards); the price is that one item takes every claim and end of the
  tenant: DynamoDB allows about 1,000 write units/s per item and a transactional write costs two, so
  about 250 jobs/s started AND ended per tenant (concurrent claims of one tenant also meet there as
  TransactionConflicts, which the claim retries). Shard it only with the cap split over the shards.
- `t#WAITING#k#p`: `waiting`, the tenant's queued + retry_wait jobs in ready shard k of priority band p
  (writes.ReadyQueue; the claim reads the bands from the highest priority down), changed in the same
  transaction as the job (create, claim, retry, release, reap, cancel, exhaust, replay). The claim queries
  only shards that have waiting jobs, so idle tenants cost it nothing. Sharded like the ready queue, so a
  tenant enqueueing millions spreads its creates over `ready_shards` items (each takes about 250 jobs/s,
  create and claim); the sum stays exact, as every shard is changed transactionally.
One consistent Query of `TENANTS` reads every tenant's settings and counters for a claim (a few KB).
All tenants' counters share that partition key; DynamoDB splits a hot partition key by sort key, but until
it does they share one partition's ~1,000 WCU/s: move them to per-tenant keys when that binds.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError
from pydantic import TypeAdapter, ValidationError

from onward import lifecycle
from onward.backoff import BackoffPolicy
from onward.clock import Clock, EpochMs, system_clock
from onward.dispatch import (
    Candidate,
    TenantLoad,
    TenantPolicy,
    Usage,
    dispatch_order,
)
from onward.documents import check_storable
from onward.dynamo import Item, from_item, json_size, to_item
from onward.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    PayloadTooLarge,
    StoreContention,
    StoreInvariantViolation,
    UnstorableValue,
)
from onward.faults import fault_point
from onward.lifecycle import Change, Decision, Refusal, RefusalReason, StaleReport
from onward.models import JOB_ID_PATTERN, ErrorSummary, Job, Lease, NewJob, OutboxEvent, Run, TenantId
from onward.outbox import OutboxReader
from onward.settings import Settings
from onward.states import JobState, RunOutcome
from onward.writes import (
    LEASE_SHARDS,
    TENANTS_PK,
    ReadyQueue,
    Slot,
    TenantEntity,
    TransitionWrites,
    ends_attempt,
    idempotency_item_key,
    job_attributes,
    job_from_item,
    job_key,
    run_from_item,
    run_key,
)

MAX_PARAMS_BYTES = 300_000  # the job row must stay under DynamoDB's 400 KB item limit
MAX_RESULT_BYTES = 350_000
MAX_IDEMPOTENCY_KEY = 128
TENANT_CACHE_MS = 2_000
MAX_ROUNDS = 25  # re-read-and-decide rounds before a transition gives up with StoreContention
CANDIDATES_PER_QUERY = 8
CREATE_ATTEMPTS = 8  # a create whose transaction meets a TransactionConflict (on a WAITING counter) retries

_tenant_id = TypeAdapter(TenantId)


class StoreStats:
    """Transactions the store had to decide again, by cause (TransactionConflict: a concurrent transaction
    on an item; ConditionalCheckFailed: the job row moved since it was read). Throttling and 5xx retries are
    botocore's (standard mode, onward.settings) and show in each response's RetryAttempts, not here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lost: dict[str, int] = {}

    def lost_race(self, cause: str) -> None:
        with self._lock:
            self._lost[cause] = self._lost.get(cause, 0) + 1

    def lost_races(self) -> dict[str, int]:
        """Cause -> transactions re-decided after losing to it, since this store was built."""
        with self._lock:
            return dict(self._lost)


class ReportStatus(StrEnum):
    APPLIED = "applied"
    FENCED = "fenced"  # the attempt no longer holds the job: nothing changed, stop


@dataclass(frozen=True)
class Created:
    job: Job
    created: bool  # False: an earlier request with the same Idempotency-Key made it


@dataclass(frozen=True)
class Report:
    """The answer to a worker's complete / fail / cancel acknowledgement / release."""

    status: ReportStatus
    job: Job

    @property
    def applied(self) -> bool:
        return self.status is ReportStatus.APPLIED


@dataclass(frozen=True)
class Heartbeat:
    held: bool  # False: fenced, the worker must stop and must not commit
    cancel_requested: bool
    lease_expires_at: EpochMs | None


class CancelStatus(StrEnum):
    CANCELLED = "cancelled"
    REQUESTED = "cancel_requested"  # running: the worker will stop at its next heartbeat
    ALREADY_REQUESTED = "already_requested"
    ALREADY_ENDED = "already_ended"


@dataclass(frozen=True)
class CancelOutcome:
    status: CancelStatus
    job: Job


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    ready_shards: int = 1


@dataclass(frozen=True)
class TenantState:
    """A tenant's settings and dispatch counters, as one claim read them."""

    tenant: Tenant
    usage: Usage = Usage()
    waiting_by_queue: dict[ReadyQueue, int] = field(default_factory=dict)

    def load(self) -> TenantLoad:
        waiting = sum(count for count in self.waiting_by_queue.values() if count > 0)
        return TenantLoad(self.tenant.tenant_id, self.tenant.policy, self.usage, waiting)

    def queues_with_work(self) -> list[ReadyQueue]:
        """The ready queues holding waiting jobs, highest priority first."""
        return sorted((queue for queue, count in self.waiting_by_queue.items() if count > 0),
                      key=lambda queue: (-queue.priority, queue.shard))


class _SlotRefused(Exception):  # noqa: N818 - control flow inside the claim, never escapes the store
    """The claim's condition on the tenant's RUNNING counter failed: it reached its cap meanwhile, or
    (lifting) another claim started one of its jobs first."""


class _FlexRefused(Exception):  # noqa: N818 - control flow inside the claim, never escapes the store
    """A flexing claim found another tenant with waiting jobs back below its cap: it must be served first."""


class _Found(StrEnum):
    NOTHING_DUE = "nothing_due"
    AT_CAP = "at_cap"


def _request_digest(request: NewJob) -> str:
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _reason_codes(error: ClientError) -> list[str | None]:
    return [reason.get("Code") if reason.get("Code") != "None" else None
            for reason in error.response.get("CancellationReasons", [])]


class JobStore:
    """The job state machine on DynamoDB. Thread-safe: share one per process."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: Any = None,
        clock: Clock = system_clock,
        backoff: BackoffPolicy = BackoffPolicy(),
        rng: random.Random | None = None,
        outbox_retention_days: int | None = None,  # default: the deployment's (settings.outbox_retention_days)
    ) -> None:
        self._jobs = settings.require("jobs_table")
        self._outbox = settings.require("outbox_table")
        self._db = client or settings.client("dynamodb")
        self._clock = clock
        self._backoff = backoff
        self._rng = rng or random.Random()
        retention_days = settings.outbox_retention_days if outbox_retention_days is None else outbox_retention_days
        self._writes = TransitionWrites(self._jobs, self._outbox, retention_days * 86_400)
        self._tenants: dict[str, Tenant] = {}
        self._tenants_read_at: EpochMs | None = None
        self.stats = StoreStats()

    # --- tenants ------------------------------------------------------------------------------------------

    def register_tenant(self, tenant: Tenant) -> None:
        """Add or update a tenant's dispatch settings (weight, concurrency cap, ready-queue shards)."""
        self._check_tenant(tenant.tenant_id)
        self._db.put_item(TableName=self._jobs, Item=self._tenant_item(tenant))
        self._tenants[tenant.tenant_id] = tenant

    def tenants(self, *, fresh: bool = False) -> list[Tenant]:
        """The registered tenants (cached for TENANT_CACHE_MS unless `fresh`)."""
        if fresh or self._tenants_read_at is None or self._clock() - self._tenants_read_at > TENANT_CACHE_MS:
            self.tenant_states()
        return sorted(self._tenants.values(), key=lambda t: t.tenant_id)

    def tenant_states(self) -> dict[str, TenantState]:
        """Every tenant's settings and dispatch counters (running, used worker time, waiting jobs), read
        with one consistent Query: what a claim decides from, and what operators and tests can watch."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self._jobs,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": TENANTS_PK}},
            ConsistentRead=True,
        )
        tenants: dict[str, Tenant] = {}
        usage: dict[str, Usage] = {}
        waiting: dict[str, dict[ReadyQueue, int]] = {}
        for page in pages:
            for item in page["Items"]:
                values = from_item(item)
                entity = values.get("entity")
                tenant_id = values["sk"].split("#", 1)[0]
                if entity == TenantEntity.SETTINGS:
                    tenants[tenant_id] = Tenant(
                        tenant_id, TenantPolicy(weight=values["weight"], cap=values.get("cap")),
                        values["ready_shards"],
                    )
                elif entity == TenantEntity.RUNNING:
                    usage[tenant_id] = Usage(values.get("running", 0), values.get("ended_ms", 0),
                                             values.get("started_ms_sum", 0))
                elif entity == TenantEntity.WAITING:
                    queue = ReadyQueue(values["shard"], values.get("priority", 0))
                    waiting.setdefault(tenant_id, {})[queue] = values.get("waiting", 0)
        self._tenants = tenants
        self._tenants_read_at = self._clock()
        return {
            tenant_id: TenantState(tenant, usage.get(tenant_id, Usage()), waiting.get(tenant_id, {}))
            for tenant_id, tenant in tenants.items()
        }

    def _tenant(self, tenant_id: str) -> Tenant:
        """The tenant's settings, registering it with defaults the first time it is seen."""
        known = self._tenants.get(tenant_id)
        if known is not None:
            return known
        tenant = Tenant(tenant_id)
        try:
            self._db.put_item(
                TableName=self._jobs,
                Item=self._tenant_item(tenant),
                ConditionExpression="attribute_not_exists(pk)",
            )
            self._tenants[tenant_id] = tenant
            return tenant
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        return next(t for t in self.tenants(fresh=True) if t.tenant_id == tenant_id)

    @staticmethod
    def _tenant_item(tenant: Tenant) -> Item:
        return to_item({
            "pk": TENANTS_PK, "sk": tenant.tenant_id, "entity": TenantEntity.SETTINGS.value,
            "weight": tenant.policy.weight, "cap": tenant.policy.cap, "ready_shards": tenant.ready_shards,
        })

    @staticmethod
    def _check_tenant(tenant_id: str) -> None:
        try:
            _tenant_id.validate_python(tenant_id)
        except ValidationError as error:
            raise InvalidRequest(f"invalid tenant id {tenant_id!r}") from error

    # --- reads --------------------------------------------------------------------------------------------

    def get(self, job_id: str, tenant_id: str | None = None) -> Job:
        """The job, strongly consistent. With `tenant_id`, another tenant's job is JobNotFound."""
        job, _ = self._read(job_id)
        if tenant_id is not None and job.tenant_id != tenant_id:
            raise JobNotFound(job_id)
        return job

    def runs(self, job_id: str, tenant_id: str | None = None) -> list[Run]:
        self.get(job_id, tenant_id)
        items = self._query_all(
            TableName=self._jobs,
            KeyConditionExpression="pk = :p AND begins_with(sk, :r)",
            ExpressionAttributeValues={":p": {"S": f"JOB#{job_id}"}, ":r": {"S": "RUN#"}},
            ConsistentRead=True,
        )
        return [run_from_item(item) for item in items]

    def result(self, job_id: str, tenant_id: str | None = None) -> Any:
        self.get(job_id, tenant_id)
        item = self._db.get_item(
            TableName=self._jobs, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "RESULT"}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else from_item(item).get("value")

    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order."""
        return OutboxReader(self._db, self._outbox).job(job_id)

    def all_jobs(self) -> Iterator[Job]:
        """Every job row (a scan: for reconciliation and audits, not for hot paths)."""
        pages = self._db.get_paginator("scan").paginate(
            TableName=self._jobs,
            FilterExpression="entity = :job",
            ExpressionAttributeValues={":job": {"S": "job"}},
        )
        for page in pages:
            for item in page["Items"]:
                yield job_from_item(item)[0]

    def _read(self, job_id: str) -> tuple[Job, int]:
        if not isinstance(job_id, str) or not JOB_ID_PATTERN.match(job_id):
            raise JobNotFound(job_id)
        item = self._db.get_item(TableName=self._jobs, Key=job_key(job_id), ConsistentRead=True).get("Item")
        if item is None:
            raise JobNotFound(job_id)
        return job_from_item(item)

    def _query_all(self, **query: Any) -> list[Item]:
        return [item for page in self._db.get_paginator("query").paginate(**query) for item in page["Items"]]

    # --- create -------------------------------------------------------------------------------------------

    def create(self, tenant_id: str, request: NewJob, idempotency_key: str | None = None) -> Created:
        """Enqueue a job. With an Idempotency-Key, a retry of the same request returns the same job and
        writes nothing; the same key with a different request raises IdempotencyConflict."""
        self._check_tenant(tenant_id)
        if json_size(request.params) > MAX_PARAMS_BYTES:
            raise PayloadTooLarge(
                f"params take {json_size(request.params)} bytes as JSON; the limit is {MAX_PARAMS_BYTES} "
                "(store large inputs elsewhere and pass a reference)"
            )
        if idempotency_key is not None:
            if not 1 <= len(idempotency_key) <= MAX_IDEMPOTENCY_KEY or not idempotency_key.isprintable():
                raise InvalidRequest(f"an Idempotency-Key is 1 to {MAX_IDEMPOTENCY_KEY} printable characters")
            earlier = self._resolve_idempotency(tenant_id, idempotency_key, request)
            if earlier is not None:
                return earlier
        tenant = self._tenant(tenant_id)
        change = lifecycle.create(uuid.uuid4().hex, tenant_id, request, self._clock())
        items = [
            {"Put": {
                "TableName": self._jobs,
                "Item": to_item(job_attributes(change.after, tenant.ready_shards)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }},
            self._writes.outbox_put(change),
            *filter(None, [self._writes.waiting_update(change, tenant.ready_shards)]),
        ]
        if idempotency_key is not None:
            items.append({"Put": {
                "TableName": self._jobs,
                "Item": {
                    **idempotency_item_key(tenant_id, idempotency_key),
                    **to_item({"job_id": change.after.job_id, "digest": _request_digest(request)}),
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }})
        for attempt in range(CREATE_ATTEMPTS):
            try:
                self._db.transact_write_items(TransactItems=items)
                return Created(change.after, created=True)
            except ClientError as error:
                codes = _reason_codes(error)
                if idempotency_key is not None and codes and codes[-1] == "ConditionalCheckFailed":
                    earlier = self._resolve_idempotency(tenant_id, idempotency_key, request)
                    if earlier is not None:
                        return earlier
                # Nothing was written: a conflict with a concurrent transaction on the tenant's WAITING
                # counter is retried as it is (same job id, same items).
                if "TransactionConflict" not in codes or attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(self._rng.uniform(0, 0.002 * 2 ** attempt))
        raise AssertionError("unreachable")

    def _resolve_idempotency(self, tenant_id: str, key: str, request: NewJob) -> Created | None:
        item = self._db.get_item(
            TableName=self._jobs, Key=idempotency_item_key(tenant_id, key), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        earlier = from_item(item)
        if earlier["digest"] != _request_digest(request):
            raise IdempotencyConflict(key, earlier["job_id"])
        return Created(self.get(earlier["job_id"]), created=False)

    # --- the worker's side --------------------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float) -> Lease | None:
        """Lease the next due job, None when no job is due.

        Tenants are taken in onward.dispatch's fair order (least weighted worker time first), read from
        their counters with one Query; only tenants with waiting jobs are queried. A tenant at its cap is
        skipped while a tenant below its cap has a due job; when none has (as the ready queries this claim
        made show), tenants at their cap are served past it (flex), so no worker idles while a job is due.
        The running count changes in the claim's own transaction, conditional on `running < cap`, so a cap
        holds however many workers claim at once; a flexing claim's transaction checks instead that the
        other capped tenants with waiting jobs are still at their caps (else it decides again). The attempt counter is incremented
        inside the claim; a job whose attempts are used up is ended (dead / quarantined) on the way."""
        lease_ms = int(lease_s * 1000)
        for _ in range(MAX_ROUNDS):
            try:
                return self._claim_once(worker_id, lease_ms)
            except _FlexRefused:
                continue  # a capped tenant came back below its cap: decide again from fresh counters
        return None

    def _claim_once(self, worker_id: str, lease_ms: int) -> Lease | None:
        states = self.tenant_states()
        order = dispatch_order([state.load() for state in states.values()], self._clock())
        reached_cap: list[Candidate] = []
        for candidate in order.within_cap:
            found = self._claim_from(states[candidate.tenant_id], candidate, worker_id, lease_ms)
            if isinstance(found, Lease):
                return found
            if found is _Found.AT_CAP:  # it reached its cap while this claim read it; it still has work
                reached_cap.append(candidate)
        # No tenant below its cap has a due job: serve the capped ones past their caps, in fair order. The
        # flexing transaction also checks that the other capped tenants are still at their caps (they were
        # when the counters were read): if one came back below, it goes first (_FlexRefused).
        capped = sorted([*order.flex, *reached_cap], key=lambda candidate: candidate.virtual_time)
        for candidate in capped:
            others = tuple((other.tenant_id, cap) for other in capped
                           if other is not candidate and (cap := states[other.tenant_id].tenant.policy.cap))
            found = self._claim_from(states[candidate.tenant_id], candidate, worker_id, lease_ms,
                                     flex_while_at_cap=others)
            if isinstance(found, Lease):
                return found
        return None

    def _claim_from(
        self,
        state: TenantState,
        candidate: Candidate,
        worker_id: str,
        lease_ms: int,
        *,
        flex_while_at_cap: tuple[tuple[str, int], ...] | None = None,
    ) -> Lease | _Found:
        """Claim one due job of this tenant (its ready queues that have waiting jobs: highest priority band
        first, then due time order),
        within its cap, or past it (`flex_while_at_cap` given: while those tenants are at their caps).

        NOTHING_DUE means its ready queries showed no due job it had not tried: when every job a query
        showed was taken by concurrent claims (or ended on the way), the shard is queried again, else the
        claim would flex a capped tenant while this one still has due jobs. (Jobs already tried are not
        tried again, so a lagging index cannot keep the claim here.)"""
        tenant = state.tenant
        if flex_while_at_cap is None:
            slot = Slot(cap=tenant.policy.cap, lift_to_ms=candidate.lift_to_ms)
        else:
            slot = Slot(cap=None, lift_to_ms=candidate.lift_to_ms, others_at_cap=flex_while_at_cap)
        tried: set[str] = set()
        for queue in state.queues_with_work():
            for _ in range(MAX_ROUNDS):
                job_ids = [job_id for job_id in self._due_jobs(queue.partition(tenant.tenant_id), self._clock())
                           if job_id not in tried]
                if not job_ids:
                    break
                tried.update(job_ids)
                for job_id in job_ids:
                    while True:
                        try:
                            decision = self._transition(
                                job_id, lambda job: lifecycle.claim(job, worker_id, lease_ms, self._clock()),
                                slot=slot,
                            )
                            break
                        except _SlotRefused:
                            if slot.lift_to_ms is None:
                                return _Found.AT_CAP
                            # another claim started one of its jobs: no lift now
                            slot = Slot(cap=slot.cap, others_at_cap=slot.others_at_cap)
                    if isinstance(decision, Change) and decision.after.state is JobState.RUNNING:
                        return Lease(job=decision.after, worker_id=worker_id,
                                     lease_expires_at=decision.after.lease_expires_at or 0)
        return _Found.NOTHING_DUE

    def _due_jobs(self, ready_pk: str, now: EpochMs) -> list[str]:
        items = self._db.query(
            TableName=self._jobs,
            IndexName="ready",
            KeyConditionExpression="ready_pk = :p AND ready_due <= :now",
            ExpressionAttributeValues={":p": {"S": ready_pk}, ":now": {"N": str(now)}},
            Limit=CANDIDATES_PER_QUERY,
        )["Items"]
        job_ids = [item["pk"]["S"].removeprefix("JOB#") for item in items]
        self._rng.shuffle(job_ids)  # concurrent workers spread over the head of the queue
        return job_ids

    def heartbeat(self, lease: Lease, lease_s: float) -> Heartbeat:
        """Extend the lease, only for the attempt and owner that hold it; say whether cancel was requested."""
        expires = self._clock() + int(lease_s * 1000)
        try:
            attributes = self._db.update_item(
                TableName=self._jobs,
                Key=job_key(lease.job_id),
                UpdateExpression="SET lease_expires_at = :e",
                ConditionExpression="#s = :running AND attempt = :a AND lease_owner = :w",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":e": {"N": str(expires)}, ":running": {"S": JobState.RUNNING.value},
                    ":a": {"N": str(lease.attempt)}, ":w": {"S": lease.worker_id},
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return Heartbeat(held=False, cancel_requested=False, lease_expires_at=None)
        return Heartbeat(held=True, cancel_requested=attributes.get("cancel_requested", {}).get("BOOL", False),
                         lease_expires_at=expires)

    def complete(self, lease: Lease, result: Any = None) -> Report:
        """The attempt succeeded with `result`. Raises InvalidRequest before writing anything when the result
        cannot be stored: UnstorableValue (not JSON, or not what DynamoDB holds), PayloadTooLarge."""
        check_storable(result, "result")
        try:
            size = json_size(result)
        except (TypeError, ValueError) as error:  # what check_storable let through but JSON cannot encode
            raise UnstorableValue(f"result: {error}") from error
        if size > MAX_RESULT_BYTES:
            raise PayloadTooLarge(f"the result takes {size} bytes as JSON; the limit is {MAX_RESULT_BYTES}")
        return self._report(lease, RunOutcome.SUCCEEDED, lambda job, now: lifecycle.complete(
            job, lease.attempt, lease.worker_id, result, now))

    def fail(self, lease: Lease, error: ErrorSummary, *, permanent: bool = False) -> Report:
        # The backoff grows with the attempts charged to the budget (after a replay or a release, fewer
        # than the attempt number), as the claim counted them.
        delay_ms = int(self._backoff.delay(lease.job.attempts_used, self._rng) * 1000)
        return self._report(lease, RunOutcome.FAILED, lambda job, now: lifecycle.fail(
            job, lease.attempt, lease.worker_id, error, permanent=permanent, retry_delay_ms=delay_ms, now=now))

    def acknowledge_cancel(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.CANCELLED, lambda job, now: lifecycle.acknowledge_cancel(
            job, lease.attempt, lease.worker_id, now))

    def release(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.RELEASED, lambda job, now: lifecycle.release(
            job, lease.attempt, lease.worker_id, now))

    def _report(self, lease: Lease, claimed: RunOutcome, decide: Callable[[Job, EpochMs], Decision]) -> Report:
        """Commit a worker's report (`claimed`: the run outcome it writes). When the attempt no longer holds
        the job, its run record tells a repeat of a report that committed (APPLIED again, nothing written)
        from a zombie's (FENCED, marked on its run record)."""
        # lease.job is the row the claim wrote: its updated_at is the claim's time (the run's claimed_at).
        decision = self._transition(lease.job_id, lambda job: decide(job, self._clock()),
                                    claimed_at=lease.job.updated_at)
        if isinstance(decision, Change):
            return Report(ReportStatus.APPLIED, decision.after)
        verdict = lifecycle.stale_report(self._run(lease.job_id, lease.attempt), lease.worker_id, claimed)
        if verdict is StaleReport.REPEATED:
            return Report(ReportStatus.APPLIED, decision.job)
        if verdict is StaleReport.ZOMBIE:
            self._record_fenced(lease, claimed)
        return Report(ReportStatus.FENCED, decision.job)

    def _run(self, job_id: str, attempt: int) -> Run | None:
        item = self._db.get_item(TableName=self._jobs, Key=run_key(job_id, attempt), ConsistentRead=True)
        return None if "Item" not in item else run_from_item(item["Item"])

    def _record_fenced(self, lease: Lease, claimed: RunOutcome) -> None:
        """Mark the zombie attempt on its own run record; the job row is not touched. Only a run that is
        open or was closed by the reaper is marked: a run's own outcome is never overwritten."""
        try:
            self._db.update_item(
                TableName=self._jobs,
                Key=run_key(lease.job_id, lease.attempt),
                UpdateExpression=(
                    "SET reclaimed_as = if_not_exists(outcome, :none), outcome = :fenced, "
                    "late_report = :claimed, late_report_at = :now"
                ),
                ConditionExpression=(
                    "attribute_exists(pk) AND worker_id = :w AND "
                    "(attribute_not_exists(outcome) OR outcome = :lease_expired)"
                ),
                ExpressionAttributeValues={
                    ":fenced": {"S": RunOutcome.FENCED.value}, ":claimed": {"S": claimed.value},
                    ":lease_expired": {"S": RunOutcome.LEASE_EXPIRED.value},
                    ":now": {"N": str(self._clock())}, ":w": {"S": lease.worker_id}, ":none": {"NULL": True},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    # --- reaper, tenant and operator ----------------------------------------------------------------------

    def reap(self, now: EpochMs | None = None, limit: int = 100) -> list[Job]:
        """Running jobs whose lease lapsed before `now`: their attempt is closed as lease_expired and the
        job goes back to the queue (to quarantine at its limit; cancelled when its tenant asked to cancel
        it). Returns the jobs moved."""
        now = self._clock() if now is None else now
        moved: list[Job] = []
        for shard in range(LEASE_SHARDS):
            expired = self._db.query(
                TableName=self._jobs,
                IndexName="leases",
                KeyConditionExpression="lease_pk = :p AND lease_expires_at < :now",
                ExpressionAttributeValues={":p": {"S": f"LEASE#{shard}"}, ":now": {"N": str(now)}},
                Limit=limit,
            )["Items"]
            for item in expired:
                job_id = item["pk"]["S"].removeprefix("JOB#")
                fault_point("store.reap.before_transition", job_id)
                decision = self._transition(job_id, lambda job: lifecycle.reap(job, now))
                if isinstance(decision, Change):
                    moved.append(decision.after)
        return moved

    def cancel(self, job_id: str, tenant_id: str | None = None) -> CancelOutcome:
        """Queued / retry_wait -> cancelled now; running -> cancel requested; finished -> already ended."""
        self.get(job_id, tenant_id)
        decision = self._transition(job_id, lambda job: lifecycle.cancel(job, self._clock()))
        if isinstance(decision, Refusal):
            status = (CancelStatus.ALREADY_REQUESTED if decision.reason is RefusalReason.ALREADY_REQUESTED
                      else CancelStatus.ALREADY_ENDED)
            return CancelOutcome(status, decision.job)
        status = CancelStatus.CANCELLED if decision.after.state is JobState.CANCELLED else CancelStatus.REQUESTED
        return CancelOutcome(status, decision.after)

    def replay(self, job_id: str) -> Job:
        """Operator: a dead or quarantined job is queued again as a new version with a fresh attempt budget."""
        decision = self._transition(job_id, lambda job: lifecycle.replay(job, self._clock()))
        if isinstance(decision, Refusal):
            raise NotReplayable(f"job {job_id} is {decision.job.state.value}; only dead or quarantined jobs replay")
        return decision.after

    # --- the one way a job changes ------------------------------------------------------------------------

    def _transition(
        self,
        job_id: str,
        decide: Callable[[Job], Decision],
        *,
        slot: Slot | None = None,
        claimed_at: EpochMs | None = None,
    ) -> Decision:
        """Read, decide, commit; again while the commit loses a race. `slot`: how a claim takes its running
        slot (_SlotRefused when the tenant's counter refuses it). `claimed_at`: when the attempt that this
        transition may end was claimed, if the caller knows (else it is read from the run record)."""
        for round_ in range(MAX_ROUNDS):
            job, shards = self._read(job_id)
            decision = decide(job)
            if isinstance(decision, Refusal) or self._commit(decision, shards, slot=slot,
                                                             claimed_at=claimed_at):
                return decision
            time.sleep(self._rng.uniform(0, 0.002 * 2 ** min(round_, 6)))
        raise StoreContention(f"job {job_id}: gave up after {MAX_ROUNDS} lost races")

    def _commit(
        self, change: Change, shards: int, *, slot: Slot | None = None, claimed_at: EpochMs | None = None
    ) -> bool:
        """One transaction; False when the job row moved since it was read (the caller re-decides)."""
        assert change.before is not None
        writes = self._writes
        items = [writes.job_update(change, shards)]
        if change.open_run is not None:
            items.append(writes.open_run(change))
        if change.close_run is not None:
            items.append(writes.run_close(change))
        if change.has_result:
            items.append(writes.result_put(change))
        if ends_attempt(change) and claimed_at is None:
            claimed_at = self._claimed_at(change.after.job_id, change.close_run.attempt)  # type: ignore[union-attr]
        running = writes.running_update(change, slot, claimed_at)
        running_at = len(items) if running is not None else None
        waiting = writes.waiting_update(change, shards)
        items.extend(update for update in (running, waiting) if update is not None)
        items.append(writes.outbox_put(change))
        checks_from = len(items)
        if running is not None and slot is not None:
            items.extend(writes.still_at_cap(tenant_id, cap) for tenant_id, cap in slot.others_at_cap)
        subject = f"{change.transition.value}:{change.after.job_id}"
        fault_point("store.before_commit", subject)
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            codes = _reason_codes(error)
            if "TransactionConflict" in codes:
                self.stats.lost_race("TransactionConflict")
                return False
            if codes and codes[0] == "ConditionalCheckFailed":
                self.stats.lost_race("ConditionalCheckFailed")
                return False
            if running_at is not None and codes[running_at:running_at + 1] == ["ConditionalCheckFailed"]:
                raise _SlotRefused() from error
            if "ConditionalCheckFailed" in codes[checks_from:]:
                raise _FlexRefused() from error
            raise StoreInvariantViolation(
                f"{change.transition.value} of job {change.after.job_id} v{change.after.version} refused: {codes}"
            ) from error
        fault_point("store.after_commit", subject)  # committed; the caller never hears of it
        return True

    def _claimed_at(self, job_id: str, attempt: int) -> EpochMs:
        """When an attempt was claimed, from its run record (for a transition without the worker's lease:
        the reaper's)."""
        item = self._db.get_item(TableName=self._jobs, Key=run_key(job_id, attempt), ConsistentRead=True,
                                 ProjectionExpression="claimed_at").get("Item")
        if item is None:
            raise StoreInvariantViolation(f"job {job_id} attempt {attempt} is running without a run record")
        return int(item["claimed_at"]["N"])




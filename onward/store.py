"""JobStore: the authoritative job state on DynamoDB.

Every transition is ONE TransactWriteItems: the job row (conditional on the state, attempt and version it
was decided from), the attempt's run record, the result where there is one, and one outbox event
(`attribute_not_exists`, so a version can never be published twice). What a transition does is decided by
onward.lifecycle from the current row; when the conditional write loses a race, the store re-reads and
asks again, so the caller always gets an answer that matches the committed state.
"""

from __future__ import annotations

import hashlib
import json
import random
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
from onward.dispatch import TenantPolicy, dispatch_order
from onward.dynamo import Item, from_item, json_size, to_attribute, to_item
from onward.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    PayloadTooLarge,
    StoreContention,
    StoreInvariantViolation,
)
from onward.lifecycle import Change, Decision, Refusal, RefusalReason
from onward.models import JOB_ID_PATTERN, ErrorSummary, Job, Lease, NewJob, OutboxEvent, Run, TenantId
from onward.outbox import OutboxReader, time_bucket
from onward.settings import Settings
from onward.states import CLAIMABLE_STATES, JobState, RunOutcome

MAX_PARAMS_BYTES = 300_000  # the job row must stay under DynamoDB's 400 KB item limit
MAX_RESULT_BYTES = 350_000
MAX_IDEMPOTENCY_KEY = 128
LEASE_SHARDS = 4  # partitions of the `leases` index, so the reaper's reads are never one hot key
TENANT_CACHE_MS = 2_000
MAX_ROUNDS = 25  # re-read-and-decide rounds before a transition gives up with StoreContention
CANDIDATES_PER_QUERY = 8

_tenant_id = TypeAdapter(TenantId)


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


# --- item keys and shapes -------------------------------------------------------------------------------

def _job_key(job_id: str) -> Item:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}


def _run_key(job_id: str, attempt: int) -> Item:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": f"RUN#{attempt:06d}"}}


def _idempotency_key(tenant_id: str, key: str) -> Item:
    return {"pk": {"S": f"IDEM#{tenant_id}#{key}"}, "sk": {"S": "IDEM"}}


def _ready_shard(job_id: str, shards: int) -> int:
    return int(job_id[:8], 16) % shards


def _job_attributes(job: Job, ready_shards: int) -> dict[str, Any]:
    """The job row as stored, with the sparse index keys that put it in `ready` or `leases`."""
    row = {"pk": f"JOB#{job.job_id}", "sk": "JOB", "entity": "job", **job.model_dump(mode="json")}
    row["ready_shards"] = ready_shards
    if job.state in CLAIMABLE_STATES:
        row["ready_pk"] = f"{job.tenant_id}#{_ready_shard(job.job_id, ready_shards)}"
        row["ready_due"] = job.not_before
    if job.state is JobState.RUNNING:
        row["lease_pk"] = f"LEASE#{int(job.job_id[-8:], 16) % LEASE_SHARDS}"
    return {name: value for name, value in row.items() if value is not None}


def _job_from_item(item: Item) -> tuple[Job, int]:
    values = from_item(item)
    shards = values.pop("ready_shards", 1)
    for derived in ("pk", "sk", "entity", "ready_pk", "ready_due", "lease_pk"):
        values.pop(derived, None)
    return Job.model_validate(values), shards


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
        outbox_retention_days: int = 7,
    ) -> None:
        self._jobs = settings.require("jobs_table")
        self._outbox = settings.require("outbox_table")
        self._db = client or settings.client("dynamodb")
        self._clock = clock
        self._backoff = backoff
        self._rng = rng or random.Random()
        self._retention_s = outbox_retention_days * 86_400
        self._tenants: dict[str, Tenant] = {}
        self._tenants_read_at: EpochMs | None = None
        self._rotation = 0

    # --- tenants ------------------------------------------------------------------------------------------

    def register_tenant(self, tenant: Tenant) -> None:
        """Add or update a tenant's dispatch settings (weight, concurrency cap, ready-queue shards)."""
        self._check_tenant(tenant.tenant_id)
        self._db.put_item(TableName=self._jobs, Item=self._tenant_item(tenant))
        self._tenants[tenant.tenant_id] = tenant

    def tenants(self, *, fresh: bool = False) -> list[Tenant]:
        now = self._clock()
        if fresh or self._tenants_read_at is None or now - self._tenants_read_at > TENANT_CACHE_MS:
            pages = self._db.get_paginator("query").paginate(
                TableName=self._jobs,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": "TENANTS"}},
                ConsistentRead=True,
            )
            found = {}
            for page in pages:
                for item in page["Items"]:
                    values = from_item(item)
                    found[values["sk"]] = Tenant(
                        values["sk"],
                        TenantPolicy(weight=values["weight"], cap=values.get("cap")),
                        values["ready_shards"],
                    )
            self._tenants = found
            self._tenants_read_at = now
        return sorted(self._tenants.values(), key=lambda t: t.tenant_id)

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
            "pk": "TENANTS", "sk": tenant.tenant_id, "entity": "tenant", "weight": tenant.policy.weight,
            "cap": tenant.policy.cap, "ready_shards": tenant.ready_shards,
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
        return [Run.model_validate(_without_keys(from_item(item))) for item in items]

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
                yield _job_from_item(item)[0]

    def _read(self, job_id: str) -> tuple[Job, int]:
        if not isinstance(job_id, str) or not JOB_ID_PATTERN.match(job_id):
            raise JobNotFound(job_id)
        item = self._db.get_item(TableName=self._jobs, Key=_job_key(job_id), ConsistentRead=True).get("Item")
        if item is None:
            raise JobNotFound(job_id)
        return _job_from_item(item)

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
                "Item": to_item(_job_attributes(change.after, tenant.ready_shards)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }},
            self._outbox_put(change),
        ]
        if idempotency_key is not None:
            items.append({"Put": {
                "TableName": self._jobs,
                "Item": {
                    **_idempotency_key(tenant_id, idempotency_key),
                    **to_item({"job_id": change.after.job_id, "digest": _request_digest(request)}),
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }})
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as error:
            codes = _reason_codes(error)
            if idempotency_key is not None and len(codes) == 3 and codes[2] == "ConditionalCheckFailed":
                earlier = self._resolve_idempotency(tenant_id, idempotency_key, request)
                if earlier is not None:
                    return earlier
            raise
        return Created(change.after, created=True)

    def _resolve_idempotency(self, tenant_id: str, key: str, request: NewJob) -> Created | None:
        item = self._db.get_item(
            TableName=self._jobs, Key=_idempotency_key(tenant_id, key), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        earlier = from_item(item)
        if earlier["digest"] != _request_digest(request):
            raise IdempotencyConflict(key, earlier["job_id"])
        return Created(self.get(earlier["job_id"]), created=False)

    # --- the worker's side --------------------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float) -> Lease | None:
        """Lease the next due job, tenants taken in dispatch order. The attempt counter is incremented
        inside the claim; a job whose attempts are used up is ended (dead / quarantined) instead."""
        now = self._clock()
        lease_ms = int(lease_s * 1000)
        tenants = self.tenants()
        self._rotation += 1
        for tenant in dispatch_order(tenants, self._rotation):
            for shard in range(tenant.ready_shards):
                for job_id in self._due_jobs(f"{tenant.tenant_id}#{shard}", now):
                    decision = self._transition(
                        job_id, lambda job: lifecycle.claim(job, worker_id, lease_ms, self._clock())
                    )
                    if isinstance(decision, Change) and decision.after.state is JobState.RUNNING:
                        return Lease(job=decision.after, worker_id=worker_id,
                                     lease_expires_at=decision.after.lease_expires_at or 0)
        return None

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
                Key=_job_key(lease.job_id),
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
        size = json_size(result)
        if size > MAX_RESULT_BYTES:
            raise PayloadTooLarge(f"the result takes {size} bytes as JSON; the limit is {MAX_RESULT_BYTES}")
        return self._report(lease, RunOutcome.SUCCEEDED, lambda job, now: lifecycle.complete(
            job, lease.attempt, lease.worker_id, result, now))

    def fail(self, lease: Lease, error: ErrorSummary, *, permanent: bool = False) -> Report:
        delay_ms = int(self._backoff.delay(lease.attempt, self._rng) * 1000)
        return self._report(lease, RunOutcome.FAILED, lambda job, now: lifecycle.fail(
            job, lease.attempt, lease.worker_id, error, permanent=permanent, retry_delay_ms=delay_ms, now=now))

    def acknowledge_cancel(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.CANCELLED, lambda job, now: lifecycle.acknowledge_cancel(
            job, lease.attempt, lease.worker_id, now))

    def release(self, lease: Lease) -> Report:
        return self._report(lease, RunOutcome.RELEASED, lambda job, now: lifecycle.release(
            job, lease.attempt, lease.worker_id, now))

    def _report(self, lease: Lease, claimed: RunOutcome, decide: Callable[[Job, EpochMs], Decision]) -> Report:
        decision = self._transition(lease.job_id, lambda job: decide(job, self._clock()))
        if isinstance(decision, Change):
            return Report(ReportStatus.APPLIED, decision.after)
        self._record_fenced(lease, claimed)
        return Report(ReportStatus.FENCED, decision.job)

    def _record_fenced(self, lease: Lease, claimed: RunOutcome) -> None:
        """Mark the zombie attempt on its own run record; the job row is not touched."""
        try:
            self._db.update_item(
                TableName=self._jobs,
                Key=_run_key(lease.job_id, lease.attempt),
                UpdateExpression=(
                    "SET reclaimed_as = if_not_exists(outcome, :none), outcome = :fenced, "
                    "late_report = :claimed, late_report_at = :now"
                ),
                ConditionExpression="attribute_exists(pk) AND worker_id = :w AND (attribute_not_exists(outcome) OR outcome <> :fenced)",
                ExpressionAttributeValues={
                    ":fenced": {"S": RunOutcome.FENCED.value}, ":claimed": {"S": claimed.value},
                    ":now": {"N": str(self._clock())}, ":w": {"S": lease.worker_id}, ":none": {"NULL": True},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    # --- reaper, tenant and operator ----------------------------------------------------------------------

    def reap(self, now: EpochMs | None = None, limit: int = 100) -> list[Job]:
        """Running jobs whose lease lapsed before `now`: their attempt is closed as lease_expired and the
        job goes back to the queue (or to quarantine at its limit). Returns the jobs moved."""
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
                decision = self._transition(item["pk"]["S"].removeprefix("JOB#"), lambda job: lifecycle.reap(job, now))
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

    def _transition(self, job_id: str, decide: Callable[[Job], Decision]) -> Decision:
        for round_ in range(MAX_ROUNDS):
            job, shards = self._read(job_id)
            decision = decide(job)
            if isinstance(decision, Refusal) or self._commit(decision, shards):
                return decision
            time.sleep(self._rng.uniform(0, 0.002 * 2 ** min(round_, 6)))
        raise StoreContention(f"job {job_id}: gave up after {MAX_ROUNDS} lost races")

    def _commit(self, change: Change, shards: int) -> bool:
        """One transaction; False when the job row moved since it was read (the caller re-decides)."""
        assert change.before is not None
        items = [self._job_update(change, shards)]
        if change.open_run is not None:
            items.append({"Put": {
                "TableName": self._jobs,
                "Item": {**_run_key(change.after.job_id, change.open_run.attempt),
                         **to_item({"entity": "run", **change.open_run.model_dump(mode="json")})},
                "ConditionExpression": "attribute_not_exists(pk)",
            }})
        if change.close_run is not None:
            items.append(self._run_close(change))
        if change.has_result:
            items.append({"Put": {
                "TableName": self._jobs,
                "Item": {"pk": {"S": f"JOB#{change.after.job_id}"}, "sk": {"S": "RESULT"},
                         **to_item({"entity": "result", "attempt": change.after.attempt,
                                    "size_bytes": json_size(change.result)}),
                         "value": to_attribute(change.result)},
                "ConditionExpression": "attribute_not_exists(pk)",
            }})
        items.append(self._outbox_put(change))
        try:
            self._db.transact_write_items(TransactItems=items)
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            codes = _reason_codes(error)
            if codes and codes[0] == "ConditionalCheckFailed" or "TransactionConflict" in codes:
                return False
            raise StoreInvariantViolation(
                f"{change.transition.value} of job {change.after.job_id} v{change.after.version} refused: {codes}"
            ) from error

    def _job_update(self, change: Change, shards: int) -> dict[str, Any]:
        before = _job_attributes(change.before, shards)  # type: ignore[arg-type]
        after = _job_attributes(change.after, shards)
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
            "TableName": self._jobs,
            "Key": _job_key(change.after.job_id),
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }}

    def _run_close(self, change: Change) -> dict[str, Any]:
        closure = change.close_run
        assert closure is not None
        fields = {"outcome": closure.outcome.value, "finished_at": closure.finished_at}
        if closure.error is not None:
            fields["error"] = closure.error.model_dump(mode="json")
        return {"Update": {
            "TableName": self._jobs,
            "Key": _run_key(change.after.job_id, closure.attempt),
            "UpdateExpression": "SET " + ", ".join(f"#{name} = :{name}" for name in fields),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#outcome)",
            "ExpressionAttributeNames": {f"#{name}": name for name in fields},
            "ExpressionAttributeValues": {f":{name}": to_attribute(value) for name, value in fields.items()},
        }}

    def _outbox_put(self, change: Change) -> dict[str, Any]:
        size = json_size(change.result) if change.has_result else None
        event = OutboxEvent.of(change.after, result=change.result, result_size=size)
        committed_s = change.after.updated_at // 1000
        item = {
            **event.model_dump(mode="json", by_alias=True),
            "time_bucket": time_bucket(event.occurred_at),
            "expires_at": committed_s + self._retention_s,
        }
        return {"Put": {
            "TableName": self._outbox,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(job_id)",
        }}


def _without_keys(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name not in ("pk", "sk", "entity")}


"""The job store's recorder on DynamoDB: every write is ONE TransactWriteItems (onward.writes builds it),
reads are consistent GetItem / Query, due jobs and expired leases come from the sparse `ready` and
`leases` indexes, the tenants from one consistent Query of the `TENANTS` partition."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from onward.clock import EpochMs
from onward.dynamo import Item, from_item
from onward.errors import StoreInvariantViolation
from onward.keys import (
    RUN_PREFIX,
    TENANTS_PK,
    Entity,
    ReadyQueue,
    idempotency_key,
    job_id_of,
    job_key,
    job_pk,
    lease_shard_partition,
    result_key,
    run_key,
    tenant_item,
)
from onward.models import Job, OutboxEvent, Run
from onward.outbox import OutboxReader
from onward.recorder import (
    CommitOutcome,
    CreateOutcome,
    IdempotencyRecord,
    JobRecorder,
    JobRow,
    NewJobWrite,
    RenewalAnswer,
    Role,
    Tenant,
    TenantState,
    TransitionWrite,
    judge,
    tenant_states_from_items,
)
from onward.states import JobState, RunOutcome
from onward.writes import (
    CONDITIONAL_CHECK_FAILED,
    TRANSACTION_CONFLICT,
    Transaction,
    TransitionWrites,
    job_from_item,
    run_from_item,
    wire_item,
    wire_key,
)


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _by_role(reasons: dict[Role, list[str]]) -> dict[str, list[str]]:
    return {role.value: codes for role, codes in reasons.items()}


class DynamoRecorder(JobRecorder):
    """A JobRecorder on the jobs and outbox tables of one deployment, through one boto3 client."""

    def __init__(self, client: Any, jobs_table: str, outbox_table: str) -> None:
        self._db = client
        self._jobs = jobs_table
        self._outbox = outbox_table
        self._writes = TransitionWrites(jobs_table, outbox_table)

    # --- reads ----------------------------------------------------------------------------------------------

    def _get(self, key: Item, **options: Any) -> Item | None:
        found: Item | None = self._db.get_item(TableName=self._jobs, Key=key, ConsistentRead=True,
                                               **options).get("Item")
        return found

    def job(self, job_id: str) -> JobRow | None:
        item = self._get(wire_key(job_key(job_id)))
        return None if item is None else JobRow(*job_from_item(item))

    def run(self, job_id: str, attempt: int) -> Run | None:
        item = self._get(wire_key(run_key(job_id, attempt)))
        return None if item is None else run_from_item(item)

    def runs(self, job_id: str) -> list[Run]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._jobs,
            KeyConditionExpression="pk = :p AND begins_with(sk, :r)",
            ExpressionAttributeValues={":p": {"S": job_pk(job_id)}, ":r": {"S": RUN_PREFIX}},
            ConsistentRead=True,
        )
        return [run_from_item(item) for page in pages for item in page["Items"]]

    def result(self, job_id: str) -> Any:
        item = self._get(wire_key(result_key(job_id)))
        return None if item is None else from_item(item).get("value")

    def events(self, job_id: str) -> list[OutboxEvent]:
        return OutboxReader(self._db, self._outbox).job(job_id)

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
        try:
            self._db.transact_write_items(TransactItems=transaction.actions)
        except ClientError as error:
            if _error_code(error) != "TransactionCanceledException":
                raise
            return transaction.reasons(error.response)
        return None

    def create(self, write: NewJobWrite) -> CreateOutcome:
        reasons = self._transact(self._writes.new_job(write))
        if reasons is None:
            return CreateOutcome.CREATED
        if CONDITIONAL_CHECK_FAILED in reasons.get(Role.IDEMPOTENCY, ()):
            return CreateOutcome.KEY_USED
        # Nothing was written: a conflict with a concurrent transaction (on the tenant's WAITING counter) is
        # tried again as it is.
        if any(TRANSACTION_CONFLICT in codes for codes in reasons.values()):
            return CreateOutcome.CONFLICT
        raise StoreInvariantViolation(
            f"the create of job {write.change.after.job_id} was refused: {_by_role(reasons)}")

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        reasons = self._transact(self._writes.transition(write))
        if reasons is None:
            return CommitOutcome.COMMITTED
        change = write.change
        return judge(
            {role for role, codes in reasons.items() if CONDITIONAL_CHECK_FAILED in codes},
            conflict=any(TRANSACTION_CONFLICT in codes for codes in reasons.values()),
            refused=f"{change.transition.value} of job {change.after.job_id} v{change.after.version} "
                    f"refused: {_by_role(reasons)}",
        )

    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs) -> RenewalAnswer:
        try:
            attributes = self._db.update_item(
                TableName=self._jobs,
                Key=wire_key(job_key(job_id)),
                UpdateExpression="SET lease_expires_at = :e",
                ConditionExpression="#s = :running AND attempt = :a AND lease_owner = :w",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":e": {"N": str(expires_at)}, ":running": {"S": JobState.RUNNING.value},
                    ":a": {"N": str(attempt)}, ":w": {"S": worker_id},
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise
            return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)
        cancel_requested = attributes.get("cancel_requested", {}).get("BOOL", False)
        return RenewalAnswer(held=True, cancel_requested=cancel_requested, lease_expires_at=expires_at)

    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int) -> bool:
        try:
            self._db.update_item(
                TableName=self._jobs,
                Key=wire_key(run_key(job_id, attempt)),
                UpdateExpression=(
                    "SET reclaimed_as = if_not_exists(outcome, :none), outcome = :fenced, "
                    "late_report = :claimed, late_report_at = :now, expires_at = if_not_exists(expires_at, :ttl)"
                ),
                ConditionExpression=(
                    "attribute_exists(pk) AND worker_id = :w AND "
                    "(attribute_not_exists(outcome) OR outcome = :lease_expired)"
                ),
                ExpressionAttributeValues={
                    ":fenced": {"S": RunOutcome.FENCED.value}, ":claimed": {"S": late_report.value},
                    ":lease_expired": {"S": RunOutcome.LEASE_EXPIRED.value},
                    ":now": {"N": str(at)}, ":w": {"S": worker_id}, ":none": {"NULL": True},
                    ":ttl": {"N": str(expires_at)},
                },
            )
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    # --- indexes --------------------------------------------------------------------------------------------

    def due_jobs(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[str]:
        items = self._db.query(
            TableName=self._jobs,
            IndexName="ready",
            KeyConditionExpression="ready_pk = :p AND ready_due <= :now",
            ExpressionAttributeValues={":p": {"S": queue.partition(tenant_id)}, ":now": {"N": str(now)}},
            Limit=limit,
        )["Items"]
        return [job_id_of(item["pk"]["S"]) for item in items]

    def expired_leases(self, shard: int, now: EpochMs, limit: int) -> list[str]:
        items = self._db.query(
            TableName=self._jobs,
            IndexName="leases",
            KeyConditionExpression="lease_pk = :p AND lease_expires_at < :now",
            ExpressionAttributeValues={":p": {"S": lease_shard_partition(shard)}, ":now": {"N": str(now)}},
            Limit=limit,
        )["Items"]
        return [job_id_of(item["pk"]["S"]) for item in items]

    # --- tenants --------------------------------------------------------------------------------------------

    def tenant_states(self) -> dict[str, TenantState]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._jobs,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": TENANTS_PK}},
            ConsistentRead=True,
        )
        return tenant_states_from_items(from_item(item) for page in pages for item in page["Items"])

    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        policy = tenant.policy
        item = wire_item(tenant_item(tenant.tenant_id, policy.weight, policy.cap, tenant.ready_shards))
        condition = {"ConditionExpression": "attribute_not_exists(pk)"} if only_if_new else {}
        try:
            self._db.put_item(TableName=self._jobs, Item=item, **condition)
        except ClientError as error:
            if not only_if_new or _error_code(error) != "ConditionalCheckFailedException":
                raise
            return False
        return True


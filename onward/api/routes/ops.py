"""The operator's routes (/ops/...): replay by id, the bulk actions, replayable jobs, tenants' loads, the
pipeline's lag, parked records and projection conflicts. They need the operator role; those that show every
tenant's data (tenants, parked records, conflicts) need an operator bound to no tenant, and the others
(replayable jobs, replay, bulk actions) keep an operator bound to a tenant to that tenant, by the one scoping
rule (onward.api.request.tenant_scope)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.metrics import MetricUnit

from onward.api import cursors
from onward.api.answers import Problem, json_answer, problem_of
from onward.api.auth import Principal
from onward.api.contract.jobs import JobStatus
from onward.api.contract.operators import (
    BulkActionReport,
    BulkCancelRequest,
    BulkReplay,
    BulkReplayed,
    BulkReplayRequest,
    ClaimWindow,
    ConflictRow,
    Conflicts,
    FieldDifference,
    ParkedRecords,
    ParkedRow,
    PipelineLag,
    RelayLag,
    ReplayableJobs,
    ReplayOutcome,
    ShardLagRow,
    TenantJobs,
    TenantLoad,
    Tenants,
)
from onward.api.core import recent_claims, replay_in_scope, view_lag_now
from onward.api.observability import metrics
from onward.api.openapi import BODY_TOO_LARGE, EVERY_TENANT, NOT_JSON, OPERATORS_ONLY, SECURED, ok, problem, secured
from onward.api.request import (
    DEFAULT_LIMIT,
    AskedTenant,
    Limit,
    asked_tenant,
    operator_caller,
    platform_operator,
    replaying_operator,
    tenant_scope,
)
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.errors import JobNotFound, NotReplayable, StoreContention
from onward.domain.freshness import freshness_of, view_lag
from onward.domain.shard_lag import shard_lags
from onward.domain.states import REPLAYABLE_STATES
from onward.operator.bulk import BulkAction, BulkKind, InvalidBulkFilter
from onward.operator.parked import SOURCES, preview
from onward.pipeline.checkpoints import OUTBOX_STREAM, PROJECTOR_CONSUMER, RELAY_CONSUMER
from onward.pipeline.view import JobFilter

BULK_BUDGET_S = 20.0  # a bulk action stops acting after this (the function's timeout is 29 s, API Gateway's 30 s)

router = new_router()


def _bulk_answers(answer: str, forbidden: str) -> dict[int, OpenAPIResponse]:
    """A bulk action's answers (POST /ops/bulk/...): a filter in, a BulkActionReport out."""
    return secured({
        200: ok(answer + "; at most max_jobs jobs a call (`more`: call again), acting for at most 20 s (`stopped`)",
                BulkActionReport),
        400: problem("malformed JSON"), 403: problem(forbidden), 413: BODY_TOO_LARGE, 415: NOT_JSON,
        422: problem("a bad filter (unknown fields, a state the action does not act on, until before since, a time "
                     "without a zone): nothing was done")})


def replayable_scope() -> str | None:
    """The tenant whose replayable jobs are asked for: an operator's ?tenant=, its own for a bound one."""
    return tenant_scope(operator_caller(), asked_tenant())


@router.post("/ops/replay", operation_id="replayJobs", security=SECURED, responses=secured({
    200: ok("each job's answer, as its own replay route gives it (202, 404, 409, 503); an operator bound to a tenant "
            "replays only that tenant's", BulkReplayed),
    400: problem("malformed JSON"), 403: OPERATORS_ONLY, 413: BODY_TOO_LARGE, 415: NOT_JSON,
    422: problem("not 1 to 100 distinct job ids, or unknown fields: nothing was replayed")}))
def replay_jobs(principal: Annotated[Principal, Depends(replaying_operator)], asked: BulkReplay) -> Response[str]:
    """Replay several jobs, each exactly as POST /jobs/{job_id}/replay would, and answer each one's outcome.
    The body is checked whole first: a bad one replays nothing."""
    scope = tenant_scope(principal)
    store = ApiDeployment.from_environment().job_store
    results: list[ReplayOutcome] = []
    for job_id in asked.job_ids:
        try:
            results.append(ReplayOutcome(job_id=job_id, status=202, job=replay_in_scope(store, job_id, scope)))
        except (JobNotFound, NotReplayable, StoreContention) as error:
            refused = problem_of(error)
            results.append(ReplayOutcome(job_id=job_id, status=refused.status, problem=refused.details()))
    replayed = sum(result.status == 202 for result in results)
    metrics.add_metric(name="JobsReplayed", unit=MetricUnit.Count, value=replayed)
    # each problem as its route answers it: without the fields it does not have
    return json_answer(200, BulkReplayed(results=results, replayed=replayed), exclude_none=True)


@router.post("/ops/bulk/replay", operation_id="bulkReplay", security=SECURED, responses=_bulk_answers(
    "the report: with dry_run (the default) the matching dead and quarantined jobs counted, a sample, nothing "
    "changed; else each replayed through the store's replay, what it refused skipped with the reason",
    "not an operator, or an operator bound to another tenant than `tenant`"))
def bulk_replay(principal: Annotated[Principal, Depends(operator_caller)], asked: BulkReplayRequest) -> Response[str]:
    """Replay the dead and quarantined jobs a filter selects (onward.operator.bulk); a dry run (the default) only
    counts them. Every tenant's, or one's (a bound operator: its own)."""
    return _bulk(BulkKind.REPLAY, principal, asked)


@router.post("/ops/bulk/cancel", operation_id="bulkCancel", security=SECURED, responses=_bulk_answers(
    "the report: with dry_run (the default) the tenant's matching waiting and running jobs counted, a sample, "
    "nothing changed; else waiting ones cancelled, running ones asked to stop, those that ended meanwhile skipped "
    "with the reason", "not an operator, or an operator bound to another tenant"))
def bulk_cancel(principal: Annotated[Principal, Depends(operator_caller)], asked: BulkCancelRequest) -> Response[str]:
    """Cancel one tenant's waiting and running jobs that a filter selects (onward.operator.bulk); a dry run (the
    default) only counts them."""
    return _bulk(BulkKind.CANCEL, principal, asked)


def _bulk(kind: BulkKind, principal: Principal, asked: BulkReplayRequest | BulkCancelRequest) -> Response[str]:
    """The bulk routes, their body checked whole (a bad filter acts on nothing: 422): scoped by `tenant_scope`,
    then onward.operator.bulk.BulkAction within BULK_BUDGET_S."""
    try:
        where = asked.bulk_filter(kind, tenant_scope(principal, asked.tenant), asked.states)
    except InvalidBulkFilter as error:
        raise Problem(422, "Invalid request", f"the body does not match the schema: {error.field}: {error}",
                      slug="validation", extra={"errors": [{"loc": [error.field], "msg": str(error),
                                                            "type": "value_error"}]}) from error
    deployment = ApiDeployment.from_environment()
    report = BulkAction(deployment.job_store, deployment.status_view).run(
        where, dry_run=asked.dry_run, max_jobs=asked.max_jobs, budget_s=BULK_BUDGET_S)
    if not report.dry_run:
        metrics.add_metric(name="JobsReplayed" if kind is BulkKind.REPLAY else "JobsCancelled",
                           unit=MetricUnit.Count, value=report.applied)
    return json_answer(200, BulkActionReport.of(report))


@router.get("/ops/replayable", operation_id="replayableJobs", security=SECURED, responses=secured({
    200: ok("dead and quarantined jobs from the status view, newest first, up to `limit` per tenant", ReplayableJobs),
    400: problem("bad limit or tenant"), 403: problem("not an operator, or an operator bound to another tenant")}))
def replayable_jobs(scope: Annotated[str | None, Depends(replayable_scope)], asked: AskedTenant = None,
                    limit: Limit = DEFAULT_LIMIT) -> Response[str]:
    """Dead and quarantined jobs, newest first, up to ?limit= per tenant: every tenant's (an operator bound to no
    tenant, or ?tenant=), or the bound operator's tenant's."""
    deployment = ApiDeployment.from_environment()
    tenants = [scope] if scope is not None else sorted(deployment.job_store.tenant_states())
    where = JobFilter(frozenset(state.value for state in REPLAYABLE_STATES))
    now = system_clock()
    lag = view_lag_now(deployment, now)
    groups: list[TenantJobs] = []
    for tenant in tenants:
        views, start = deployment.status_view.for_tenant(tenant, limit=limit, where=where)
        if views or start:
            groups.append(TenantJobs(
                tenant_id=tenant, jobs=[JobStatus.of_view(view, freshness_of(view.as_of, lag, now),
                                                          deployment.settings.trace_url) for view in views],
                cursor=cursors.encode_cursor(start) if start else None))
    return json_answer(200, ReplayableJobs(tenants=groups, view=lag))


@router.get("/ops/tenants", operation_id="tenantLoads", security=SECURED, responses=secured({
    200: ok("every tenant's weight, cap, running and waiting jobs, and its claims minute by minute over the last 5 "
            "minutes", Tenants),
    403: EVERY_TENANT}))
def tenant_loads(_: Annotated[Principal, Depends(platform_operator)]) -> Response[str]:
    """Every tenant's weight, cap, running and waiting jobs (its counters in the job table, read together as a
    claim reads them) and its claims over the last window, minute by minute (onward.api.core.recent_claims)."""
    deployment = ApiDeployment.from_environment()
    states = deployment.job_store.tenant_states()
    claims = recent_claims(deployment, system_clock())
    total = sum(claims.total(tenant) for tenant in states)
    rows = [TenantLoad(tenant_id=tenant, weight=state.tenant.policy.weight, cap=state.tenant.policy.cap,
                       running=state.usage.running, waiting=state.load().waiting,
                       claims=claims.by_tenant.get(tenant, [0] * claims.buckets),
                       claim_share=round(claims.total(tenant) / total, 4) if total else None)
            for tenant, state in sorted(states.items())]
    window = ClaimWindow(since=iso(claims.since_ms), until=iso(claims.until_ms), bucket_s=claims.bucket_ms // 1000,
                         examined=claims.examined, complete=claims.complete)
    return json_answer(200, Tenants(tenants=rows, window=window))


@router.get("/ops/lag", operation_id="pipelineLag", security=SECURED, responses=secured({
    200: ok("the status view's lag per events-stream shard, and the relay's", PipelineLag), 403: OPERATORS_ONLY}))
def pipeline_lag(_: Annotated[Principal, Depends(operator_caller)]) -> Response[str]:
    """The view's lag per events-stream shard (the projector's watermarks over the open shards) and the
    relay's watermark over the outbox stream. No tenant's data: any operator."""
    deployment = ApiDeployment.from_environment()
    now = system_clock()
    stale_after_s = deployment.settings.stale_after_s
    watermarks = deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER)
    shards = deployment.events_shards.open_shards()
    rows = [ShardLagRow(shard_id=row.shard_id, parents=list(row.parents), bounded_by=row.bounded_by.value,
                        confirmed_through=None if row.confirmed_through is None else iso(row.confirmed_through),
                        lag_s=row.lag_s, stale=row.stale, processed_at=row.processed_at, slots=row.slots)
            for row in shard_lags(watermarks, shards, now, stale_after_s)]
    relay_mark = deployment.checkpoint_store.watermark(RELAY_CONSUMER, OUTBOX_STREAM)
    relay = None if relay_mark is None else RelayLag(
        confirmed_through=relay_mark.newest_event_at, processed_at=relay_mark.processed_at,
        lag_s=None if relay_mark.newest_event_at is None
        else round(max(0.0, (now - epoch_ms(relay_mark.newest_event_at)) / 1000), 3))
    lag = view_lag(watermarks, now, stale_after_s, shards=shards, replication=deployment.replication_status.current())
    return json_answer(200, PipelineLag(view=lag, shards=rows, relay=relay))


@router.get("/ops/parked", operation_id="parkedRecords", security=SECURED, responses=secured({
    200: ok("stream records the relay or the projector could not read or kept failing on, with why",
            ParkedRecords),
    400: problem("bad source or limit"), 403: EVERY_TENANT}))
def parked_records(_: Annotated[Principal, Depends(platform_operator)],
                   source: Annotated[Literal["projector", "relay"] | None, Query(
                       description="only this reader's records")] = None,
                   limit: Limit = DEFAULT_LIMIT) -> Response[str]:
    """Records the relay and the projector could not read or kept failing on (?source= one of them), with their
    reasons, their jobs and whether `onward redrive` replayed them."""
    deployment = ApiDeployment.from_environment()
    reader = deployment.parked_reader
    rows: list[ParkedRow] = []
    more = False
    for name in SOURCES if source is None else tuple(name for name in SOURCES if name == source):
        records, more_here = reader.page(name, limit)
        more = more or more_here
        rows += [ParkedRow(source=name, shard_id=record.shard_id, sequence_number=record.sequence_number,
                           reason=record.reason, parked_at=record.parked_at, raw_size=record.raw_size,
                           raw_truncated=record.raw_truncated, preview=preview(record.raw),
                           job_id=record.job_id, failures=record.failures, redriven_at=record.redriven_at)
                 for record in records]
    rows.sort(key=lambda row: row.parked_at, reverse=True)
    return json_answer(200, ParkedRecords(records=rows, more=more))


@router.get("/ops/conflicts", operation_id="projectionConflicts", security=SECURED, responses=secured({
    200: ok("same-version events the projector kept apart, with the fields that differ", Conflicts),
    400: problem("bad limit"), 403: EVERY_TENANT}))
def projection_conflicts(_: Annotated[Principal, Depends(platform_operator)],
                         limit: Limit = DEFAULT_LIMIT) -> Response[str]:
    """Same-version events the projector kept apart, each with the fields that disagree."""
    deployment = ApiDeployment.from_environment()
    kept, more = deployment.conflict_reader.newest(limit)
    rows = [ConflictRow(job_id=conflict.job_id, tenant_id=conflict.tenant_id, version=conflict.version,
                        detected_at=conflict.detected_at, reason=conflict.reason,
                        differences=[FieldDifference(field=d.field, in_view=d.in_view, incoming=d.incoming)
                                     for d in conflict.differences])
            for conflict in kept]
    return json_answer(200, Conflicts(conflicts=rows, more=more))

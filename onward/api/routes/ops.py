"""The operator's routes (/ops/...): replay by id, the bulk actions, replayable jobs, tenants' loads, the
pipeline's lag, parked records and projection conflicts. They need the operator role; those that show every
tenant's data (tenants, parked records, conflicts) need an operator bound to no tenant, and the others
(replayable jobs, replay, bulk actions) keep an operator bound to a tenant to that tenant, by the one scoping
rule (onward.api.request.tenant_scope)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from onward.api import cursors
from onward.api.answers import Problem, json_answer, problem_of
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
from onward.api.request import (
    asked_tenant,
    caller,
    invalid_body,
    json_body,
    operator_caller,
    page_limit,
    platform_operator,
    query_parameters,
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


@router.post("/ops/replay")
def replay_jobs() -> Response[str]:
    """Replay several jobs, each exactly as POST /jobs/{job_id}/replay would, and answer each one's outcome.
    The body is checked whole first: a bad one replays nothing."""
    principal = caller()
    if not principal.operator:
        raise Problem(403, "Forbidden", "replay is for operators")
    payload = json_body()
    try:
        asked = BulkReplay.model_validate(payload)
    except ValidationError as error:
        raise invalid_body(error) from error
    scope = tenant_scope(principal)
    store = ApiDeployment.from_environment().job_store
    results: list[ReplayOutcome] = []
    for job_id in asked.job_ids:
        try:
            results.append(ReplayOutcome(job_id=job_id, status=202, job=replay_in_scope(store, job_id, scope)))
        except (JobNotFound, NotReplayable, StoreContention) as error:
            problem = problem_of(error)
            results.append(ReplayOutcome(job_id=job_id, status=problem.status, problem=problem.details()))
    replayed = sum(result.status == 202 for result in results)
    metrics.add_metric(name="JobsReplayed", unit=MetricUnit.Count, value=replayed)
    # each problem as its route answers it: without the fields it does not have
    return json_answer(200, BulkReplayed(results=results, replayed=replayed), exclude_none=True)


@router.post("/ops/bulk/replay")
def bulk_replay() -> Response[str]:
    """Replay the dead and quarantined jobs a filter selects (onward.operator.bulk); a dry run (the default) only
    counts them. Every tenant's, or one's (a bound operator: its own)."""
    return _bulk(BulkKind.REPLAY, BulkReplayRequest)


@router.post("/ops/bulk/cancel")
def bulk_cancel() -> Response[str]:
    """Cancel one tenant's waiting and running jobs that a filter selects (onward.operator.bulk); a dry run (the
    default) only counts them."""
    return _bulk(BulkKind.CANCEL, BulkCancelRequest)


def _bulk(kind: BulkKind, model: type[BulkReplayRequest | BulkCancelRequest]) -> Response[str]:
    """The bulk routes: the body checked whole (a bad filter acts on nothing: 422), scoped by `tenant_scope`,
    then onward.operator.bulk.BulkAction within BULK_BUDGET_S."""
    principal = operator_caller()
    try:
        asked = model.model_validate(json_body())
    except ValidationError as error:
        raise invalid_body(error) from error
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


@router.get("/ops/replayable")
def replayable_jobs() -> Response[str]:
    """Dead and quarantined jobs, newest first, up to ?limit= per tenant: every tenant's (an operator bound to no
    tenant, or ?tenant=), or the bound operator's tenant's."""
    principal = operator_caller()
    query = query_parameters()
    scope = tenant_scope(principal, asked_tenant(query))
    limit = page_limit(query)
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
                tenant_id=tenant, jobs=[JobStatus.of_view(view, freshness_of(view.as_of, lag, now)) for view in views],
                cursor=cursors.encode_cursor(start) if start else None))
    return json_answer(200, ReplayableJobs(tenants=groups, view=lag))


@router.get("/ops/tenants")
def tenant_loads() -> Response[str]:
    """Every tenant's weight, cap, running and waiting jobs (its counters in the job table, read together as a
    claim reads them) and its claims over the last window, minute by minute (onward.api.core.recent_claims)."""
    platform_operator()
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


@router.get("/ops/lag")
def pipeline_lag() -> Response[str]:
    """The view's lag per events-stream shard (the projector's watermarks over the open shards) and the
    relay's watermark over the outbox stream. No tenant's data: any operator."""
    operator_caller()
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
    lag = view_lag(watermarks, now, stale_after_s, shards=shards)
    return json_answer(200, PipelineLag(view=lag, shards=rows, relay=relay))


@router.get("/ops/parked")
def parked_records() -> Response[str]:
    """Records the relay and the projector could not read (?source= one of them), with their reasons."""
    platform_operator()
    query = query_parameters()
    source = query.get("source")
    if source is not None and source not in SOURCES:
        raise Problem(400, "Bad request", f"source is one of {', '.join(SOURCES)}")
    limit = page_limit(query)
    deployment = ApiDeployment.from_environment()
    reader = deployment.parked_reader
    rows: list[ParkedRow] = []
    more = False
    for name in SOURCES if source is None else tuple(name for name in SOURCES if name == source):
        records, more_here = reader.page(name, limit)
        more = more or more_here
        rows += [ParkedRow(source=name, shard_id=record.shard_id, sequence_number=record.sequence_number,
                           reason=record.reason, parked_at=record.parked_at, raw_size=record.raw_size,
                           raw_truncated=record.raw_truncated, preview=preview(record.raw)) for record in records]
    rows.sort(key=lambda row: row.parked_at, reverse=True)
    return json_answer(200, ParkedRecords(records=rows, more=more))


@router.get("/ops/conflicts")
def projection_conflicts() -> Response[str]:
    """Same-version events the projector kept apart, each with the fields that disagree."""
    platform_operator()
    limit = page_limit(query_parameters())
    deployment = ApiDeployment.from_environment()
    kept, more = deployment.conflict_reader.newest(limit)
    rows = [ConflictRow(job_id=conflict.job_id, tenant_id=conflict.tenant_id, version=conflict.version,
                        detected_at=conflict.detected_at, reason=conflict.reason,
                        differences=[FieldDifference(field=d.field, in_view=d.in_view, incoming=d.incoming)
                                     for d in conflict.differences])
            for conflict in kept]
    return json_answer(200, Conflicts(conflicts=rows, more=more))

"""The job routes (/jobs...): create one or a batch, list and count a tenant's, read one (its status, runs,
parameters, why it waits), cancel and replay it. The tenant ALWAYS comes from the credential; another tenant's
job is answered exactly like a missing one."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Header, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponseHeader
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from onward.api import conditional, cursors
from onward.api.answers import NO_STORE, Problem, json_answer, problem_of
from onward.api.auth import Principal
from onward.api.contract.common import StateName
from onward.api.contract.job_types import PolicyInForce
from onward.api.contract.jobs import (
    Accepted,
    ArchivedJobStatus,
    ArchivedRuns,
    BatchCreate,
    BatchCreated,
    BatchJob,
    BatchOutcome,
    CancelAccepted,
    JobExplanation,
    JobPage,
    JobParams,
    JobStatus,
    PendingJob,
    RunRecord,
    Runs,
    StatusCounts,
)
from onward.api.core import recent_claims, refuse_unknown_job_type, replay_in_scope, view_lag_now
from onward.api.observability import metrics
from onward.api.openapi import BODY_TOO_LARGE, NOT_FOUND, NOT_JSON, SECURED, ok, problem, secured
from onward.api.request import (
    DEFAULT_LIMIT,
    AskedTenant,
    Cursor,
    Limit,
    asked_tenant,
    caller,
    cursor_start,
    invalid_body,
    replaying_operator,
    tenant_scope,
)
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment, Deployment
from onward.domain.archive import ArchivedJob
from onward.domain.clock import EpochMs, iso, system_clock
from onward.domain.errors import JobNotFound, OnwardError
from onward.domain.freshness import freshness_of
from onward.domain.models import JobId, JobType, NewJob
from onward.domain.states import JobState
from onward.domain.tags import TAG_FILTER, parse_filter
from onward.domain.text_patterns import IDEMPOTENCY_KEY, JOB_ID_PREFIX
from onward.observability.metrics import record_created
from onward.observability.tracing import batch_creation_span, creation_span
from onward.operator import explain
from onward.operator.history.readers import ArchiveQueryError
from onward.pipeline.view import JobFilter, listing_start
from onward.store.ports import JobRow
from onward.store.service import CancelStatus, Created

router = new_router()

OfType = Annotated[JobType | None, Query(alias="type", description="only jobs of this type")]
OTHER_TENANT = problem("a tenant's credential named another tenant")
CREATES_FOR_NO_TENANT = problem("the credential names no tenant (an operator token)")
# tags (issue 38): one tag per listing or count (a repeated ?tag= arrives comma-joined and fails the pattern)
TagFilter = Annotated[str | None, Query(
    pattern=TAG_FILTER.anchored, max_length=97,
    description="only jobs carrying this tag, key:value (one per request); combines with the other filters")]


def creating_tenant() -> str:
    """The tenant the caller creates jobs for (403 for a credential that names none: an operator's)."""
    principal = caller()
    if principal.tenant_id is None:
        raise Problem(403, "Forbidden", "this credential names no tenant to create jobs for")
    return principal.tenant_id


def batch_tenant() -> str:
    """The tenant of a batch, which takes its keys in its entries: 400 for an Idempotency-Key header (which
    would not say which job it keys), before the body is read."""
    tenant_id = creating_tenant()
    if "idempotency-key" in (router.current_event.headers or {}):
        raise Problem(400, "Bad request", "a batch takes an idempotency_key in each entry, not an Idempotency-Key "
                      "header (which would not say which job it keys)")
    return tenant_id


def listed_tenant() -> str:
    """The one tenant a listing or a count is of (an operator bound to no tenant names it)."""
    tenant = tenant_scope(caller(), asked_tenant())
    if tenant is None:
        raise Problem(400, "Bad request", "an operator lists one tenant's jobs: pass ?tenant=")
    return tenant


# Powertools evaluates a route's annotations as it serves each request: this one is built once, at import.
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", description="a retry with the same key and body returns the first answer",
    json_schema_extra=IDEMPOTENCY_KEY.schema())]
# trace context (issue 38): W3C Trace Context headers; an invalid one is ignored, never refused
TraceParent = Annotated[str | None, Header(
    alias="traceparent", title="traceparent",
    description="W3C Trace Context (version-format-trace-id-parent-id-flags): the job's create span and its "
    "attempts' spans continue this trace, and GET /jobs/{job_id} shows its trace id as `trace_id`; an invalid one "
    "is ignored (the job is created without it)")]
BatchTraceParent = Annotated[str | None, Header(
    alias="traceparent", title="traceparent",
    description="W3C Trace Context, as on POST /jobs, for the whole batch: every job it creates continues this "
    "trace (its attempts' spans are children of the batch's create span) and shows its trace id as `trace_id`; "
    "an invalid one is ignored")]
TraceState = Annotated[str | None, Header(
    alias="tracestate", title="tracestate",
    description="W3C Trace Context vendor data, kept with a valid traceparent (an invalid one is dropped)")]


@router.post("/jobs", operation_id="createJob", security=SECURED, responses=secured({
    200: ok("an earlier request with this Idempotency-Key created the job, or the job holding `unique.key` "
            "(`duplicate_of_unique: true`); nothing new", Accepted),
    202: ok("the job is queued", Accepted),
    400: problem("malformed JSON (NaN and Infinity included, or nested too deeply) or an invalid Idempotency-Key"),
    403: CREATES_FOR_NO_TENANT,
    409: problem("the Idempotency-Key was used for a different request, or `unique.key` is held (on_conflict "
                 "reject, or replace of a running holder: `existing_job_id` names the holder), or "
                 "`concurrency.key` has `limit` running (on_overflow cancel_newest: concurrency-limit-reached)"),
    413: problem("the body is over 256 KiB, or params over 300,000 bytes as JSON"),
    415: NOT_JSON,
    422: problem("unknown fields, wrong types, params DynamoDB cannot store, or an unknown job type; `errors` lists "
                 "each place and why (tags: more than 10, or a key or value outside its rules)")}))
def create_job(tenant_id: Annotated[str, Depends(creating_tenant)], job: NewJob,
               idempotency_key: IdempotencyKey = None, traceparent: TraceParent = None,
               tracestate: TraceState = None) -> Response[str]:
    deployment = ApiDeployment.from_environment()
    refuse_unknown_job_type(deployment, job.type)
    # Checked here, after the body and its job type, as it always was (its pattern is documented, not validated
    # by the resolver, which would check it before the body).
    if idempotency_key is not None and not IDEMPOTENCY_KEY.matches(idempotency_key):
        raise Problem(400, "Bad request", "an Idempotency-Key is 1 to 128 printable ASCII characters")
    with creation_span(tenant_id, job.type, traceparent, tracestate) as trace:  # trace context (issue 38)
        traced = job.model_copy(update={"trace_parent": trace.trace_parent, "trace_state": trace.trace_state})
        created = deployment.job_store.create(tenant_id, traced, idempotency_key=idempotency_key)
        trace.created(created.job, created.created)
    record_created(tenant_id, job.type, int(created.created))
    metrics.add_metric(name="JobsCreated" if created.created else "JobsCreateRepeated", unit=MetricUnit.Count, value=1)
    return json_answer(202 if created.created else 200,
                       Accepted(job_id=created.job.job_id, status=created.job.state, version=created.job.version,
                                **unique_answer(created)),
                       headers={"Location": f"/jobs/{created.job.job_id}"}, exclude_none=True)


@router.post("/jobs/batch", operation_id="createJobs", security=SECURED, responses=secured({
    200: ok("each entry's answer in the order sent, as POST /jobs would give it: 202 created, 200 found by its "
            "idempotency_key or holding its unique.key, or its problem (409 key used for another job or unique.key "
            "held, 413 params too large, 422 invalid or of "
            "an unknown type with `errors` placed under [\"jobs\", index], 503 contended); a refused entry refuses "
            "only itself", BatchCreated),
    400: problem("malformed JSON, or an Idempotency-Key header (each entry takes its own idempotency_key)"),
    403: CREATES_FOR_NO_TENANT, 413: BODY_TOO_LARGE, 415: NOT_JSON,
    422: problem("not an object whose `jobs` is a list of 1 to 100 objects: nothing was created")}))
def create_jobs(tenant_id: Annotated[str, Depends(batch_tenant)], asked: BatchCreate,
                traceparent: BatchTraceParent = None, tracestate: TraceState = None) -> Response[str]:
    """Create up to 100 jobs, each as POST /jobs would (with its own idempotency_key), and answer each entry's
    outcome in order: a refused entry refuses only itself. A body that is not 1 to 100 objects creates nothing."""
    # trace context (issue 38): every job of the batch continues the request's trace
    with batch_creation_span(tenant_id, len(asked.jobs), traceparent, tracestate) as trace:
        results = _create_batch(ApiDeployment.from_environment(), tenant_id, asked.jobs,
                                (trace.trace_parent, trace.trace_state))
        created = sum(result.status == 202 for result in results)
        trace.created(created)
    metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=created)
    metrics.add_metric(name="JobsCreateRepeated", unit=MetricUnit.Count,
                       value=sum(result.status == 200 for result in results))
    # each problem as POST /jobs answers it: without the fields it does not have
    return json_answer(200, BatchCreated(results=results, created=created), exclude_none=True)


def _batch_entry(deployment: Deployment, payload: Any, index: int) -> BatchJob:
    """A batch's entry as a job of one of the deployment's types: else a 422 naming each place that does not
    match (under ["jobs", index]), or the unknown type, as POST /jobs answers its body."""
    try:
        entry = BatchJob.model_validate(payload)
    except ValidationError as error:
        raise invalid_body(error, ("jobs", index)) from error
    refuse_unknown_job_type(deployment, entry.type)
    return entry


def _create_batch(deployment: Deployment, tenant_id: str, entries: list[dict[str, Any]],
                  trace: tuple[str | None, str | None] = (None, None)) -> list[BatchOutcome]:
    """Each entry's outcome, in order: an entry that is not a job of a known type is refused here, as POST /jobs
    refuses it (it never reaches the store); the others are created together (JobStore.create_batch)."""
    checked: list[BatchJob | Problem] = []
    for index, entry in enumerate(entries):
        try:
            checked.append(_batch_entry(deployment, entry, index))
        except Problem as refused:
            checked.append(refused)
    jobs = [(_traced(entry.new_job(), trace), entry.idempotency_key) for entry in checked
            if isinstance(entry, BatchJob)]
    answers = iter(deployment.job_store.create_batch(tenant_id, jobs) if jobs else [])
    outcomes: list[BatchOutcome] = []
    created_by_type: dict[str, int] = {}
    for checked_entry in checked:
        answer = next(answers) if isinstance(checked_entry, BatchJob) else checked_entry
        if isinstance(checked_entry, BatchJob) and isinstance(answer, Created) and answer.created:
            created_by_type[checked_entry.type] = created_by_type.get(checked_entry.type, 0) + 1
        outcomes.append(_batch_outcome(answer))
    for job_type, count in created_by_type.items():  # onward.jobs.created, as POST /jobs records it
        record_created(tenant_id, job_type, count)
    return outcomes


def _traced(job: NewJob, trace: tuple[str | None, str | None]) -> NewJob:
    """The job carrying the batch's trace context (trace_parent, trace_state), when it has one."""
    if trace[0] is None:
        return job
    return job.model_copy(update={"trace_parent": trace[0], "trace_state": trace[1]})


def unique_answer(created: Created) -> dict[str, Any]:
    """What an answer says about the create's unique key (issue 37): only what happened to it, else nothing."""
    return {"duplicate_of_unique": True if created.duplicate_of_unique else None,
            "replaced_job_id": created.replaced}


def _batch_outcome(answer: Created | OnwardError | Problem) -> BatchOutcome:
    """One entry's answer: its job (202 created, 200 found by its key), or its refusal as POST /jobs answers it."""
    if isinstance(answer, Created):
        return BatchOutcome(status=202 if answer.created else 200, job_id=answer.job.job_id,
                            **unique_answer(answer))
    refused = answer if isinstance(answer, Problem) else problem_of(answer)
    return BatchOutcome(status=refused.status, problem=refused.details())


@router.get("/jobs", operation_id="listJobs", security=SECURED, responses=secured({
    200: ok("the tenant's jobs from the status view, newest first; a filtered page can be short or empty with a "
            "`cursor` to search further", JobPage),
    400: problem("bad limit, status, type, id_prefix, tag, tenant or cursor, or an operator without ?tenant="),
    403: OTHER_TENANT}))
def list_jobs(tenant: Annotated[str, Depends(listed_tenant)], asked: AskedTenant = None,
              status: Annotated[list[StateName] | None, Query(
                  min_length=1, description="only jobs in one of these statuses (a comma list)")] = None,
              job_type: OfType = None,
              id_prefix: Annotated[str | None, Query(
                  pattern=JOB_ID_PREFIX.anchored, description="only jobs whose id starts with this")] = None,
              limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None, tag: TagFilter = None) -> Response[str]:
    where = JobFilter(frozenset(state.value for state in status or ()), job_type, id_prefix)
    start = cursor_start(cursor, lambda position: listing_start(position, tenant)) if cursor else None
    deployment = ApiDeployment.from_environment()
    views, start = deployment.status_view.for_tenant(tenant, limit=limit, where=where, start=start,
                                                     tag=None if tag is None else parse_filter(tag))
    now = system_clock()
    lag = view_lag_now(deployment, now)
    jobs = [JobStatus.of_view(view, freshness_of(view.as_of, lag, now), deployment.settings.trace_url)
            for view in views]
    return json_answer(200, JobPage(jobs=jobs, cursor=cursors.encode_cursor(start) if start else None, view=lag))


@router.get("/jobs/counts", operation_id="countJobs", security=SECURED, responses=secured({
    200: ok("the tenant's jobs per status in the status view (its index), over its newest 10,000", StatusCounts),
    400: problem("bad type, tag or tenant, or an operator without ?tenant="),
    403: OTHER_TENANT}))
def count_jobs(tenant: Annotated[str, Depends(listed_tenant)], asked: AskedTenant = None,
               job_type: OfType = None, tag: TagFilter = None) -> Response[str]:
    """A tenant's jobs per status in the view (of ?type= only, carrying ?tag= only, if given), over its newest
    MAX_COUNTED."""
    deployment = ApiDeployment.from_environment()
    counted = deployment.status_view.count_by_status(tenant, job_type=job_type,
                                                     tag=None if tag is None else parse_filter(tag))
    counts = {state: counted.counts.get(state.value, 0) for state in JobState}
    return json_answer(200, StatusCounts(counts=counts, examined=counted.examined, complete=counted.complete,
                                         view=view_lag_now(deployment, system_clock())))


JOB_STATUS = JobStatus | PendingJob | ArchivedJobStatus
ETAG_HEADER: dict[str, OpenAPIResponseHeader] = {"ETag": {
    "description": 'weak; names the view row\'s version and content (`W/"v<version>-<hash>"`), an archived job\'s '
                   'version (`W/"archived-v<version>"`), or a job the view has not shown yet (`W/"pending"`): send '
                   'it as If-None-Match to be answered 304 while it holds',
    "schema": {"type": "string"}}}
IfNoneMatch = Annotated[str | None, Header(
    alias="If-None-Match", description="the ETag of an earlier answer: 304 with no body while the status is unchanged")]
# An archive on Athena is asked within API Gateway's 29 s, less the table reads before it.
ARCHIVE_WAIT_S = 20.0


def _archived(deployment: Deployment, job_id: str, scope: str | None) -> ArchivedJob:
    """A job neither the view nor the job table has (their rows expired), from the run-history archive when one
    is configured: its newest archived version, only if it is the caller's tenant's; else JobNotFound, the 404
    of a job that never was. 503 when the archive cannot answer."""
    reader = deployment.archive_reader(max_wait_s=ARCHIVE_WAIT_S)
    if reader is None:
        raise JobNotFound(job_id)
    try:
        found = reader.job(job_id, scope)
    except ArchiveQueryError as error:
        raise Problem(503, "Archive unavailable", f"the run-history archive could not be read: {error}") from None
    if found is None:
        raise JobNotFound(job_id)
    return found


@router.get("/jobs/<job_id>", operation_id="getJob", security=SECURED, responses=secured({
    200: {**ok("the job's status from the status view with its freshness (`visible: true`), or, while the view has "
               "not seen the job yet, no status and the view's lag (`visible: false`): never an older status than one "
               "answered before; a job whose rows have expired is answered from the run-history archive "
               "(`archived: true`, with its runs)", JOB_STATUS), "headers": ETAG_HEADER},
    304: {"description": "If-None-Match holds the current ETag: nothing newer was projected, no body (the "
                         "freshness block of the earlier answer has aged since)", "headers": ETAG_HEADER},
    404: NOT_FOUND}))
def get_job(principal: Annotated[Principal, Depends(caller)], job_id: JobId,
            if_none_match: IfNoneMatch = None) -> Response[str]:
    scope = tenant_scope(principal)
    deployment = ApiDeployment.from_environment()
    # Read consistently (never older than an answer before), and only if it is the caller's: another tenant's
    # job goes the way of a missing one, to the job table's scoped read and its 404, by the same requests.
    view = deployment.status_view.get(job_id, scope)
    if view is not None:
        tag = conditional.view_tag(view)
        if conditional.none_match(if_none_match, tag):
            return not_modified(tag)  # before the lag's read: an unchanged status costs one view read
        now = system_clock()
        freshness = freshness_of(view.as_of, view_lag_now(deployment, now), now)
        return json_answer(200, JobStatus.of_view(view, freshness, deployment.settings.trace_url),
                           headers={"ETag": tag})
    # Not in the view yet: the job row only says whether the job exists (JobNotFound: a 404), never its
    # status, which the view may show older a moment later. In neither: perhaps archived (its rows expired).
    try:
        deployment.job_store.get(job_id, scope)
    except JobNotFound:
        archived = _archived(deployment, job_id, scope)
        tag = conditional.archived_tag(archived.version)
        if conditional.none_match(if_none_match, tag):
            return not_modified(tag)
        return json_answer(200, ArchivedJobStatus.of(archived), headers={"ETag": tag})
    if conditional.none_match(if_none_match, conditional.PENDING_TAG):
        return not_modified(conditional.PENDING_TAG)
    return json_answer(200, PendingJob(job_id=job_id, view=view_lag_now(deployment, system_clock())),
                       headers={"ETag": conditional.PENDING_TAG})


def not_modified(tag: str) -> Response[str]:
    """304: the caller's tag is current; no body, the headers a 200 would carry (RFC 9110, section 15.4.5)."""
    return Response(304, None, None, headers={**NO_STORE, "ETag": tag})


@router.get("/jobs/<job_id>/runs", operation_id="getJobRuns", security=SECURED, responses=secured({
    200: ok("one record per attempt, from the authoritative table; for a job whose rows have expired, from the "
            "run-history archive (`archived: true`)", Runs | ArchivedRuns), 404: NOT_FOUND}))
def job_runs(principal: Annotated[Principal, Depends(caller)], job_id: JobId) -> Response[str]:
    deployment = ApiDeployment.from_environment()
    scope = tenant_scope(principal)
    try:
        runs = deployment.job_store.runs(job_id, scope)
    except JobNotFound:
        archived = _archived(deployment, job_id, scope)
        return json_answer(200, ArchivedRuns(job_id=job_id, runs=ArchivedJobStatus.of(archived).runs))
    return json_answer(200, Runs(job_id=job_id, runs=[RunRecord.of(run) for run in runs]))


@router.get("/jobs/<job_id>/params", operation_id="getJobParams", security=SECURED, responses=secured({
    200: ok("what the job was created with (the job table; it never changes)", JobParams), 404: NOT_FOUND}))
def job_params(principal: Annotated[Principal, Depends(caller)], job_id: JobId) -> Response[str]:
    """What the job was created with, from the job table (it never changes, so no view is needed)."""
    job = ApiDeployment.from_environment().job_store.get(job_id, tenant_scope(principal))
    return json_answer(200, JobParams.of(job))


@router.get("/jobs/<job_id>/explain", operation_id="explainJob", security=SECURED, responses=secured({
    200: ok("why the job is not running and until when: scheduled, backoff, tenant_at_cap, no_worker or "
            "waiting_for_share with an ETA from its tenant's recent claims, rate_limited until its token's moment; "
            "paused (its tenant or type paused, or the platform drained); concurrency_limited (held until an "
            "attempt of its concurrency key ends); `running` or `finished` for a job that "
            "is not waiting (200 too: nothing is wrong with asking)", JobExplanation),
    404: NOT_FOUND}))
def explain_job(principal: Annotated[Principal, Depends(caller)], job_id: JobId) -> Response[str]:
    """Why the job is not running and until when (onward.operator.explain), decided now from the job table, its
    tenant's dispatch counters and the window's claims; with a status's freshness block. Scoped as GET
    /jobs/{job_id}."""
    deployment = ApiDeployment.from_environment()
    scope = tenant_scope(principal)
    row = deployment.job_store.row(job_id, scope)
    now = system_clock()
    waiting = _waiting(deployment, row, now, platform=scope is None) if explain.waits(row.job) else None
    freshness = freshness_of(iso(row.job.updated_at), view_lag_now(deployment, now), now)
    explained = JobExplanation.of(row.job, explain.explain(row.job, now, waiting), now, freshness)
    in_force = PolicyInForce.of(row.job, deployment.job_store.type_catalog.declared(row.job.type))  # issue 37
    return json_answer(200, explained.model_copy(update={"retry_policy": in_force}))


def _waiting(deployment: Deployment, row: JobRow, now: EpochMs, *, platform: bool) -> explain.Waiting:
    """What a waiting job's explanation is decided from (explain.waiting_of), with the recent claims: its
    tenant's only, or with `platform` (an operator bound to no tenant, who may see every tenant's) every
    tenant's."""
    claims = recent_claims(deployment, now, tenant_id=None if platform else row.job.tenant_id)
    waiting = explain.waiting_of(deployment.store_reads, row, claims, now, platform=platform)
    return replace(waiting, paused_by=explain.paused_by(deployment.job_store.flow.current(), row.job),  # issue 37
                   concurrency_limited_by=deployment.job_store.concurrency.limited_by(row))  # concurrency keys


@router.post("/jobs/<job_id>/cancel", operation_id="cancelJob", security=SECURED, responses=secured({
    202: ok("cancelled, or cancel requested (a running job stops at its next heartbeat)", CancelAccepted),
    404: NOT_FOUND, 409: problem("already completed")}))
def cancel_job(principal: Annotated[Principal, Depends(caller)], job_id: JobId) -> Response[str]:
    outcome = ApiDeployment.from_environment().job_store.cancel(job_id, tenant_scope(principal))
    if outcome.status is CancelStatus.ALREADY_ENDED:
        raise Problem(409, "Already completed", f"job {job_id} already ended as {outcome.job.state.value}",
                      slug="already-completed", extra={"job_status": outcome.job.state.value})
    status: Literal["cancelled", "cancel_requested"] = (
        "cancelled" if outcome.status is CancelStatus.CANCELLED else "cancel_requested")
    return json_answer(202, CancelAccepted(job_id=job_id, status=status, version=outcome.job.version))


@router.post("/jobs/<job_id>/replay", operation_id="replayJob", security=SECURED, responses=secured({
    202: ok("queued again as a new version", Accepted), 403: problem("operators only"), 404: NOT_FOUND,
    409: problem("only dead or quarantined jobs replay")}))
def replay_job(principal: Annotated[Principal, Depends(replaying_operator)], job_id: JobId) -> Response[str]:
    store = ApiDeployment.from_environment().job_store
    return json_answer(202, replay_in_scope(store, job_id, tenant_scope(principal)))

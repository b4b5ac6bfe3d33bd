"""Lambda entry point for the HTTP API (API Gateway HTTP API, payload 2.0); the local gateway
(infra/onward_infra/gateway.py) invokes the same `handler` with the same event shape.

Thin: authenticate, parse the request at the edge (pydantic, extra fields refused), call the core
(JobStore, StatusViewReader, CheckpointStore, onward.domain.freshness), shape the response. The authenticator, the
known job types and the core are the environment's ApiDeployment's (onward/bootstrap.py: clients with
short timeouts and 3 attempts, to answer within API Gateway's 29 s), built once. Errors
are application/problem+json. The tenant ALWAYS comes from the credential. Another tenant's job is answered
exactly like a missing one. Tokens are never logged (the event is not logged at all).

The operator's routes (/ops/...) need the operator role; those that show every tenant's data (tenants, parked
records, conflicts) need an operator bound to no tenant, and the others (replayable jobs, bulk replay) keep an
operator bound to a tenant to that tenant, by the one scoping rule (`_tenant_scope`).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from onward.api import cursors
from onward.api.auth import NoTenant, Principal
from onward.api.contract import (
    Accepted,
    BatchCreate,
    BatchCreated,
    BatchJob,
    BatchOutcome,
    BulkActionReport,
    BulkCancelRequest,
    BulkReplay,
    BulkReplayed,
    BulkReplayRequest,
    Caller,
    CancelAccepted,
    ClaimWindow,
    ConflictRow,
    Conflicts,
    FieldDifference,
    Health,
    JobExplanation,
    JobPage,
    JobParams,
    JobStatus,
    ParkedRecords,
    ParkedRow,
    PendingJob,
    PipelineLag,
    ProblemDetails,
    RelayLag,
    ReplayableJobs,
    ReplayOutcome,
    RunRecord,
    Runs,
    ScheduleInfo,
    Schedules,
    ShardLagRow,
    StatusCounts,
    TenantJobs,
    TenantLoad,
    Tenants,
)
from onward.api.page import PAGE_HEADERS, web_files
from onward.api.routing import WholePathResolver
from onward.bootstrap import ApiDeployment, Deployment
from onward.domain.clock import EpochMs, epoch_ms, iso, system_clock
from onward.domain.documents import parse_json_float
from onward.domain.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    OnwardError,
    PayloadTooLarge,
    StoreContention,
)
from onward.domain.freshness import freshness_of, view_lag
from onward.domain.models import NewJob, ViewLag
from onward.domain.schedules import NewSchedule, Schedule
from onward.domain.shard_lag import shard_lags
from onward.domain.states import REPLAYABLE_STATES, JobState
from onward.domain.text_patterns import IDEMPOTENCY_KEY, JOB_ID, JOB_ID_PREFIX, JOB_TYPE, SCHEDULE_NAME, TENANT_ID
from onward.operator import explain
from onward.operator.bulk import BulkAction, BulkKind, InvalidBulkFilter
from onward.operator.claim_history import RecentClaims
from onward.operator.conflicts import ConflictReader
from onward.operator.parked import SOURCES, ParkedRecordReader, preview
from onward.pipeline.checkpoints import OUTBOX_STREAM, PROJECTOR_CONSUMER, RELAY_CONSUMER
from onward.pipeline.view import JobFilter
from onward.store.ports import JobRow
from onward.store.schedules import MAX_SCHEDULES_PER_TENANT, AddOutcome
from onward.store.service import CancelStatus, Created, JobStore
from onward.telemetry import discard_unflushed

logger = Logger(service="onward-api")
metrics = Metrics(namespace="Onward", service="api")
tracer = Tracer(service="onward-api")

MAX_BODY_BYTES = 256 * 1024
# The answers of the API are per caller and change with every poll: no cache may keep them.
NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
CLAIM_WINDOW_S = 300
CLAIM_BUCKET_S = 60
BULK_BUDGET_S = 20.0  # a bulk action stops acting after this (the function's timeout is 29 s, API Gateway's 30 s)
PROBLEM_JSON = "application/problem+json"


# --- errors -------------------------------------------------------------------------------------------------

class Problem(Exception):
    """An HTTP answer as application/problem+json."""

    def __init__(self, status: int, title: str, detail: str, *, slug: str | None = None,
                 extra: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.slug = slug or title.lower().replace(" ", "-")
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def details(self) -> ProblemDetails:
        return ProblemDetails(type=f"https://onward.dev/problems/{self.slug}", title=self.title, status=self.status,
                              detail=self.detail, **self.extra)

    def response(self) -> Response[str]:
        return Response(self.status, PROBLEM_JSON, self.details().model_dump_json(exclude_none=True),
                        headers={**NO_STORE, **self.headers})


def not_found(job_id: str) -> Problem:
    # The same answer for a missing job and for another tenant's job: nothing tells them apart.
    return Problem(404, "Not found", f"no job {job_id!r}", slug="job-not-found")


# --- the app ------------------------------------------------------------------------------------------------

app = WholePathResolver(debug=False)


def _json(status: int, body: BaseModel | dict[str, Any], headers: Mapping[str, str] | None = None, *,
          exclude_none: bool = False) -> Response[str]:
    """An answer of the contract (onward.api.contract), or a document, as JSON."""
    text = body.model_dump_json(exclude_none=exclude_none) if isinstance(body, BaseModel) else json.dumps(body)
    return Response(status, "application/json", text, headers={**NO_STORE, **(headers or {})})


def _principal() -> Principal:
    try:
        principal = ApiDeployment.from_environment().authenticator.authenticate(app.current_event.raw_event)
    except NoTenant as refusal:  # a verified token of no tenant and no operator role
        raise Problem(403, "Forbidden", str(refusal), slug="no-tenant") from None
    if principal is None:
        raise Problem(401, "Unauthorized", "send Authorization: Bearer <token>",
                      headers={"WWW-Authenticate": 'Bearer realm="onward"'})
    return principal


def _tenant_scope(principal: Principal, asked: str | None = None) -> str | None:
    """The one scoping rule of every route: the tenant whose jobs this request may see or change. A tenant's
    credential (a tenant token, or an operator bound to a tenant) is confined to its tenant: asking for
    another one is refused, never silently widened or narrowed. Only an operator bound to no tenant may name
    any tenant (`asked`), and without one it is not confined (None)."""
    if principal.tenant_id is None:
        return asked
    if asked is not None and asked != principal.tenant_id:
        raise Problem(403, "Forbidden", "this credential is confined to its own tenant", slug="other-tenant")
    return principal.tenant_id


def _operator() -> Principal:
    """The caller, if an operator (403 otherwise)."""
    principal = _principal()
    if not principal.operator:
        raise Problem(403, "Forbidden", "this is for operators", slug="operators-only")
    return principal


def _platform_operator() -> Principal:
    """The caller, if an operator bound to no tenant: what this answers is every tenant's (403 otherwise)."""
    principal = _operator()
    if principal.tenant_id is not None:
        raise Problem(403, "Forbidden", "this shows every tenant's data: it needs an operator credential bound "
                      "to no tenant", slug="other-tenant")
    return principal


def _query() -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def _asked_tenant(query: Mapping[str, str]) -> str | None:
    asked = query.get("tenant")
    if asked is not None and not TENANT_ID.matches(asked):
        raise Problem(400, "Bad request", f"{asked!r} is not a tenant id")
    return asked


def _limit(query: Mapping[str, str], default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    try:
        limit = int(query.get("limit", default))
    except ValueError:
        limit = 0
    if not 1 <= limit <= maximum:
        raise Problem(400, "Bad request", f"limit is an integer from 1 to {maximum}")
    return limit


def _job_type(query: Mapping[str, str]) -> str | None:
    job_type = query.get("type")
    if job_type is not None and not JOB_TYPE.matches(job_type):
        raise Problem(400, "Bad request", f"{job_type[:130]!r} is not a job type (dotted lower-case names)")
    return job_type


def _job_filter(query: Mapping[str, str]) -> JobFilter:
    """?status= (one or a comma list), ?type=, ?id_prefix= as a JobFilter; 400 for a value none could match."""
    statuses: frozenset[str] = frozenset()
    if "status" in query:
        statuses = frozenset(query["status"].split(","))
        unknown = sorted(statuses - {state.value for state in JobState})
        if unknown:
            raise Problem(400, "Bad request", f"unknown status {unknown[0]!r}; known: "
                          + ", ".join(state.value for state in JobState))
    job_type = _job_type(query)
    id_prefix = query.get("id_prefix")
    if id_prefix is not None and not JOB_ID_PREFIX.matches(id_prefix):
        raise Problem(400, "Bad request", "id_prefix is 1 to 32 lower-case hexadecimal digits (a job id or its "
                      "beginning)")
    return JobFilter(statuses, job_type, id_prefix)


def _job_id(job_id: str) -> str:
    if not JOB_ID.matches(job_id):
        raise not_found(job_id)
    return job_id


def _body() -> Any:
    """The request's JSON body: 415 unless it is declared JSON, 413 over MAX_BODY_BYTES, 400 unless it is
    JSON that can be stored (no NaN or Infinity, no nesting that exhausts the parser). A number a float cannot
    hold (1e-400) is read as its Decimal, for the models to refuse by its own value rather than keep its 0.0."""
    event = app.current_event
    content_type = (event.headers or {}).get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise Problem(415, "Unsupported media type", "send the body as Content-Type: application/json",
                      headers={"Accept": "application/json"})
    raw: bytes
    body = event.body or ""
    if event.is_base64_encoded:
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:
            raise Problem(400, "Malformed body", "the body is not valid base64") from error
    else:
        raw = body.encode()
    if len(raw) > MAX_BODY_BYTES:
        raise Problem(413, "Payload too large", f"the body takes {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        return json.loads(raw, parse_constant=_refuse_constant, parse_float=parse_json_float)
    except RecursionError as error:
        raise Problem(400, "Malformed JSON", "the body nests too deeply") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {error}") from error


def _invalid_body(error: ValidationError, where: tuple[str | int, ...] = ()) -> Problem:
    """A 422 naming each place of the body that does not match its model, and why (`where`: the place of the
    part that was validated, e.g. ("jobs", 3) for a batch's entry)."""
    errors = [{"loc": [*where, *e["loc"]], "msg": e["msg"].removeprefix("Value error, "), "type": e["type"]}
              for e in error.errors(include_input=False, include_url=False)]
    shown = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors[:3])
    return Problem(422, "Invalid request", f"the body does not match the schema: {shown}", slug="validation",
                   extra={"errors": errors})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and not a number DynamoDB can store)")


@app.get("/health")
def health() -> Response[str]:
    return _json(200, Health())


@app.get("/")
def status_page() -> Response[str]:
    return _static("index.html")


@app.post("/")
def status_page_form() -> Response[str]:
    """The page's forms are method="post" so that what they hold (a token) never lands in a URL; one reaches
    here only when the page's scripts have not taken it over yet (or never will). Answered with the page
    again (303, so a reload does not post it twice); the body is never read."""
    return Response(303, "text/plain; charset=utf-8", "", headers={"Location": "/", **PAGE_HEADERS})


@app.get("/web/<name>")
def status_page_asset(name: str) -> Response[str]:
    return _static(name)


def _static(name: str) -> Response[str]:
    """A file of the status page (web/), from a fixed list: nothing else on disk can be named."""
    found = web_files().get(name)
    if found is None:
        raise Problem(404, "Not found", "no such file", slug="route-not-found")
    content_type, body = found
    return Response(200, content_type, body, headers=PAGE_HEADERS)


@app.get("/openapi.json")
def openapi() -> Response[str]:
    from onward.api.openapi import document

    return _json(200, document(ApiDeployment.from_environment().job_types))


@app.post("/jobs")
def create_job() -> Response[str]:
    tenant_id = _creating_tenant(_principal())
    payload = _body()
    if not isinstance(payload, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object", slug="validation")
    deployment = ApiDeployment.from_environment()
    request = _new_job(deployment, NewJob, payload)
    key = (app.current_event.headers or {}).get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY.matches(key):
        raise Problem(400, "Bad request", "an Idempotency-Key is 1 to 128 printable ASCII characters")
    created = deployment.job_store.create(tenant_id, request, idempotency_key=key)
    metrics.add_metric(name="JobsCreated" if created.created else "JobsCreateRepeated", unit=MetricUnit.Count, value=1)
    job = created.job
    return _json(202 if created.created else 200, Accepted(job_id=job.job_id, status=job.state, version=job.version),
                 headers={"Location": f"/jobs/{job.job_id}"})


@app.post("/jobs/batch")
def create_jobs() -> Response[str]:
    """Create up to 100 jobs, each as POST /jobs would (with its own idempotency_key), and answer each entry's
    outcome in order: a refused entry refuses only itself. A body that is not 1 to 100 objects creates nothing."""
    tenant_id = _creating_tenant(_principal())
    if "idempotency-key" in (app.current_event.headers or {}):
        raise Problem(400, "Bad request", "a batch takes an idempotency_key in each entry, not an Idempotency-Key "
                      "header (which would not say which job it keys)")
    try:
        asked = BatchCreate.model_validate(_body())
    except ValidationError as error:
        raise _invalid_body(error) from error
    results = _create_batch(ApiDeployment.from_environment(), tenant_id, asked.jobs)
    created = sum(result.status == 202 for result in results)
    metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=created)
    metrics.add_metric(name="JobsCreateRepeated", unit=MetricUnit.Count,
                       value=sum(result.status == 200 for result in results))
    # each problem as POST /jobs answers it: without the fields it does not have
    return _json(200, BatchCreated(results=results, created=created), exclude_none=True)


def _creating_tenant(principal: Principal) -> str:
    """The tenant the caller creates jobs for (403 for a credential that names none: an operator's)."""
    if principal.tenant_id is None:
        raise Problem(403, "Forbidden", "this credential names no tenant to create jobs for")
    return principal.tenant_id


NewJobModel = TypeVar("NewJobModel", bound=NewJob)


def _new_job(deployment: Deployment, model: type[NewJobModel], payload: Any,
             where: tuple[str | int, ...] = ()) -> NewJobModel:
    """`payload` as a job of one of the deployment's types: else a 422 naming each place that does not match
    (`where`: the payload's place in the body), or the unknown type."""
    try:
        request = model.model_validate(payload)
    except ValidationError as error:
        raise _invalid_body(error, where) from error
    if request.type not in deployment.job_types:
        raise Problem(422, "Unknown job type", f"no job type {request.type!r}; known: "
                      + ", ".join(sorted(deployment.job_types)), slug="unknown-job-type")
    return request


def _create_batch(deployment: Deployment, tenant_id: str, entries: list[dict[str, Any]]) -> list[BatchOutcome]:
    """Each entry's outcome, in order: an entry that is not a job of a known type is refused here, as POST /jobs
    refuses it (it never reaches the store); the others are created together (JobStore.create_batch)."""
    checked: list[BatchJob | Problem] = []
    for index, entry in enumerate(entries):
        try:
            checked.append(_new_job(deployment, BatchJob, entry, where=("jobs", index)))
        except Problem as problem:
            checked.append(problem)
    jobs = [(entry.new_job(), entry.idempotency_key) for entry in checked if isinstance(entry, BatchJob)]
    answers = iter(deployment.job_store.create_batch(tenant_id, jobs) if jobs else [])
    return [_batch_outcome(next(answers) if isinstance(entry, BatchJob) else entry) for entry in checked]


def _batch_outcome(answer: Created | OnwardError | Problem) -> BatchOutcome:
    """One entry's answer: its job (202 created, 200 found by its key), or its refusal as POST /jobs answers it."""
    if isinstance(answer, Created):
        return BatchOutcome(status=202 if answer.created else 200, job_id=answer.job.job_id)
    problem = answer if isinstance(answer, Problem) else _problem_of(answer)
    return BatchOutcome(status=problem.status, problem=problem.details())


def _listed_tenant(principal: Principal, query: Mapping[str, str]) -> str:
    """The one tenant a listing or a count is of (an operator bound to no tenant names it)."""
    tenant = _tenant_scope(principal, _asked_tenant(query))
    if tenant is None:
        raise Problem(400, "Bad request", "an operator lists one tenant's jobs: pass ?tenant=")
    return tenant


@app.get("/jobs")
def list_jobs() -> Response[str]:
    principal = _principal()
    query = _query()
    tenant = _listed_tenant(principal, query)
    limit = _limit(query)
    where = _job_filter(query)
    cursor = query.get("cursor")
    start = _decode_cursor(cursor, tenant, cursors.JOB_CURSOR) if cursor else None
    deployment = ApiDeployment.from_environment()
    views, start = deployment.status_view.for_tenant(tenant, limit=limit, where=where, start=start)
    now = system_clock()
    lag = _view_lag(deployment, now)
    jobs = [JobStatus.of_view(view, freshness_of(view.as_of, lag, now)) for view in views]
    return _json(200, JobPage(jobs=jobs, cursor=cursors.encode_cursor(start) if start else None, view=lag))


@app.get("/jobs/counts")
def count_jobs() -> Response[str]:
    """A tenant's jobs per status in the view (of ?type= only, if given), over its newest MAX_COUNTED."""
    principal = _principal()
    query = _query()
    tenant = _listed_tenant(principal, query)
    deployment = ApiDeployment.from_environment()
    counted = deployment.status_view.count_by_status(tenant, job_type=_job_type(query))
    counts = {state: counted.counts.get(state.value, 0) for state in JobState}
    return _json(200, StatusCounts(counts=counts, examined=counted.examined, complete=counted.complete,
                                   view=_view_lag(deployment, system_clock())))


@app.get("/whoami")
def whoami() -> Response[str]:
    """Who this credential is, so a page knows what to offer (an operator's views, creating jobs)."""
    principal = _principal()
    return _json(200, Caller(tenant_id=principal.tenant_id, operator=principal.operator))


@app.get("/view")
def view_health() -> Response[str]:
    """How far behind the status view may be right now (any valid credential)."""
    _principal()
    return _json(200, _view_lag(ApiDeployment.from_environment(), system_clock()))


def _view_lag(deployment: Deployment, now: EpochMs) -> ViewLag:
    """How far behind the view may be now: one Query of the projector's watermarks, over every open shard
    of the events stream (listed at most every 30 s)."""
    return view_lag(deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER), now,
                    deployment.settings.stale_after_s, shards=deployment.events_shards.open_shards())


def _decode_cursor(cursor: str, tenant: str, fields: frozenset[str]) -> dict[str, Any]:
    """The key of a listing's cursor (onward.api.cursors); 400 for one this API did not return for this
    tenant and this listing."""
    try:
        return cursors.decode_cursor(cursor, tenant, fields)
    except cursors.InvalidCursor as error:
        raise Problem(400, "Bad request", str(error)) from None


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response[str]:
    principal = _principal()
    job_id = _job_id(job_id)
    scope = _tenant_scope(principal)
    deployment = ApiDeployment.from_environment()
    # Read consistently (never older than an answer before), and only if it is the caller's: another tenant's
    # job goes the way of a missing one, to the job table's scoped read and its 404, by the same requests.
    view = deployment.status_view.get(job_id, scope)
    now = system_clock()
    lag = _view_lag(deployment, now)
    if view is not None:
        return _json(200, JobStatus.of_view(view, freshness_of(view.as_of, lag, now)))
    # Not in the view yet: the job row only says whether the job exists (JobNotFound: a 404), never its
    # status, which the view may show older a moment later.
    deployment.job_store.get(job_id, scope)
    return _json(200, PendingJob(job_id=job_id, view=lag))


@app.get("/jobs/<job_id>/runs")
def job_runs(job_id: str) -> Response[str]:
    principal = _principal()
    runs = ApiDeployment.from_environment().job_store.runs(_job_id(job_id), _tenant_scope(principal))
    return _json(200, Runs(job_id=job_id, runs=[RunRecord.of(run) for run in runs]))


@app.get("/jobs/<job_id>/params")
def job_params(job_id: str) -> Response[str]:
    """What the job was created with, from the job table (it never changes, so no view is needed)."""
    principal = _principal()
    job = ApiDeployment.from_environment().job_store.get(_job_id(job_id), _tenant_scope(principal))
    return _json(200, JobParams.of(job))


@app.get("/jobs/<job_id>/explain")
def explain_job(job_id: str) -> Response[str]:
    """Why the job is not running and until when (onward.operator.explain), decided now from the job table, its tenant's
    dispatch counters and the window's claims; with a status's freshness block. Scoped as GET /jobs/{job_id}."""
    principal = _principal()
    deployment = ApiDeployment.from_environment()
    scope = _tenant_scope(principal)
    row = deployment.job_store.row(_job_id(job_id), scope)
    now = system_clock()
    waiting = _waiting(deployment, row, now, platform=scope is None) if explain.waits(row.job) else None
    freshness = freshness_of(iso(row.job.updated_at), _view_lag(deployment, now), now)
    return _json(200, JobExplanation.of(row.job, explain.explain(row.job, now, waiting), now, freshness))


def _waiting(deployment: Deployment, row: JobRow, now: EpochMs, *, platform: bool) -> explain.Waiting:
    """What a waiting job's explanation is decided from (explain.waiting_of), with the claims of the last
    CLAIM_WINDOW_S (onward.operator.claim_history): its tenant's only, or with `platform` (an operator bound to no
    tenant, who may see every tenant's) every tenant's."""
    claims = RecentClaims(deployment.client("dynamodb"), deployment.settings.require("outbox_table")).count(
        now, window_s=CLAIM_WINDOW_S, bucket_s=CLAIM_BUCKET_S, tenant_id=None if platform else row.job.tenant_id)
    return explain.waiting_of(deployment.job_store.recorder, row, claims, now, platform=platform)


@app.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response[str]:
    principal = _principal()
    outcome = ApiDeployment.from_environment().job_store.cancel(_job_id(job_id), _tenant_scope(principal))
    if outcome.status is CancelStatus.ALREADY_ENDED:
        raise Problem(409, "Already completed", f"job {job_id} already ended as {outcome.job.state.value}",
                      slug="already-completed", extra={"job_status": outcome.job.state.value})
    status: Literal["cancelled", "cancel_requested"] = (
        "cancelled" if outcome.status is CancelStatus.CANCELLED else "cancel_requested")
    return _json(202, CancelAccepted(job_id=job_id, status=status, version=outcome.job.version))


@app.post("/jobs/<job_id>/replay")
def replay_job(job_id: str) -> Response[str]:
    principal = _principal()
    if not principal.operator:
        raise Problem(403, "Forbidden", "replay is for operators")
    store = ApiDeployment.from_environment().job_store
    return _json(202, _replay(store, _job_id(job_id), _tenant_scope(principal)))


def _replay(store: JobStore, job_id: str, scope: str | None) -> Accepted:
    """The one replay path (a job's route and the bulk one): a job outside `scope` is JobNotFound."""
    store.get(job_id, scope)  # bound to a tenant: only that tenant's jobs
    job = store.replay(job_id)
    return Accepted(job_id=job.job_id, status=job.state, version=job.version)


# --- operators --------------------------------------------------------------------------------------------------

@app.post("/ops/replay")
def replay_jobs() -> Response[str]:
    """Replay several jobs, each exactly as POST /jobs/{job_id}/replay would, and answer each one's outcome.
    The body is checked whole first: a bad one replays nothing."""
    principal = _principal()
    if not principal.operator:
        raise Problem(403, "Forbidden", "replay is for operators")
    payload = _body()
    try:
        asked = BulkReplay.model_validate(payload)
    except ValidationError as error:
        raise _invalid_body(error) from error
    scope = _tenant_scope(principal)
    store = ApiDeployment.from_environment().job_store
    results: list[ReplayOutcome] = []
    for job_id in asked.job_ids:
        try:
            results.append(ReplayOutcome(job_id=job_id, status=202, job=_replay(store, job_id, scope)))
        except (JobNotFound, NotReplayable, StoreContention) as error:
            problem = _problem_of(error)
            results.append(ReplayOutcome(job_id=job_id, status=problem.status, problem=problem.details()))
    replayed = sum(result.status == 202 for result in results)
    metrics.add_metric(name="JobsReplayed", unit=MetricUnit.Count, value=replayed)
    # each problem as its route answers it: without the fields it does not have
    return _json(200, BulkReplayed(results=results, replayed=replayed), exclude_none=True)


@app.post("/ops/bulk/replay")
def bulk_replay() -> Response[str]:
    """Replay the dead and quarantined jobs a filter selects (onward.operator.bulk); a dry run (the default) only counts
    them. Every tenant's, or one's (a bound operator: its own)."""
    return _bulk(BulkKind.REPLAY, BulkReplayRequest)


@app.post("/ops/bulk/cancel")
def bulk_cancel() -> Response[str]:
    """Cancel one tenant's waiting and running jobs that a filter selects (onward.operator.bulk); a dry run (the
    default)
    only counts them."""
    return _bulk(BulkKind.CANCEL, BulkCancelRequest)


def _bulk(kind: BulkKind, model: type[BulkReplayRequest | BulkCancelRequest]) -> Response[str]:
    """The bulk routes: the body checked whole (a bad filter acts on nothing: 422), scoped by `_tenant_scope`,
    then onward.operator.bulk.BulkAction within BULK_BUDGET_S."""
    principal = _operator()
    try:
        asked = model.model_validate(_body())
    except ValidationError as error:
        raise _invalid_body(error) from error
    try:
        where = asked.bulk_filter(kind, _tenant_scope(principal, asked.tenant), asked.states)
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
    return _json(200, BulkActionReport.of(report))


@app.get("/ops/replayable")
def replayable_jobs() -> Response[str]:
    """Dead and quarantined jobs, newest first, up to ?limit= per tenant: every tenant's (an operator bound to no
    tenant, or ?tenant=), or the bound operator's tenant's."""
    principal = _operator()
    query = _query()
    scope = _tenant_scope(principal, _asked_tenant(query))
    limit = _limit(query)
    deployment = ApiDeployment.from_environment()
    tenants = [scope] if scope is not None else sorted(deployment.job_store.tenant_states())
    where = JobFilter(frozenset(state.value for state in REPLAYABLE_STATES))
    now = system_clock()
    lag = _view_lag(deployment, now)
    groups: list[TenantJobs] = []
    for tenant in tenants:
        views, start = deployment.status_view.for_tenant(tenant, limit=limit, where=where)
        if views or start:
            groups.append(TenantJobs(
                tenant_id=tenant, jobs=[JobStatus.of_view(view, freshness_of(view.as_of, lag, now)) for view in views],
                cursor=cursors.encode_cursor(start) if start else None))
    return _json(200, ReplayableJobs(tenants=groups, view=lag))


@app.get("/ops/tenants")
def tenant_loads() -> Response[str]:
    """Every tenant's weight, cap, running and waiting jobs (its counters in the job table, read together as a
    claim reads them) and its claims over the last CLAIM_WINDOW_S, minute by minute (onward.operator.claim_history)."""
    _platform_operator()
    deployment = ApiDeployment.from_environment()
    states = deployment.job_store.tenant_states()
    now = system_clock()
    claims = RecentClaims(deployment.client("dynamodb"), deployment.settings.require("outbox_table")).count(
        now, window_s=CLAIM_WINDOW_S, bucket_s=CLAIM_BUCKET_S)
    total = sum(claims.total(tenant) for tenant in states)
    rows = [TenantLoad(tenant_id=tenant, weight=state.tenant.policy.weight, cap=state.tenant.policy.cap,
                       running=state.usage.running, waiting=state.load().waiting,
                       claims=claims.by_tenant.get(tenant, [0] * claims.buckets),
                       claim_share=round(claims.total(tenant) / total, 4) if total else None)
            for tenant, state in sorted(states.items())]
    window = ClaimWindow(since=iso(claims.since_ms), until=iso(claims.until_ms), bucket_s=claims.bucket_ms // 1000,
                         examined=claims.examined, complete=claims.complete)
    return _json(200, Tenants(tenants=rows, window=window))


@app.get("/ops/lag")
def pipeline_lag() -> Response[str]:
    """The view's lag per events-stream shard (the projector's watermarks over the open shards) and the
    relay's watermark over the outbox stream. No tenant's data: any operator."""
    _operator()
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
    return _json(200, PipelineLag(view=lag, shards=rows, relay=relay))


@app.get("/ops/parked")
def parked_records() -> Response[str]:
    """Records the relay and the projector could not read (?source= one of them), with their reasons."""
    _platform_operator()
    query = _query()
    source = query.get("source")
    if source is not None and source not in SOURCES:
        raise Problem(400, "Bad request", f"source is one of {', '.join(SOURCES)}")
    limit = _limit(query)
    deployment = ApiDeployment.from_environment()
    reader = ParkedRecordReader(deployment.client("dynamodb"), deployment.settings.require("parked_table"))
    rows: list[ParkedRow] = []
    more = False
    for name in SOURCES if source is None else tuple(name for name in SOURCES if name == source):
        records, more_here = reader.page(name, limit)
        more = more or more_here
        rows += [ParkedRow(source=name, shard_id=record.shard_id, sequence_number=record.sequence_number,
                           reason=record.reason, parked_at=record.parked_at, raw_size=record.raw_size,
                           raw_truncated=record.raw_truncated, preview=preview(record.raw)) for record in records]
    rows.sort(key=lambda row: row.parked_at, reverse=True)
    return _json(200, ParkedRecords(records=rows, more=more))


@app.get("/ops/conflicts")
def projection_conflicts() -> Response[str]:
    """Same-version events the projector kept apart, each with the fields that disagree."""
    _platform_operator()
    limit = _limit(_query())
    deployment = ApiDeployment.from_environment()
    kept, more = ConflictReader(deployment.client("dynamodb"), deployment.settings.require("conflicts_table")).newest(
        limit)
    rows = [ConflictRow(job_id=conflict.job_id, tenant_id=conflict.tenant_id, version=conflict.version,
                        detected_at=conflict.detected_at, reason=conflict.reason,
                        differences=[FieldDifference(field=d.field, in_view=d.in_view, incoming=d.incoming)
                                     for d in conflict.differences])
            for conflict in kept]
    return _json(200, Conflicts(conflicts=rows, more=more))


# --- schedules (periodic jobs: onward.domain.schedules, fired by onward.maintenance.scheduler)
# --------------------------------------

def _schedule_tenant(principal: Principal) -> str:
    """The tenant whose schedules a request is about: the credential's, or the ?tenant= of an operator bound to
    no tenant."""
    tenant = _tenant_scope(principal, _asked_tenant(_query()))
    if tenant is None:
        raise Problem(400, "Bad request", "an operator names the tenant whose schedules these are: pass ?tenant=")
    return tenant


@app.post("/schedules")
def create_schedule() -> Response[str]:
    """A periodic job: 201 with its next fire time; 409 when the tenant has a schedule of that name, or
    MAX_SCHEDULES_PER_TENANT of them (decided by the store's write: onward.store.schedules); 413 for params over
    MAX_SCHEDULE_PARAMS_BYTES."""
    tenant_id = _schedule_tenant(_principal())
    try:
        request = NewSchedule.model_validate(_body())
    except ValidationError as error:
        raise _invalid_body(error) from error
    deployment = ApiDeployment.from_environment()
    if request.type not in deployment.job_types:
        raise Problem(422, "Unknown job type", f"no job type {request.type!r}; known: "
                      + ", ".join(sorted(deployment.job_types)), slug="unknown-job-type")
    schedule = Schedule.of(tenant_id, request, system_clock())
    outcome = deployment.schedules.add(schedule)
    if outcome is AddOutcome.TOO_MANY:
        raise Problem(409, "Too many schedules", f"a tenant keeps at most {MAX_SCHEDULES_PER_TENANT} schedules; "
                      "delete one first", slug="too-many-schedules")
    if outcome is AddOutcome.NAME_TAKEN:
        raise Problem(409, "Schedule exists", f"this tenant has a schedule named {request.name!r}; delete it first",
                      slug="schedule-exists")
    return _json(201, ScheduleInfo.of(schedule))


@app.get("/schedules")
def list_schedules() -> Response[str]:
    """A page of the tenant's schedules by name (?limit=, 20 by default, at most 100), with the cursor of the
    next page (?cursor=) while there are more."""
    tenant_id = _schedule_tenant(_principal())
    query = _query()
    limit = _limit(query)
    cursor = query.get("cursor")
    after = _decode_cursor(cursor, tenant_id, cursors.SCHEDULE_CURSOR)["name"]["S"] if cursor else None
    if after is not None and not SCHEDULE_NAME.matches(after):
        raise Problem(400, "Bad request", "the cursor is not one this API returned for this tenant")
    found = ApiDeployment.from_environment().schedules.page(tenant_id, limit, after)
    more = None if found.after is None else cursors.schedule_cursor(tenant_id, found.after)
    return _json(200, Schedules(schedules=[ScheduleInfo.of(schedule) for schedule in found.schedules], cursor=more))


@app.delete("/schedules/<name>")
def delete_schedule(name: str) -> Response[str]:
    """204 once the schedule is gone (a tick already under way may still create the one fire it read); 404 when
    there is none."""
    tenant_id = _schedule_tenant(_principal())
    if not (SCHEDULE_NAME.matches(name) and ApiDeployment.from_environment().schedules.remove(tenant_id, name)):
        raise Problem(404, "Not found", f"no schedule {name!r}", slug="schedule-not-found")
    return Response(204, None, None, headers=NO_STORE)


# --- error mapping ----------------------------------------------------------------------------------------------

ProblemHandler = TypeVar("ProblemHandler", bound=Callable[[Any], Response[str]])


def _handles(*error_classes: type[Exception]) -> Callable[[ProblemHandler], ProblemHandler]:
    """`app.exception_handler(error_classes)`, typed (Powertools leaves it unannotated): registers the
    decorated function as the answer to each of `error_classes` and returns it unchanged."""
    register: Callable[[ProblemHandler], ProblemHandler] = app.exception_handler(list(error_classes))
    return register


@_handles(Problem)
def _problem(error: Problem) -> Response[str]:
    return error.response()


def _problem_of(error: OnwardError) -> Problem:
    """The answer to an error of the core: one mapping for every route (and each job of a bulk replay or entry of
    a batch)."""
    if isinstance(error, JobNotFound):
        return not_found(str(error.args[0]) if error.args else "")
    if isinstance(error, IdempotencyConflict):
        return Problem(409, "Idempotency conflict", "this Idempotency-Key was already used for a different request",
                       slug="idempotency-conflict")
    if isinstance(error, NotReplayable):
        return Problem(409, "Not replayable", str(error), slug="not-replayable")
    if isinstance(error, PayloadTooLarge):
        return Problem(413, "Payload too large", str(error))
    if isinstance(error, InvalidRequest):
        return Problem(400, "Bad request", str(error))
    if isinstance(error, StoreContention):
        return Problem(503, "Busy", "the job is contended; retry shortly", headers={"Retry-After": "1"})
    logger.error("unexpected refusal of the core", extra={"error": type(error).__name__})
    return Problem(500, "Internal error", "the request failed; it is safe to retry with the same Idempotency-Key")


@_handles(JobNotFound, IdempotencyConflict, NotReplayable, PayloadTooLarge, InvalidRequest, StoreContention)
def _core_error(error: JobNotFound | IdempotencyConflict | NotReplayable | PayloadTooLarge | InvalidRequest
                | StoreContention) -> Response[str]:
    return _problem_of(error).response()


@app.not_found
def _route_not_found(error: Exception) -> Response[str]:
    allowed = _methods_allowed(app.current_event.path)
    if allowed:
        return Problem(405, "Method not allowed", f"{app.current_event.http_method} is not allowed here; "
                       f"allowed: {', '.join(allowed)}", headers={"Allow": ", ".join(allowed)}).response()
    return Problem(404, "Not found", "no such route", slug="route-not-found").response()


def _methods_allowed(path: str) -> list[str]:
    """The methods of the routes that match this path (for a 405's Allow header)."""
    routes = [*app._static_routes, *app._dynamic_routes]  # the resolver's own table: no second copy
    return sorted({route.method for route in routes if route.rule.match(path)})


@_handles(Exception)
def _unexpected(error: Exception) -> Response[str]:
    logger.exception("unhandled error", extra={"route": app.current_event.path})
    return Problem(500, "Internal error", "the request failed; it is safe to retry with the same "
                   "Idempotency-Key").response()


# Lambda runs one invocation per execution environment at a time, and Powertools relies on it: the resolver
# keeps the current event on a class attribute (BaseRouter.current_event) and the logger keeps the
# correlation id, both shared by every thread. A threaded server in one process (the local gateway) would
# otherwise answer one request with another's headers, body or credential.
_one_invocation_at_a_time = threading.Lock()


@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)  # responses hold tenant data: keep them out of traces
@logger.inject_lambda_context(log_event=False, correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def _invoke(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with _one_invocation_at_a_time:
        response: dict[str, Any] = _invoke(event, context)  # app.resolve's answer (Powertools' decorators: Any)
        return response


__all__ = ["app", "handler"]

"""The job routes (/jobs...): create one or a batch, list and count a tenant's, read one (its status, runs,
parameters, why it waits), cancel and replay it. The tenant ALWAYS comes from the credential; another tenant's
job is answered exactly like a missing one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from onward.api import cursors
from onward.api.answers import Problem, json_answer, problem_of
from onward.api.auth import Principal
from onward.api.contract.jobs import (
    Accepted,
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
from onward.api.request import (
    asked_job_type,
    asked_tenant,
    caller,
    cursor_start,
    invalid_body,
    job_filter,
    json_body,
    page_limit,
    query_parameters,
    tenant_scope,
    well_formed_job_id,
)
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment, Deployment
from onward.domain.clock import EpochMs, iso, system_clock
from onward.domain.errors import OnwardError
from onward.domain.freshness import freshness_of
from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.domain.text_patterns import IDEMPOTENCY_KEY
from onward.operator import explain
from onward.pipeline.view import listing_start
from onward.store.ports import JobRow
from onward.store.service import CancelStatus, Created

router = new_router()


@router.post("/jobs")
def create_job() -> Response[str]:
    tenant_id = _creating_tenant(caller())
    payload = json_body()
    if not isinstance(payload, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object", slug="validation")
    deployment = ApiDeployment.from_environment()
    request = _new_job(deployment, NewJob, payload)
    key = (router.current_event.headers or {}).get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY.matches(key):
        raise Problem(400, "Bad request", "an Idempotency-Key is 1 to 128 printable ASCII characters")
    created = deployment.job_store.create(tenant_id, request, idempotency_key=key)
    metrics.add_metric(name="JobsCreated" if created.created else "JobsCreateRepeated", unit=MetricUnit.Count, value=1)
    job = created.job
    return json_answer(202 if created.created else 200,
                       Accepted(job_id=job.job_id, status=job.state, version=job.version),
                       headers={"Location": f"/jobs/{job.job_id}"})


@router.post("/jobs/batch")
def create_jobs() -> Response[str]:
    """Create up to 100 jobs, each as POST /jobs would (with its own idempotency_key), and answer each entry's
    outcome in order: a refused entry refuses only itself. A body that is not 1 to 100 objects creates nothing."""
    tenant_id = _creating_tenant(caller())
    if "idempotency-key" in (router.current_event.headers or {}):
        raise Problem(400, "Bad request", "a batch takes an idempotency_key in each entry, not an Idempotency-Key "
                      "header (which would not say which job it keys)")
    try:
        asked = BatchCreate.model_validate(json_body())
    except ValidationError as error:
        raise invalid_body(error) from error
    results = _create_batch(ApiDeployment.from_environment(), tenant_id, asked.jobs)
    created = sum(result.status == 202 for result in results)
    metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=created)
    metrics.add_metric(name="JobsCreateRepeated", unit=MetricUnit.Count,
                       value=sum(result.status == 200 for result in results))
    # each problem as POST /jobs answers it: without the fields it does not have
    return json_answer(200, BatchCreated(results=results, created=created), exclude_none=True)


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
        raise invalid_body(error, where) from error
    refuse_unknown_job_type(deployment, request.type)
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
    problem = answer if isinstance(answer, Problem) else problem_of(answer)
    return BatchOutcome(status=problem.status, problem=problem.details())


def _listed_tenant(principal: Principal, query: Mapping[str, str]) -> str:
    """The one tenant a listing or a count is of (an operator bound to no tenant names it)."""
    tenant = tenant_scope(principal, asked_tenant(query))
    if tenant is None:
        raise Problem(400, "Bad request", "an operator lists one tenant's jobs: pass ?tenant=")
    return tenant


@router.get("/jobs")
def list_jobs() -> Response[str]:
    principal = caller()
    query = query_parameters()
    tenant = _listed_tenant(principal, query)
    limit = page_limit(query)
    where = job_filter(query)
    cursor = query.get("cursor")
    start = cursor_start(cursor, lambda position: listing_start(position, tenant)) if cursor else None
    deployment = ApiDeployment.from_environment()
    views, start = deployment.status_view.for_tenant(tenant, limit=limit, where=where, start=start)
    now = system_clock()
    lag = view_lag_now(deployment, now)
    jobs = [JobStatus.of_view(view, freshness_of(view.as_of, lag, now)) for view in views]
    return json_answer(200, JobPage(jobs=jobs, cursor=cursors.encode_cursor(start) if start else None, view=lag))


@router.get("/jobs/counts")
def count_jobs() -> Response[str]:
    """A tenant's jobs per status in the view (of ?type= only, if given), over its newest MAX_COUNTED."""
    principal = caller()
    query = query_parameters()
    tenant = _listed_tenant(principal, query)
    deployment = ApiDeployment.from_environment()
    counted = deployment.status_view.count_by_status(tenant, job_type=asked_job_type(query))
    counts = {state: counted.counts.get(state.value, 0) for state in JobState}
    return json_answer(200, StatusCounts(counts=counts, examined=counted.examined, complete=counted.complete,
                                         view=view_lag_now(deployment, system_clock())))


@router.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response[str]:
    principal = caller()
    job_id = well_formed_job_id(job_id)
    scope = tenant_scope(principal)
    deployment = ApiDeployment.from_environment()
    # Read consistently (never older than an answer before), and only if it is the caller's: another tenant's
    # job goes the way of a missing one, to the job table's scoped read and its 404, by the same requests.
    view = deployment.status_view.get(job_id, scope)
    now = system_clock()
    lag = view_lag_now(deployment, now)
    if view is not None:
        return json_answer(200, JobStatus.of_view(view, freshness_of(view.as_of, lag, now)))
    # Not in the view yet: the job row only says whether the job exists (JobNotFound: a 404), never its
    # status, which the view may show older a moment later.
    deployment.job_store.get(job_id, scope)
    return json_answer(200, PendingJob(job_id=job_id, view=lag))


@router.get("/jobs/<job_id>/runs")
def job_runs(job_id: str) -> Response[str]:
    principal = caller()
    runs = ApiDeployment.from_environment().job_store.runs(well_formed_job_id(job_id), tenant_scope(principal))
    return json_answer(200, Runs(job_id=job_id, runs=[RunRecord.of(run) for run in runs]))


@router.get("/jobs/<job_id>/params")
def job_params(job_id: str) -> Response[str]:
    """What the job was created with, from the job table (it never changes, so no view is needed)."""
    principal = caller()
    job = ApiDeployment.from_environment().job_store.get(well_formed_job_id(job_id), tenant_scope(principal))
    return json_answer(200, JobParams.of(job))


@router.get("/jobs/<job_id>/explain")
def explain_job(job_id: str) -> Response[str]:
    """Why the job is not running and until when (onward.operator.explain), decided now from the job table, its
    tenant's dispatch counters and the window's claims; with a status's freshness block. Scoped as GET
    /jobs/{job_id}."""
    principal = caller()
    deployment = ApiDeployment.from_environment()
    scope = tenant_scope(principal)
    row = deployment.job_store.row(well_formed_job_id(job_id), scope)
    now = system_clock()
    waiting = _waiting(deployment, row, now, platform=scope is None) if explain.waits(row.job) else None
    freshness = freshness_of(iso(row.job.updated_at), view_lag_now(deployment, now), now)
    return json_answer(200, JobExplanation.of(row.job, explain.explain(row.job, now, waiting), now, freshness))


def _waiting(deployment: Deployment, row: JobRow, now: EpochMs, *, platform: bool) -> explain.Waiting:
    """What a waiting job's explanation is decided from (explain.waiting_of), with the recent claims: its
    tenant's only, or with `platform` (an operator bound to no tenant, who may see every tenant's) every
    tenant's."""
    claims = recent_claims(deployment, now, tenant_id=None if platform else row.job.tenant_id)
    return explain.waiting_of(deployment.store_reads, row, claims, now, platform=platform)


@router.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response[str]:
    principal = caller()
    outcome = ApiDeployment.from_environment().job_store.cancel(well_formed_job_id(job_id), tenant_scope(principal))
    if outcome.status is CancelStatus.ALREADY_ENDED:
        raise Problem(409, "Already completed", f"job {job_id} already ended as {outcome.job.state.value}",
                      slug="already-completed", extra={"job_status": outcome.job.state.value})
    status: Literal["cancelled", "cancel_requested"] = (
        "cancelled" if outcome.status is CancelStatus.CANCELLED else "cancel_requested")
    return json_answer(202, CancelAccepted(job_id=job_id, status=status, version=outcome.job.version))


@router.post("/jobs/<job_id>/replay")
def replay_job(job_id: str) -> Response[str]:
    principal = caller()
    if not principal.operator:
        raise Problem(403, "Forbidden", "replay is for operators")
    store = ApiDeployment.from_environment().job_store
    return json_answer(202, replay_in_scope(store, well_formed_job_id(job_id), tenant_scope(principal)))

"""Lambda entry point for the HTTP API (API Gateway HTTP API, payload 2.0); the local gateway
(infra/gateway.py) invokes the same `handler` with the same event shape.

Thin: authenticate, parse the request at the edge (pydantic, extra fields refused), call the core
(JobStore, StatusViewReader, CheckpointStore, onward.freshness), shape the response. The authenticator, the
known job types and the core are the environment's Deployment's (handlers/bootstrap.py), built once. Errors
are application/problem+json. The tenant ALWAYS comes from the credential. Another tenant's job is answered
exactly like a missing one. Tokens are never logged (the event is not logged at all).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from handlers.auth import Principal
from handlers.bootstrap import Deployment
from handlers.contract import (
    Accepted,
    CancelAccepted,
    Health,
    JobPage,
    JobStatus,
    PendingJob,
    ProblemDetails,
    RunRecord,
    Runs,
)
from onward.checkpoints import PROJECTOR_CONSUMER
from onward.clock import EpochMs, system_clock
from onward.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    PayloadTooLarge,
    StoreContention,
)
from onward.freshness import freshness_of, view_lag
from onward.models import JOB_ID_PATTERN, NewJob, ViewLag
from onward.states import JobState
from onward.store import CancelStatus
from onward.telemetry import discard_unflushed

logger = Logger(service="onward-api")
metrics = Metrics(namespace="Onward", service="api")
tracer = Tracer(service="onward-api")

MAX_BODY_BYTES = 256 * 1024
MAX_CURSOR_CHARS = 2048
IDEMPOTENCY_KEY = re.compile(r"[ -~]{1,128}")
# The answers of the API are per caller and change with every poll: no cache may keep them.
NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
PROBLEM_JSON = "application/problem+json"
WEB_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


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

    def response(self) -> Response[str]:
        body = ProblemDetails(type=f"https://onward.dev/problems/{self.slug}", title=self.title, status=self.status,
                              detail=self.detail, **self.extra)
        return Response(self.status, PROBLEM_JSON, body.model_dump_json(exclude_none=True),
                        headers={**NO_STORE, **self.headers})


def not_found(job_id: str) -> Problem:
    # The same answer for a missing job and for another tenant's job: nothing tells them apart.
    return Problem(404, "Not found", f"no job {job_id!r}", slug="job-not-found")


# --- the app ------------------------------------------------------------------------------------------------

app = APIGatewayHttpResolver(debug=False)


def _json(status: int, body: BaseModel | dict[str, Any], headers: Mapping[str, str] | None = None) -> Response[str]:
    """An answer of the contract (handlers.contract), or a document, as JSON."""
    text = body.model_dump_json() if isinstance(body, BaseModel) else json.dumps(body)
    return Response(status, "application/json", text, headers={**NO_STORE, **(headers or {})})


def _principal() -> Principal:
    principal = Deployment.from_environment().authenticator.authenticate(app.current_event.raw_event)
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


def _job_id(job_id: str) -> str:
    if not JOB_ID_PATTERN.match(job_id):
        raise not_found(job_id)
    return job_id


def _body() -> Any:
    """The request's JSON body: 415 unless it is declared JSON, 413 over MAX_BODY_BYTES, 400 unless it is
    JSON that can be stored (no NaN or Infinity, no nesting that exhausts the parser)."""
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
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError as error:
        raise Problem(400, "Malformed JSON", "the body nests too deeply") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {error}") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and not a number DynamoDB can store)")


@app.get("/health")
def health() -> Response[str]:
    return _json(200, Health())


@app.get("/")
def status_page() -> Response[str]:
    return _static("index.html")


@app.get("/web/<name>")
def status_page_asset(name: str) -> Response[str]:
    return _static(name)


def _static(name: str) -> Response[str]:
    """A file of the status page (web/), from a fixed list: nothing else on disk can be named."""
    found = web_files().get(name)
    if found is None:
        raise Problem(404, "Not found", "no such file", slug="route-not-found")
    content_type, body = found
    return Response(200, content_type, body, headers={
        "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"})


@cache
def web_files() -> dict[str, tuple[str, str]]:
    """name -> (content type, text) of every file of the status page."""
    root = Path(os.environ.get("ONWARD_WEB_ROOT") or Path(__file__).resolve().parent.parent / "web")
    return {path.name: (WEB_TYPES[path.suffix], path.read_text(encoding="utf-8"))
            for path in sorted(root.iterdir()) if path.suffix in WEB_TYPES}


@app.get("/openapi.json")
def openapi() -> Response[str]:
    from handlers.openapi import document

    return _json(200, document(Deployment.from_environment().job_types))


@app.post("/jobs")
def create_job() -> Response[str]:
    principal = _principal()
    if principal.tenant_id is None:
        raise Problem(403, "Forbidden", "this credential names no tenant to create jobs for")
    payload = _body()
    if not isinstance(payload, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object", slug="validation")
    try:
        request = NewJob.model_validate(payload)
    except ValidationError as error:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"].removeprefix("Value error, "), "type": e["type"]}
                  for e in error.errors(include_input=False, include_url=False)]
        shown = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors[:3])
        raise Problem(422, "Invalid request", f"the body does not match the schema: {shown}", slug="validation",
                      extra={"errors": errors}) from error
    deployment = Deployment.from_environment()
    if request.type not in deployment.job_types:
        raise Problem(422, "Unknown job type", f"no job type {request.type!r}; known: "
                      + ", ".join(sorted(deployment.job_types)), slug="unknown-job-type")
    key = (app.current_event.headers or {}).get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise Problem(400, "Bad request", "an Idempotency-Key is 1 to 128 printable ASCII characters")
    created = deployment.job_store.create(principal.tenant_id, request, idempotency_key=key)
    metrics.add_metric(name="JobsCreated" if created.created else "JobsCreateRepeated", unit=MetricUnit.Count, value=1)
    job = created.job
    return _json(202 if created.created else 200, Accepted(job_id=job.job_id, status=job.state, version=job.version),
                 headers={"Location": f"/jobs/{job.job_id}"})


@app.get("/jobs")
def list_jobs() -> Response[str]:
    principal = _principal()
    query = app.current_event.query_string_parameters or {}
    tenant = _tenant_scope(principal, query.get("tenant"))
    if tenant is None:
        raise Problem(400, "Bad request", "an operator lists one tenant's jobs: pass ?tenant=")
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise Problem(400, "Bad request", f"limit is an integer from 1 to {MAX_LIMIT}")
    status = query.get("status")
    if status is not None and status not in {s.value for s in JobState}:
        raise Problem(400, "Bad request", f"unknown status {status!r}")
    cursor = query.get("cursor")
    start = _decode_cursor(cursor, tenant) if cursor else None
    deployment = Deployment.from_environment()
    views, start = deployment.status_view.for_tenant(tenant, limit=limit, status=status, start=start)
    now = system_clock()
    lag = _view_lag(deployment, now)
    jobs = [JobStatus.of_view(view, freshness_of(view.occurred_at, lag, now)) for view in views]
    return _json(200, JobPage(jobs=jobs, cursor=_encode_cursor(start) if start else None, view=lag))


@app.get("/view")
def view_health() -> Response[str]:
    """How far behind the status view may be right now (any valid credential)."""
    _principal()
    return _json(200, _view_lag(Deployment.from_environment(), system_clock()))


def _view_lag(deployment: Deployment, now: EpochMs) -> ViewLag:
    """How far behind the view may be now: one Query of the projector's watermarks."""
    return view_lag(deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER), now,
                    deployment.settings.stale_after_s)


def _encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str, tenant: str) -> dict[str, Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode())) if len(cursor) <= MAX_CURSOR_CHARS else None
        valid = (isinstance(key, dict) and set(key) == {"job_id", "tenant_id", "occurred_at"}
                 and all(isinstance(v, dict) and set(v) == {"S"} and isinstance(v["S"], str) for v in key.values())
                 and key["tenant_id"]["S"] == tenant)
    except (ValueError, binascii.Error, RecursionError):
        valid = False
    if not valid or not isinstance(key, dict):
        raise Problem(400, "Bad request", "the cursor is not one this API returned for this tenant")
    return key


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response[str]:
    principal = _principal()
    job_id = _job_id(job_id)
    scope = _tenant_scope(principal)
    deployment = Deployment.from_environment()
    view = deployment.status_view.get(job_id)  # read consistently: never older than an answer before
    if view is not None and scope is not None and view.tenant_id != scope:
        raise not_found(job_id)
    now = system_clock()
    lag = _view_lag(deployment, now)
    if view is not None:
        return _json(200, JobStatus.of_view(view, freshness_of(view.occurred_at, lag, now)))
    # Not in the view yet: the job row only says whether the job exists (JobNotFound: a 404), never its
    # status, which the view may show older a moment later.
    deployment.job_store.get(job_id, scope)
    return _json(200, PendingJob(job_id=job_id, view=lag))


@app.get("/jobs/<job_id>/runs")
def job_runs(job_id: str) -> Response[str]:
    principal = _principal()
    runs = Deployment.from_environment().job_store.runs(_job_id(job_id), _tenant_scope(principal))
    return _json(200, Runs(job_id=job_id, runs=[RunRecord.of(run) for run in runs]))


@app.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response[str]:
    principal = _principal()
    outcome = Deployment.from_environment().job_store.cancel(_job_id(job_id), _tenant_scope(principal))
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
    store = Deployment.from_environment().job_store
    store.get(_job_id(job_id), _tenant_scope(principal))  # bound to a tenant: only that tenant's jobs
    job = store.replay(job_id)
    return _json(202, Accepted(job_id=job.job_id, status=job.state, version=job.version))


# --- error mapping ----------------------------------------------------------------------------------------------

ProblemHandler = TypeVar("ProblemHandler", bound=Callable[[Any], Response[str]])


def _handles(error_class: type[Exception]) -> Callable[[ProblemHandler], ProblemHandler]:
    """`app.exception_handler(error_class)`, typed (Powertools leaves it unannotated): registers the
    decorated function as the answer to `error_class` and returns it unchanged."""
    register: Callable[[ProblemHandler], ProblemHandler] = app.exception_handler(error_class)
    return register


@_handles(Problem)
def _problem(error: Problem) -> Response[str]:
    return error.response()


@_handles(JobNotFound)
def _job_not_found(error: JobNotFound) -> Response[str]:
    return not_found(str(error.args[0]) if error.args else "").response()


@_handles(IdempotencyConflict)
def _idempotency_conflict(error: IdempotencyConflict) -> Response[str]:
    return Problem(409, "Idempotency conflict",
                   "this Idempotency-Key was already used for a different request",
                   slug="idempotency-conflict").response()


@_handles(NotReplayable)
def _not_replayable(error: NotReplayable) -> Response[str]:
    return Problem(409, "Not replayable", str(error), slug="not-replayable").response()


@_handles(PayloadTooLarge)
def _payload_too_large(error: PayloadTooLarge) -> Response[str]:
    return Problem(413, "Payload too large", str(error)).response()


@_handles(InvalidRequest)
def _invalid(error: InvalidRequest) -> Response[str]:
    return Problem(400, "Bad request", str(error)).response()


@_handles(StoreContention)
def _contention(error: StoreContention) -> Response[str]:
    return Problem(503, "Busy", "the job is contended; retry shortly", headers={"Retry-After": "1"}).response()


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

"""What every route reads from its request: the caller (authenticated by the ApiDeployment's authenticator) and
the tenants it may see (`tenant_scope`, the one scoping rule), the query's parameters, the path's job id, a
listing's cursor and the JSON body, each refused at the edge as application/problem+json (onward.api.answers).

The request is the one the resolver is answering: Powertools keeps it on a class attribute that `resolve()` sets
(BaseRouter.current_event), which every router reads.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from pydantic import ValidationError

from onward.api import cursors
from onward.api.answers import Problem, not_found
from onward.api.auth import NoTenant, Principal
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.documents import parse_json_float
from onward.domain.states import JobState
from onward.domain.text_patterns import JOB_ID, JOB_ID_PREFIX, JOB_TYPE, TENANT_ID
from onward.pipeline.view import JobFilter

MAX_BODY_BYTES = 256 * 1024
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
Start = TypeVar("Start")  # where a listing starts, as its store reads it back from a cursor

# A router of no resolver: its current_event is the class attribute the resolver sets for each request.
_requests = new_router()


def current_event() -> APIGatewayProxyEventV2:
    """The request being answered."""
    return _requests.current_event


def caller() -> Principal:
    """Who sent the request: 401 without a credential, 403 for a verified one of no tenant and no operator role."""
    try:
        principal = ApiDeployment.from_environment().authenticator.authenticate(current_event().raw_event)
    except NoTenant as refusal:  # a verified token of no tenant and no operator role
        raise Problem(403, "Forbidden", str(refusal), slug="no-tenant") from None
    if principal is None:
        raise Problem(401, "Unauthorized", "send Authorization: Bearer <token>",
                      headers={"WWW-Authenticate": 'Bearer realm="onward"'})
    return principal


def tenant_scope(principal: Principal, asked: str | None = None) -> str | None:
    """The one scoping rule of every route: the tenant whose jobs this request may see or change. A tenant's
    credential (a tenant token, or an operator bound to a tenant) is confined to its tenant: asking for
    another one is refused, never silently widened or narrowed. Only an operator bound to no tenant may name
    any tenant (`asked`), and without one it is not confined (None)."""
    if principal.tenant_id is None:
        return asked
    if asked is not None and asked != principal.tenant_id:
        raise Problem(403, "Forbidden", "this credential is confined to its own tenant", slug="other-tenant")
    return principal.tenant_id


def operator_caller() -> Principal:
    """The caller, if an operator (403 otherwise)."""
    principal = caller()
    if not principal.operator:
        raise Problem(403, "Forbidden", "this is for operators", slug="operators-only")
    return principal


def platform_operator() -> Principal:
    """The caller, if an operator bound to no tenant: what this answers is every tenant's (403 otherwise)."""
    principal = operator_caller()
    if principal.tenant_id is not None:
        raise Problem(403, "Forbidden", "this shows every tenant's data: it needs an operator credential bound "
                      "to no tenant", slug="other-tenant")
    return principal


def query_parameters() -> dict[str, str]:
    return dict(current_event().query_string_parameters or {})


def asked_tenant(query: Mapping[str, str]) -> str | None:
    """?tenant=, if given (400 unless it is a tenant id)."""
    asked = query.get("tenant")
    if asked is not None and not TENANT_ID.matches(asked):
        raise Problem(400, "Bad request", f"{asked!r} is not a tenant id")
    return asked


def page_limit(query: Mapping[str, str], default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """?limit=, from 1 to `maximum` (400 otherwise)."""
    try:
        limit = int(query.get("limit", default))
    except ValueError:
        limit = 0
    if not 1 <= limit <= maximum:
        raise Problem(400, "Bad request", f"limit is an integer from 1 to {maximum}")
    return limit


def asked_job_type(query: Mapping[str, str]) -> str | None:
    """?type=, if given (400 unless it is a job type's name)."""
    job_type = query.get("type")
    if job_type is not None and not JOB_TYPE.matches(job_type):
        raise Problem(400, "Bad request", f"{job_type[:130]!r} is not a job type (dotted lower-case names)")
    return job_type


def job_filter(query: Mapping[str, str]) -> JobFilter:
    """?status= (one or a comma list), ?type=, ?id_prefix= as a JobFilter; 400 for a value none could match."""
    statuses: frozenset[str] = frozenset()
    if "status" in query:
        statuses = frozenset(query["status"].split(","))
        unknown = sorted(statuses - {state.value for state in JobState})
        if unknown:
            raise Problem(400, "Bad request", f"unknown status {unknown[0]!r}; known: "
                          + ", ".join(state.value for state in JobState))
    job_type = asked_job_type(query)
    id_prefix = query.get("id_prefix")
    if id_prefix is not None and not JOB_ID_PREFIX.matches(id_prefix):
        raise Problem(400, "Bad request", "id_prefix is 1 to 32 lower-case hexadecimal digits (a job id or its "
                      "beginning)")
    return JobFilter(statuses, job_type, id_prefix)


def well_formed_job_id(job_id: str) -> str:
    """The path's job id; one that no job can have is answered as a missing job (404)."""
    if not JOB_ID.matches(job_id):
        raise not_found(job_id)
    return job_id


def cursor_start(cursor: str, start_of: Callable[[object], Start | None]) -> Start:
    """Where a listing starts from its cursor (onward.api.cursors): the position it holds as `start_of` reads
    it back for the listing and its tenant; 400 for a cursor this API did not return for them."""
    try:
        start = start_of(cursors.decode_cursor(cursor))
    except cursors.InvalidCursor as error:
        raise Problem(400, "Bad request", str(error)) from None
    if start is None:
        raise Problem(400, "Bad request", "the cursor is not one this API returned for this tenant")
    return start


def json_body() -> Any:
    """The request's JSON body: 415 unless it is declared JSON, 413 over MAX_BODY_BYTES, 400 unless it is
    JSON that can be stored (no NaN or Infinity, no nesting that exhausts the parser). A number a float cannot
    hold (1e-400) is read as its Decimal, for the models to refuse by its own value rather than keep its 0.0."""
    event = current_event()
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


def invalid_body(error: ValidationError, where: tuple[str | int, ...] = ()) -> Problem:
    """A 422 naming each place of the body that does not match its model, and why (`where`: the place of the
    part that was validated, e.g. ("jobs", 3) for a batch's entry)."""
    errors = [{"loc": [*where, *e["loc"]], "msg": e["msg"].removeprefix("Value error, "), "type": e["type"]}
              for e in error.errors(include_input=False, include_url=False)]
    shown = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors[:3])
    return Problem(422, "Invalid request", f"the body does not match the schema: {shown}", slug="validation",
                   extra={"errors": errors})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and not a number DynamoDB can store)")

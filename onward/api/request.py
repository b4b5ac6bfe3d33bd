"""What the routes share about a request: who is calling (authenticated by the ApiDeployment's authenticator) and
the tenants it may see (`tenant_scope`, the one scoping rule), the query parameters several routes take (typed:
the resolver validates them and documents them), a listing's cursor, and how a request the resolver or a model
refuses is answered (`invalid_request`, `invalid_body`: application/problem+json, onward.api.answers).

The request is the one the resolver is answering: Powertools keeps it on a class attribute that `resolve()` sets
(BaseRouter.current_event), which every router reads. The callers' checks here are the routes' dependencies
(`Depends`), resolved before the request's shape is validated (onward.api.routing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from pydantic import ValidationError

from onward.api import cursors
from onward.api.answers import Problem, no_such_file, not_found, schedule_not_found
from onward.api.auth import NoTenant, Principal
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock
from onward.domain.models import TenantId
from onward.domain.states import JobState
from onward.domain.text_patterns import TENANT_ID

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
Start = TypeVar("Start")  # where a listing starts, as its store reads it back from a cursor

# The query parameters of more than one route.
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="at most this many")]
AskedTenant = Annotated[TenantId | None, Query(alias="tenant", description=(
    "operators not bound to a tenant name the tenant; any other credential may only name its own (403 otherwise)"))]
Cursor = Annotated[str | None, Query(max_length=cursors.MAX_CURSOR_CHARS, description=(
    "opaque; the `cursor` of the previous page (filters are not in it: send the same ones)"))]

# What each query parameter may be, as a 400 says it (Powertools' own words name a regular expression).
QUERY_RULES = {
    "limit": f"limit is an integer from 1 to {MAX_LIMIT}",
    "status": "status is one or a comma list of " + ", ".join(state.value for state in JobState),
    "type": "type is a job type's name (dotted lower-case names)",
    "id_prefix": "id_prefix is 1 to 32 lower-case hexadecimal digits (a job id or its beginning)",
    "source": "source is projector or relay",
    "cursor": "the cursor is not one this API returned for this tenant",
    "tenant": "tenant is a tenant id",
    # tags (issue 38)
    "tag": "tag is one key:value (a key: 1 to 32 of a-z 0-9 _ . - starting with a letter; a value: 1 to 64 of "
           "A-Z a-z 0-9 _ . : / @ + -); one tag per request",
}

# A path parameter no resource can have is answered as a missing one of its area (404), as before the resolver
# validated paths: nothing tells a malformed name from an unknown one.
MISSING_IN_AREA: dict[str, Callable[[str], Problem]] = {"jobs": not_found, "schedules": schedule_not_found,
                                                        "web": no_such_file,
                                                        # completion webhooks (issue 38)
                                                        "webhooks": lambda webhook_id: Problem(
                                                            404, "Not found", f"no webhook {webhook_id!r}",
                                                            slug="webhook-not-found")}

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
    if principal.tenant_id is not None:
        _within_quota(principal.tenant_id)
    return principal


QUOTA_COUNTED = "onward.quota_counted"  # marks a request already counted (a route may resolve its caller twice)


def _within_quota(tenant_id: str) -> None:
    """429 with Retry-After when the tenant is over its request quota (onward.api.quota); a request counts once."""
    event = current_event().raw_event
    if event.get(QUOTA_COUNTED):
        return
    refusal = ApiDeployment.from_environment().request_allowances.admit(tenant_id, system_clock())
    if refusal is not None:
        raise Problem(429, "Too many requests", f"this tenant's requests are over its quota of "
                      f"{refusal.per_second:g} a second; retry after {refusal.retry_after_s} s",
                      slug="request-quota", headers={"Retry-After": str(refusal.retry_after_s)})
    event[QUOTA_COUNTED] = True


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


def _operator(refusal: Problem) -> Principal:
    """The caller, if an operator; `refusal` otherwise."""
    principal = caller()
    if not principal.operator:
        raise refusal
    return principal


def operator_caller() -> Principal:
    """The caller, if an operator (403 otherwise)."""
    return _operator(Problem(403, "Forbidden", "this is for operators", slug="operators-only"))


def replaying_operator() -> Principal:
    """The caller, if an operator (403 otherwise): replay is an operator's."""
    return _operator(Problem(403, "Forbidden", "replay is for operators"))


def platform_operator() -> Principal:
    """The caller, if an operator bound to no tenant: what this answers is every tenant's (403 otherwise)."""
    principal = operator_caller()
    if principal.tenant_id is not None:
        raise Problem(403, "Forbidden", "this shows every tenant's data: it needs an operator credential bound "
                      "to no tenant", slug="other-tenant")
    return principal


def asked_tenant() -> str | None:
    """?tenant=, if given (400 unless it is a tenant id): read by a route's dependency, which decides the tenant
    before the resolver validates the rest of the request (the route declares it as AskedTenant)."""
    asked = (current_event().query_string_parameters or {}).get("tenant")
    if asked is not None and not TENANT_ID.matches(asked):
        raise Problem(400, "Bad request", f"{asked!r} is not a tenant id")
    return asked


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


# What pydantic says of a body that is JSON but not an object ([], "text", 3; null reads as no body): a model's
# own validator also answers at the body's place, with the reason it gives.
NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type", "missing"})


def invalid_request(errors: Sequence[Mapping[str, Any]], path_arguments: Mapping[str, str], path: str) -> Problem:
    """The answer to a request the resolver refused (Powertools' RequestValidationError): a path parameter no
    resource can have is a missing resource (404), a bad query parameter a 400, and a body that does not
    match its model a 422 naming each place, as `invalid_body`."""
    where = {str(error["loc"][0]) for error in errors}
    if "path" in where:
        name = next(str(error["loc"][1]) for error in errors if error["loc"][0] == "path")
        return MISSING_IN_AREA.get(path.split("/")[1], not_found)(path_arguments.get(name, ""))
    if "body" not in where:
        return Problem(400, "Bad request", "; ".join(dict.fromkeys(_query_refusal(error) for error in errors[:3])))
    refused = field_errors([{**error, "loc": error["loc"][1:]} for error in errors if error["loc"][0] == "body"])
    if any(tuple(error["loc"]) == ("body",) and error["type"] in NOT_AN_OBJECT for error in errors):
        return Problem(422, "Invalid request", "the body must be a JSON object", slug="validation", extra=refused.extra)
    return refused


def invalid_body(error: ValidationError, where: tuple[str | int, ...] = ()) -> Problem:
    """A 422 naming each place of a body (or `where`: the place of the part that was validated, e.g. ("jobs", 3)
    for a batch's entry) that does not match its model, and why."""
    return field_errors(error.errors(include_input=False, include_url=False), where)


def field_errors(errors: Sequence[Mapping[str, Any]], where: tuple[str | int, ...] = ()) -> Problem:
    """A 422 naming each place of the body that does not match its model, and why."""
    listed = [{"loc": [*where, *e["loc"]], "msg": _message(e), "type": e["type"]} for e in errors]
    shown = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in listed[:3])
    return Problem(422, "Invalid request", f"the body does not match the schema: {shown}", slug="validation",
                   extra={"errors": listed})


def _query_refusal(error: Mapping[str, Any]) -> str:
    """One refused query parameter: its rule (QUERY_RULES) and the value given."""
    name = str(error["loc"][1])
    rule = QUERY_RULES.get(name, f"{name}: {_message(error)}")
    given = _given(error) if name != "cursor" else ""  # a cursor is opaque: its text says nothing to a caller
    return f"{rule}; given{given}" if given else rule


def _given(error: Mapping[str, Any]) -> str:
    """The value a query parameter was given, as a 400 names it (its first 130 characters)."""
    given = error.get("input")
    return f" {given[:130]!r}" if isinstance(given, str) else ""


def _message(error: Mapping[str, Any]) -> str:
    return str(error["msg"]).removeprefix("Value error, ")

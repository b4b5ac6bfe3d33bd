"""The rate limit routes (/rate-limits, issue 37): a tenant's limits, set, read, listed and removed; claims
enforce them (onward.store.rate_limits, docs/flow-control.md)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Path

from onward.api.answers import NO_STORE, Problem, json_answer
from onward.api.contract.rate_limits import KEY_DESCRIPTION, RateLimitBody, RateLimitInfo, RateLimits
from onward.api.openapi import NOT_JSON, SECURED, ok, problem, secured
from onward.api.request import AskedTenant, asked_tenant, caller, tenant_scope
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.rate_limits import key_problem
from onward.domain.text_patterns import RATE_LIMIT_KEY

router = new_router()

OTHER_TENANT = problem("a tenant's credential named another tenant")
RateLimitKeyPath = Annotated[str, Path(pattern=RATE_LIMIT_KEY.anchored, max_length=128, description=KEY_DESCRIPTION)]
PUT_DESCRIPTION = (
    "At most `limit` jobs of the tenant start per `period_s` seconds on this key (GCRA: a burst of `limit` at once "
    "from an idle bucket, then one per period_s / limit). A job is subject to its own key's limit "
    "(`rate_limit_key`), its type's (`type:<job type>`) and its tenant's (`tenant`); a job without a token waits "
    "for the one it reserved, holding no worker (explain: rate_limited). A change applies to claims within "
    "seconds; jobs that reserved a token keep its moment.")


def rate_limit_tenant() -> str:
    """The tenant whose limits a request is about: the credential's, or the ?tenant= of an operator bound to no
    tenant."""
    tenant = tenant_scope(caller(), asked_tenant())
    if tenant is None:
        raise Problem(400, "Bad request", "an operator names the tenant whose rate limits these are: pass ?tenant=")
    return tenant


def _checked(key: str) -> str:
    problem_text = key_problem(key)
    if problem_text is not None:
        raise Problem(422, "Invalid request", problem_text, slug="invalid-request",
                      extra={"errors": [{"loc": ["path", "key"], "msg": problem_text, "type": "value_error"}]})
    return key


def _not_found(key: str) -> Problem:
    return Problem(404, "Not found", f"no rate limit {key!r}", slug="rate-limit-not-found")


@router.put("/rate-limits/<key>", operation_id="putRateLimit", security=SECURED, description=PUT_DESCRIPTION,
            responses=secured({
                200: ok("the limit as set", RateLimitInfo),
                400: problem("malformed JSON, a bad ?tenant=, or an operator without ?tenant="),
                403: OTHER_TENANT,
                415: NOT_JSON,
                422: problem("unknown fields, a bad key, limit or period_s; `errors` lists each place and why")}))
def put_rate_limit(tenant_id: Annotated[str, Depends(rate_limit_tenant)], key: RateLimitKeyPath,
                   request: RateLimitBody, asked: AskedTenant = None) -> Response[str]:
    """Set (add or replace) one of the tenant's limits."""
    store = ApiDeployment.from_environment().job_store
    definition = store.rate_limits.put(tenant_id, _checked(key), request.limit, float(request.period_s))
    return json_answer(200, RateLimitInfo.of(tenant_id, definition))


@router.get("/rate-limits/<key>", operation_id="getRateLimit", security=SECURED, responses=secured({
    200: ok("the limit", RateLimitInfo),
    400: problem("bad tenant, or an operator without ?tenant="),
    403: OTHER_TENANT,
    404: problem("no limit of this key for this tenant")}))
def get_rate_limit(tenant_id: Annotated[str, Depends(rate_limit_tenant)], key: RateLimitKeyPath,
                   asked: AskedTenant = None) -> Response[str]:
    found = ApiDeployment.from_environment().job_store.rate_limits.get(tenant_id, key)
    if found is None:
        raise _not_found(key)
    return json_answer(200, RateLimitInfo.of(tenant_id, found))


@router.get("/rate-limits", operation_id="listRateLimits", security=SECURED, responses=secured({
    200: ok("the tenant's limits by key", RateLimits),
    400: problem("bad tenant, or an operator without ?tenant="),
    403: OTHER_TENANT}))
def list_rate_limits(tenant_id: Annotated[str, Depends(rate_limit_tenant)],
                     asked: AskedTenant = None) -> Response[str]:
    found = ApiDeployment.from_environment().job_store.rate_limits.list(tenant_id)
    return json_answer(200, RateLimits(rate_limits=[RateLimitInfo.of(tenant_id, each) for each in found]))


@router.delete("/rate-limits/<key>", operation_id="deleteRateLimit", security=SECURED, responses=secured({
    204: {"description": "deleted: claims stop counting it within seconds; jobs that reserved a token keep its "
                         "moment"},
    400: problem("bad tenant, or an operator without ?tenant="),
    403: OTHER_TENANT,
    404: problem("no limit of this key for this tenant")}))
def delete_rate_limit(tenant_id: Annotated[str, Depends(rate_limit_tenant)], key: RateLimitKeyPath,
                      asked: AskedTenant = None) -> Response[str]:
    if not ApiDeployment.from_environment().job_store.rate_limits.delete(tenant_id, key):
        raise _not_found(key)
    return Response(204, None, None, headers=NO_STORE)

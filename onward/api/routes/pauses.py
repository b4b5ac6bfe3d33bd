"""Pause, resume and the drain switch (issue 37, item 4; onward.store.pauses): an operator pauses a tenant, a type
of every tenant, or one tenant's type (/ops/pause, /ops/resume, /ops/pauses) and turns the drain switch
(/ops/drain); a tenant pauses its own jobs, all or one type (/pause, /resume, /pauses). An operator bound to a
tenant acts only on that tenant (onward.api.request.tenant_scope): a type alone is then its tenant's type."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from onward.api.answers import Problem, json_answer
from onward.api.auth import Principal
from onward.api.contract.pauses import (
    TAKES_EFFECT_S,
    DrainRequest,
    DrainState,
    OperatorPauseRequest,
    PauseChange,
    Pauses,
    PauseShown,
    TenantPauseRequest,
)
from onward.api.openapi import (
    BODY_TOO_LARGE,
    EVERY_TENANT,
    NOT_JSON,
    OPERATORS_ONLY,
    SECURED,
    ok,
    problem,
    secured,
)
from onward.api.request import caller, operator_caller, platform_operator, tenant_scope
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.pauses import Pause
from onward.store.held_jobs import Released
from onward.store.pauses import FlowControl, TooManyPauses

RELEASE_BUDGET_S = 20.0  # a resume puts held jobs back for at most this (the function's timeout is 29 s)

router = new_router()


def _answers(done: str, forbidden: str) -> dict[int, OpenAPIResponse]:
    return secured({
        200: ok(done, PauseChange), 400: problem("malformed JSON"), 403: problem(forbidden), 413: BODY_TOO_LARGE,
        415: NOT_JSON, 422: problem("a field that is not a tenant id or a job type, an unknown field, or neither "
                                    "tenant nor type named (/ops/...): nothing changed"),
        409: problem("the most pauses in force at once are in force: resume some first")})


def _flow() -> FlowControl:
    return ApiDeployment.from_environment().job_store.flow


def _own_tenant(principal: Principal) -> str:
    """The caller's tenant (an operator bound to none has no jobs of its own: it uses /ops/...)."""
    scope = tenant_scope(principal)
    if scope is None:
        raise Problem(403, "Forbidden", "this acts on the caller's own tenant: an operator bound to no tenant "
                      "uses /ops/pause and /ops/resume", slug="no-own-tenant")
    return scope


def _operator_pause(principal: Principal, asked: OperatorPauseRequest) -> Pause:
    tenant = tenant_scope(principal, asked.tenant)
    if tenant is None and asked.type is None:
        raise Problem(422, "Invalid request", "the body does not match the schema: tenant: name a tenant, a type, "
                      "or both", slug="validation", extra={"errors": [{
                          "loc": ["tenant"], "msg": "name a tenant, a type, or both", "type": "missing"}]})
    return Pause(tenant, asked.type)


def _changed(pause: Pause, pausing: bool) -> Response[str]:
    flow = _flow()
    released = Released(0, more=False)
    try:
        if pausing:
            changed = flow.pause(pause)
        else:
            changed, released = flow.resume_and_release(pause, budget_s=RELEASE_BUDGET_S)
    except TooManyPauses as error:
        raise Problem(409, "Conflict", str(error), slug="too-many-pauses") from error
    return json_answer(200, PauseChange(pause=PauseShown.of(pause), in_force=pausing, changed=changed,
                                        takes_effect_within_s=TAKES_EFFECT_S, released=released.released,
                                        more=released.more))


@router.post("/ops/pause", operation_id="operatorPause", security=SECURED, responses=_answers(
    "the pause in force: nothing new of it starts once every worker process saw it (within takes_effect_within_s); "
    "running attempts finish, waiting jobs keep their state and place",
    "not an operator, or an operator bound to another tenant"))
def operator_pause(principal: Annotated[Principal, Depends(operator_caller)], asked: OperatorPauseRequest
                   ) -> Response[str]:
    """Pause a tenant, a type of every tenant, or one tenant's type."""
    return _changed(_operator_pause(principal, asked), pausing=True)


@router.post("/ops/resume", operation_id="operatorResume", security=SECURED, responses=_answers(
    "the pause lifted: its jobs start again in their order (a tenant resumed is lifted to the fair-share clock: it "
    "neither banks credit nor owes for the pause; a type's jobs held aside are put back with their due times, for "
    "at most 20 s a call: `more`, call again)", "not an operator, or an operator bound to another tenant"))
def operator_resume(principal: Annotated[Principal, Depends(operator_caller)], asked: OperatorPauseRequest
                    ) -> Response[str]:
    """Lift a pause, named as it was paused."""
    return _changed(_operator_pause(principal, asked), pausing=False)


@router.get("/ops/pauses", operation_id="operatorPauses", security=SECURED, responses=secured({
    200: ok("every pause in force (an operator bound to a tenant: those that hold its jobs) and the drain switch",
            Pauses), 403: OPERATORS_ONLY}))
def operator_pauses(principal: Annotated[Principal, Depends(operator_caller)]) -> Response[str]:
    """What is paused, read now."""
    return json_answer(200, Pauses.of(_flow().current(), tenant_scope(principal)))


@router.post("/ops/drain", operation_id="drainSwitch", security=SECURED, responses=secured({
    200: ok("the drain switch as set: on, no claim starts a job anywhere (within takes_effect_within_s); running "
            "attempts finish and report", DrainState),
    400: problem("malformed JSON"), 403: EVERY_TENANT, 413: BODY_TOO_LARGE, 415: NOT_JSON,
    422: problem("`on` missing or not a boolean, or an unknown field")}))
def drain_switch(_: Annotated[Principal, Depends(platform_operator)], asked: DrainRequest) -> Response[str]:
    """Turn the platform's drain switch on or off (for maintenance)."""
    changed = _flow().set_draining(asked.on)
    return json_answer(200, DrainState(draining=asked.on, changed=changed, takes_effect_within_s=TAKES_EFFECT_S))


@router.post("/pause", operation_id="tenantPause", security=SECURED, responses=_answers(
    "the pause of the caller's jobs (one type, or all) in force", "an operator bound to no tenant"))
def tenant_pause(principal: Annotated[Principal, Depends(caller)], asked: TenantPauseRequest) -> Response[str]:
    """Pause the caller's own jobs: one type, or every job of its tenant."""
    return _changed(Pause(_own_tenant(principal), asked.type), pausing=True)


@router.post("/resume", operation_id="tenantResume", security=SECURED, responses=_answers(
    "the pause of the caller's jobs lifted", "an operator bound to no tenant"))
def tenant_resume(principal: Annotated[Principal, Depends(caller)], asked: TenantPauseRequest) -> Response[str]:
    """Lift a pause of the caller's own jobs, named as it was paused."""
    return _changed(Pause(_own_tenant(principal), asked.type), pausing=False)


@router.get("/pauses", operation_id="tenantPauses", security=SECURED, responses=secured({
    200: ok("the pauses that hold the caller's jobs (its own, and types paused for every tenant) and the drain "
            "switch", Pauses), 403: problem("an operator bound to no tenant")}))
def tenant_pauses(principal: Annotated[Principal, Depends(caller)]) -> Response[str]:
    """What holds the caller's jobs, read now."""
    return json_answer(200, Pauses.of(_flow().current(), _own_tenant(principal)))

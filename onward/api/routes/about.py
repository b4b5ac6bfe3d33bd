"""The API's own routes: its health, who the caller is, how far behind the status view may be, and its OpenAPI
document."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends

from onward.api.answers import json_answer
from onward.api.auth import Principal
from onward.api.contract.common import Caller, Health
from onward.api.core import view_lag_now
from onward.api.failover_gate import refusal_now
from onward.api.openapi import SECURED, ok, secured
from onward.api.request import caller
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock
from onward.domain.models import ViewLag
from onward.runtime.authority import authority_now

router = new_router()


@router.get("/health", operation_id="health", responses={200: ok("the API answers", Health)})
def health() -> Response[str]:
    """200 while the API answers; `authority` says whether this Region is home (issue 39), `writes` whether writes
    are refused while a failover to this Region adopts the old home's jobs."""
    deployment = ApiDeployment.from_environment()
    lease = deployment.authority_lease() if deployment.environ.get("ONWARD_WITNESS") else None
    try:
        refused = refusal_now(deployment)
    except Exception as error:  # noqa: BLE001 - /health answers 200 while the API answers (Route 53 reads it)
        return json_answer(200, Health(authority=authority_now(lease).value, writes="unknown",
                                       writes_refused_because=f"the region epoch item could not be read: {error}"))
    return json_answer(200, Health(authority=authority_now(lease).value, writes="refused" if refused else "accepted",
                                   writes_refused_because=refused.detail() if refused else None))


@router.get("/openapi.json", operation_id="openapi", responses={200: {
    "description": "this document", "content": {"application/json": {"schema": {"type": "object"}}}}})
def openapi() -> Response[str]:
    from onward.api.app import openapi_document

    return json_answer(200, openapi_document(ApiDeployment.from_environment().job_types))


@router.get("/whoami", operation_id="whoami", security=SECURED,
            responses=secured({200: ok("the tenant and role of this credential", Caller)}))
def whoami(principal: Annotated[Principal, Depends(caller)]) -> Response[str]:
    """Who this credential is, so a page knows what to offer (an operator's views, creating jobs)."""
    return json_answer(200, Caller(tenant_id=principal.tenant_id, operator=principal.operator))


@router.get("/view", operation_id="viewLag", security=SECURED,
            responses=secured({200: ok("how far behind the status view may be right now", ViewLag)}))
def view_health(_: Annotated[Principal, Depends(caller)]) -> Response[str]:
    """How far behind the status view may be right now (any valid credential)."""
    return json_answer(200, view_lag_now(ApiDeployment.from_environment(), system_clock()))

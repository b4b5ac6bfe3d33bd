"""The API's own routes: its health, who the caller is, how far behind the status view may be, and its OpenAPI
document."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from onward.api.answers import json_answer
from onward.api.contract.common import Caller, Health
from onward.api.core import view_lag_now
from onward.api.request import caller
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock

router = new_router()


@router.get("/health")
def health() -> Response[str]:
    return json_answer(200, Health())


@router.get("/openapi.json")
def openapi() -> Response[str]:
    from onward.api.openapi import document

    return json_answer(200, document(ApiDeployment.from_environment().job_types))


@router.get("/whoami")
def whoami() -> Response[str]:
    """Who this credential is, so a page knows what to offer (an operator's views, creating jobs)."""
    principal = caller()
    return json_answer(200, Caller(tenant_id=principal.tenant_id, operator=principal.operator))


@router.get("/view")
def view_health() -> Response[str]:
    """How far behind the status view may be right now (any valid credential)."""
    caller()
    return json_answer(200, view_lag_now(ApiDeployment.from_environment(), system_clock()))

"""The schedule routes (/schedules): a tenant's periodic jobs (onward.domain.schedules, fired by
onward.maintenance.scheduler), created, listed and deleted."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from pydantic import ValidationError

from onward.api import cursors
from onward.api.answers import NO_STORE, Problem, json_answer
from onward.api.auth import Principal
from onward.api.contract.schedules import ScheduleInfo, Schedules
from onward.api.core import refuse_unknown_job_type
from onward.api.request import (
    asked_tenant,
    caller,
    cursor_start,
    invalid_body,
    json_body,
    page_limit,
    query_parameters,
    tenant_scope,
)
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock
from onward.domain.schedules import NewSchedule, Schedule
from onward.domain.text_patterns import SCHEDULE_NAME
from onward.store.schedules import MAX_SCHEDULES_PER_TENANT, AddOutcome, name_after

router = new_router()


def _schedule_tenant(principal: Principal) -> str:
    """The tenant whose schedules a request is about: the credential's, or the ?tenant= of an operator bound to
    no tenant."""
    tenant = tenant_scope(principal, asked_tenant(query_parameters()))
    if tenant is None:
        raise Problem(400, "Bad request", "an operator names the tenant whose schedules these are: pass ?tenant=")
    return tenant


@router.post("/schedules")
def create_schedule() -> Response[str]:
    """A periodic job: 201 with its next fire time; 409 when the tenant has a schedule of that name, or
    MAX_SCHEDULES_PER_TENANT of them (decided by the store's write: onward.store.schedules); 413 for params over
    MAX_SCHEDULE_PARAMS_BYTES."""
    tenant_id = _schedule_tenant(caller())
    try:
        request = NewSchedule.model_validate(json_body())
    except ValidationError as error:
        raise invalid_body(error) from error
    deployment = ApiDeployment.from_environment()
    refuse_unknown_job_type(deployment, request.type)
    schedule = Schedule.of(tenant_id, request, system_clock())
    outcome = deployment.schedules.add(schedule)
    if outcome is AddOutcome.TOO_MANY:
        raise Problem(409, "Too many schedules", f"a tenant keeps at most {MAX_SCHEDULES_PER_TENANT} schedules; "
                      "delete one first", slug="too-many-schedules")
    if outcome is AddOutcome.NAME_TAKEN:
        raise Problem(409, "Schedule exists", f"this tenant has a schedule named {request.name!r}; delete it first",
                      slug="schedule-exists")
    return json_answer(201, ScheduleInfo.of(schedule))


@router.get("/schedules")
def list_schedules() -> Response[str]:
    """A page of the tenant's schedules by name (?limit=, 20 by default, at most 100), with the cursor of the
    next page (?cursor=) while there are more."""
    tenant_id = _schedule_tenant(caller())
    query = query_parameters()
    limit = page_limit(query)
    cursor = query.get("cursor")
    after = cursor_start(cursor, lambda position: name_after(position, tenant_id)) if cursor else None
    if after is not None and not SCHEDULE_NAME.matches(after):
        raise Problem(400, "Bad request", "the cursor is not one this API returned for this tenant")
    found = ApiDeployment.from_environment().schedules.page(tenant_id, limit, after)
    more = None if found.after is None else cursors.schedule_cursor(tenant_id, found.after)
    return json_answer(200, Schedules(schedules=[ScheduleInfo.of(schedule) for schedule in found.schedules],
                                      cursor=more))


@router.delete("/schedules/<name>")
def delete_schedule(name: str) -> Response[str]:
    """204 once the schedule is gone (a tick already under way may still create the one fire it read); 404 when
    there is none."""
    tenant_id = _schedule_tenant(caller())
    if not (SCHEDULE_NAME.matches(name) and ApiDeployment.from_environment().schedules.remove(tenant_id, name)):
        raise Problem(404, "Not found", f"no schedule {name!r}", slug="schedule-not-found")
    return Response(204, None, None, headers=NO_STORE)

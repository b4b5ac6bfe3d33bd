"""The schedule routes (/schedules): a tenant's periodic jobs (onward.domain.schedules, fired by
onward.maintenance.scheduler), created, listed and deleted."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Path

from onward.api import cursors
from onward.api.answers import NO_STORE, Problem, json_answer, schedule_not_found
from onward.api.contract.schedules import ScheduleInfo, Schedules
from onward.api.core import refuse_unknown_job_type
from onward.api.openapi import NOT_JSON, SECURED, ok, problem, secured
from onward.api.request import (
    DEFAULT_LIMIT,
    AskedTenant,
    Cursor,
    Limit,
    asked_tenant,
    caller,
    cursor_start,
    tenant_scope,
)
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock
from onward.domain.schedules import NewSchedule, Schedule
from onward.domain.text_patterns import SCHEDULE_NAME
from onward.store.schedules import MAX_SCHEDULES_PER_TENANT, AddOutcome, name_after

router = new_router()

OTHER_TENANT = problem("a tenant's credential named another tenant")
CREATE_DESCRIPTION = (
    "A periodic job: each fire creates exactly one job of the tenant (Idempotency-Key "
    "`schedule:<name>:<created_at>:<fire time>`, so two schedulers never double-fire), queued when the fire is due, "
    "never ahead, and claimed in the tenant's fair share like any other. After an outage only the LATEST missed fire "
    "is created (no catch-up storm); the schedule then waits for its next fire. Cron is evaluated on the wall clock "
    "of `timezone`: a time skipped by a daylight-saving jump fires once at the moment it maps to, a time that occurs "
    "twice fires at its first occurrence.")


def schedule_tenant() -> str:
    """The tenant whose schedules a request is about: the credential's, or the ?tenant= of an operator bound to
    no tenant."""
    tenant = tenant_scope(caller(), asked_tenant())
    if tenant is None:
        raise Problem(400, "Bad request", "an operator names the tenant whose schedules these are: pass ?tenant=")
    return tenant


@router.post("/schedules", operation_id="createSchedule", security=SECURED, description=CREATE_DESCRIPTION,
             responses=secured({
                 201: ok("the schedule, with its next fire time", ScheduleInfo),
                 400: problem("malformed JSON, a bad ?tenant=, or an operator without ?tenant="),
                 403: OTHER_TENANT,
                 409: problem("the tenant has a schedule of this name, or 1,000 schedules (delete one first)"),
                 413: problem("the body is over 256 KiB, or `params` over 16 KiB as compact JSON with non-ASCII "
                              "characters escaped"),
                 415: NOT_JSON,
                 422: problem("unknown fields, a bad name, cron, rate or timezone, both cron and rate or neither, or "
                              "an unknown job type; `errors` lists each place and why")}))
def create_schedule(tenant_id: Annotated[str, Depends(schedule_tenant)], request: NewSchedule,
                    asked: AskedTenant = None) -> Response[str]:
    """A periodic job: 201 with its next fire time; 409 when the tenant has a schedule of that name, or
    MAX_SCHEDULES_PER_TENANT of them (decided by the store's write: onward.store.schedules); 413 for params over
    MAX_SCHEDULE_PARAMS_BYTES."""
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


@router.get("/schedules", operation_id="listSchedules", security=SECURED, responses=secured({
    200: ok("a page of the tenant's schedules by name, each with its next fire time, and the `cursor` of the next "
            "page (null: the last)", Schedules),
    400: problem("bad tenant, limit or cursor, or an operator without ?tenant="),
    403: OTHER_TENANT}))
def list_schedules(tenant_id: Annotated[str, Depends(schedule_tenant)], asked: AskedTenant = None,
                   limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response[str]:
    """A page of the tenant's schedules by name (?limit=, 20 by default, at most 100), with the cursor of the
    next page (?cursor=) while there are more."""
    after = cursor_start(cursor, lambda position: name_after(position, tenant_id)) if cursor else None
    if after is not None and not SCHEDULE_NAME.matches(after):
        raise Problem(400, "Bad request", "the cursor is not one this API returned for this tenant")
    found = ApiDeployment.from_environment().schedules.page(tenant_id, limit, after)
    more = None if found.after is None else cursors.schedule_cursor(tenant_id, found.after)
    return json_answer(200, Schedules(schedules=[ScheduleInfo.of(schedule) for schedule in found.schedules],
                                      cursor=more))


@router.delete("/schedules/<name>", operation_id="deleteSchedule", security=SECURED, responses=secured({
    204: {"description": "deleted: it fires no more (a tick already under way may still create the one fire it "
                         "read)"},
    400: problem("bad tenant, or an operator without ?tenant="),
    403: OTHER_TENANT,
    404: problem("no schedule of this name for this tenant")}))
def delete_schedule(tenant_id: Annotated[str, Depends(schedule_tenant)],
                    name: Annotated[str, Path(pattern=SCHEDULE_NAME.anchored)],
                    asked: AskedTenant = None) -> Response[str]:
    """204 once the schedule is gone (a tick already under way may still create the one fire it read); 404 when
    there is none."""
    if not ApiDeployment.from_environment().schedules.remove(tenant_id, name):
        raise schedule_not_found(name)
    return Response(204, None, None, headers=NO_STORE)

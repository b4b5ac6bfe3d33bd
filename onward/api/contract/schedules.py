"""The bodies of the schedule routes (/schedules): a tenant's schedule and a page of them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from onward.api.contract.common import Answer
from onward.domain.clock import iso
from onward.domain.models import (
    JobType,
    TenantId,
)
from onward.domain.schedules import Schedule


class ScheduleInfo(Answer):
    """A tenant's schedule: what it was created with (POST /schedules's body), when, and when it fires next."""

    name: str
    type: JobType
    params: dict[str, Any]
    max_attempts: int | None = None
    priority: int | None = None
    cron: str | None = None
    rate: str | None = None
    timezone: str
    tenant_id: TenantId
    created_at: str
    next_fire_at: str = Field(description="the next fire time (UTC); a fire's job is created when it is due, "
                                          "and after an outage only the latest missed fire is created")

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleInfo:
        return cls(**{**schedule.model_dump(), "created_at": iso(schedule.created_at),
                      "next_fire_at": iso(schedule.next_fire_at)})

class Schedules(Answer):
    schedules: list[ScheduleInfo] = Field(description="a page of the tenant's schedules by name")
    cursor: str | None = Field(description="pass as ?cursor= for the next page; null: this is the last")

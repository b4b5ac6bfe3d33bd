"""The bodies of pause, resume and the drain switch (issue 37, item 4): /ops/pause, /ops/resume, /ops/pauses,
/ops/drain for operators, /pause, /resume, /pauses for a tenant's own jobs."""

from __future__ import annotations

from pydantic import Field

from onward.api.contract.common import Answer
from onward.domain.models import JobType, Request, TenantId
from onward.domain.pauses import FlowSwitches, Pause
from onward.store.pauses import FLOW_CACHE_MS

TAKES_EFFECT_S = FLOW_CACHE_MS / 1000


class OperatorPauseRequest(Request):
    """What to pause or resume: a tenant (every job of it), a type (of every tenant), or both (that tenant's jobs
    of that type); at least one. An operator bound to a tenant names only its own tenant."""

    tenant: TenantId | None = None
    type: JobType | None = None


class TenantPauseRequest(Request):
    """What of the caller's own jobs to pause or resume: one type, or (no type) every job of the tenant."""

    type: JobType | None = None


class DrainRequest(Request):
    on: bool = Field(description="true: claims start nothing anywhere (running attempts finish); false: back to work")


class PauseShown(Answer):
    tenant: TenantId | None = Field(description="null: every tenant")
    type: JobType | None = Field(description="null: every type of the tenant")

    @classmethod
    def of(cls, pause: Pause) -> PauseShown:
        return cls(tenant=pause.tenant_id, type=pause.job_type)


class PauseChange(Answer):
    """A pause or resume as done: `changed` false when the pause already was (or was not) in force."""

    pause: PauseShown
    in_force: bool = Field(description="whether the pause is in force now")
    changed: bool
    takes_effect_within_s: float = Field(description="every worker process sees it within this (its cache)")
    released: int = Field(0, description="a type's resume: its jobs held aside put back in their queues, with "
                                         "their due times (onward.store.held_jobs)")
    more: bool = Field(False, description="jobs are still held (the resume stopped at its time budget): resume "
                                          "again to release the rest")


class Pauses(Answer):
    """The pauses in force (a tenant sees its own and the types paused for every tenant) and the drain switch."""

    pauses: list[PauseShown]
    draining: bool = Field(description="the platform's drain switch: no claim starts a job while it is on")

    @classmethod
    def of(cls, switches: FlowSwitches, tenant_id: str | None) -> Pauses:
        shown = switches.of_tenant(tenant_id) if tenant_id is not None else sorted(
            switches.pauses, key=lambda pause: pause.sides)
        return cls(pauses=[PauseShown.of(pause) for pause in shown], draining=switches.draining)


class DrainState(Answer):
    draining: bool
    changed: bool
    takes_effect_within_s: float

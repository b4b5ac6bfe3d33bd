"""Pauses and the drain switch (issue 37, item 4): what is paused, and whether a job may start now (pure).

A `Pause` names a tenant, a job type, or both: a tenant alone pauses every job of that tenant; a type alone
pauses that type for every tenant; both pause that tenant's jobs of that type. A paused job keeps its state
(queued or retry_wait) and its place: nothing new of it starts, attempts already running finish. The drain
switch pauses everything: no claim starts an attempt while it is on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onward.domain.text_patterns import JOB_TYPE, TENANT_ID

ANY = "*"  # a pause's side that names nothing (every tenant, or every type); neither a tenant id nor a type


@dataclass(frozen=True)
class Pause:
    """A paused tenant (`job_type` None), a paused type of every tenant (`tenant_id` None), or one tenant's type."""

    tenant_id: str | None = None
    job_type: str | None = None

    def __post_init__(self) -> None:
        if self.tenant_id is None and self.job_type is None:
            raise ValueError("a pause names a tenant, a type, or both")
        if self.tenant_id is not None and not TENANT_ID.matches(self.tenant_id):
            raise ValueError(f"invalid tenant id {self.tenant_id!r}")
        if self.job_type is not None and not JOB_TYPE.matches(self.job_type):
            raise ValueError(f"invalid job type {self.job_type!r}")

    def covers(self, tenant_id: str, job_type: str | None) -> bool:
        """Whether a job of `tenant_id` of type `job_type` is paused by this (`job_type` None: the tenant
        as a whole, which only a pause of the whole tenant covers)."""
        if self.tenant_id is not None and self.tenant_id != tenant_id:
            return False
        return self.job_type is None or self.job_type == job_type

    @property
    def sides(self) -> tuple[str, str]:
        """(tenant or ANY, type or ANY): how a store keys it."""
        return self.tenant_id or ANY, self.job_type or ANY

    @classmethod
    def of_sides(cls, tenant: str, job_type: str) -> Pause:
        return cls(None if tenant == ANY else tenant, None if job_type == ANY else job_type)

    def describe(self) -> str:
        if self.job_type is None:
            return f"tenant {self.tenant_id} is paused"
        if self.tenant_id is None:
            return f"type {self.job_type} is paused for every tenant"
        return f"type {self.job_type} of tenant {self.tenant_id} is paused"


@dataclass(frozen=True)
class FlowSwitches:
    """What is paused, and whether the platform drains, as one read found them."""

    pauses: frozenset[Pause] = field(default_factory=frozenset)
    draining: bool = False
    # resumed type pauses whose held jobs are not all back yet (a resume stopped at its budget, or crashed):
    # the reaper's pass finishes them (FlowControl.sweep_unswept)
    unswept: frozenset[Pause] = field(default_factory=frozenset)

    def tenant_paused(self, tenant_id: str) -> bool:
        """Whether every job of the tenant is paused (a pause of the tenant as a whole)."""
        return any(pause.job_type is None and pause.tenant_id == tenant_id for pause in self.pauses)

    def paused_by(self, tenant_id: str, job_type: str) -> Pause | None:
        """The pause that holds a job of this tenant and type (the tenant's own first), None when none does."""
        covering = [pause for pause in self.pauses if pause.covers(tenant_id, job_type)]
        return min(covering, key=lambda pause: (pause.job_type is not None, pause.tenant_id is None), default=None)

    def may_start(self, tenant_id: str, job_type: str) -> bool:
        """Whether a claim may start a job of this tenant and type now."""
        return not self.draining and self.paused_by(tenant_id, job_type) is None

    def types_paused(self) -> bool:
        """Whether any pause names a type (a claim then checks each job's type before it takes it)."""
        return any(pause.job_type is not None for pause in self.pauses)

    def of_tenant(self, tenant_id: str) -> list[Pause]:
        """The pauses that hold any of the tenant's jobs: its own and the types paused for every tenant (what
        the tenant may see: no other tenant's)."""
        return sorted((pause for pause in self.pauses if pause.tenant_id in (None, tenant_id)), key=lambda p: p.sides)

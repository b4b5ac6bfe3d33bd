"""What the answers of every area share: their base model, a refusal's problem details, and the API's own
answers (health, the caller)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict

from onward.domain.models import (
    TenantId,
)
from onward.domain.states import JobState

# A status named in a request: its value ("dead"). Strict(False): strict mode takes only the enum member itself.
StateName = Annotated[JobState, Strict(False)]

class Answer(BaseModel):
    """An answer's body: frozen, and no field but its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

class FieldError(Answer):
    loc: list[str | int]
    msg: str
    type: str

class ProblemDetails(Answer):
    """Every refusal (RFC 9457 problem details)."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = Field(None, description="a 422's places and reasons")
    job_status: JobState | None = Field(None, description="a 409 on cancel: how the job ended")
    # unique jobs (issue 37)
    existing_job_id: str | None = Field(None, description="a 409 on create: the job holding `unique.key`")

class Health(Answer):
    status: Literal["ok"] = "ok"
    # issue 39: whether this Region is home (onward.runtime.authority); always home without a witness
    authority: str = "home"  # home | standby | unconfirmed
    # issue 39's gaps: refused from a failover to this Region until its adoption is done (onward.api.failover_gate)
    writes: Literal["accepted", "refused", "unknown"] = "accepted"  # unknown: the epoch item could not be read
    writes_refused_because: str | None = None

class Caller(Answer):
    """Who the credential is: a tenant's (tenant_id), an operator's (operator), or an operator's bound to a
    tenant (both)."""

    tenant_id: TenantId | None
    operator: bool


# --- operators ---------------------------------------------------------------------------------------------

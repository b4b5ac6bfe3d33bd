"""The bodies of the rate limit routes (/rate-limits, issue 37): a limit as set and as answered, and the list."""

from __future__ import annotations

from pydantic import Field, StrictFloat, StrictInt

from onward.api.contract.common import Answer
from onward.domain.clock import iso
from onward.domain.models import Request, TenantId
from onward.domain.rate_limits import MAX_LIMIT, MAX_PERIOD_S, MIN_PERIOD_S
from onward.store.ports.rate_buckets import RateLimitDefinition

KEY_DESCRIPTION = ("`tenant` (every job of the tenant), `type:<job type>` (every job of that type), or any other "
                   "key a job names in its `rate_limit_key`; 1 to 128 of A-Z a-z 0-9 _ . : @ + -")


class RateLimitBody(Request):
    """PUT /rate-limits/{key}: at most `limit` jobs start per `period_s` seconds (a burst of `limit` at once from
    an idle bucket, then one per period_s / limit)."""

    limit: StrictInt = Field(ge=1, le=MAX_LIMIT, description="starts per period")
    period_s: StrictFloat | StrictInt = Field(ge=MIN_PERIOD_S, le=MAX_PERIOD_S, allow_inf_nan=False,
                                              description="the period in seconds")


class RateLimitInfo(Answer):
    key: str = Field(description=KEY_DESCRIPTION)
    limit: int
    period_s: float
    tenant_id: TenantId
    updated_at: str = Field(description="when it was last set (UTC)", json_schema_extra={"format": "date-time"})

    @classmethod
    def of(cls, tenant_id: str, definition: RateLimitDefinition) -> RateLimitInfo:
        return cls(key=definition.key, limit=definition.gcra.limit, period_s=definition.gcra.period_s,
                   tenant_id=tenant_id, updated_at=iso(definition.updated_at))


class RateLimits(Answer):
    rate_limits: list[RateLimitInfo] = Field(description="the tenant's limits by key")

"""Retention as policy: how long a finished job's items (row, result, run records) and its view row are kept,
by tenant, job type and final outcome. Pure: parsed from a JSON document, answered in seconds.

Precedence, most specific first: a job type's rule, then the tenant's default, then the platform default.
A rule need not name every outcome: an outcome it leaves out falls through to the next level (a type rule
that sets only `dead` keeps the tenant's, or the platform's, `succeeded`). The platform default names every
outcome (the ones it leaves out take `JobRetentionDays`).

The document (days, decimals allowed; `*_seconds` instead of days is accepted for drills):

    {"default": {"succeeded": 7, "cancelled": 7, "dead": 30, "quarantined": 30},
     "tenants": {"acme": {"succeeded": 14}},
     "types": {"export.report": {"dead": 90}}}

A type rule applies to every tenant (job types are platform-wide, like the worker that runs them). With no
document, every outcome is kept `JobRetentionDays` (RetentionPolicy.uniform): what the platform did before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DAY_S = 86_400


class Outcome(StrEnum):
    """A finished job's outcome: the terminal states (onward.domain.states.TERMINAL_STATES)."""

    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD = "dead"
    QUARANTINED = "quarantined"


class InvalidRetentionPolicy(ValueError):
    """A retention document that cannot be used, with the reason."""


class _Rule(BaseModel):
    """Days per outcome (decimals allowed); an outcome left out falls through to the next level."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    succeeded: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    cancelled: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    dead: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    quarantined: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    def seconds(self, unit_s: float) -> dict[Outcome, int]:
        days = {Outcome(name): value for name, value in self.model_dump().items() if value is not None}
        # At least one second: a TTL of zero would expire the item as it is written.
        return {outcome: max(1, round(value * unit_s)) for outcome, value in days.items()}


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    unit: str = Field(default="days", pattern="^(days|seconds)$")
    default: _Rule = _Rule()
    tenants: dict[str, _Rule] = {}
    types: dict[str, _Rule] = {}

    @field_validator("tenants", "types")
    @classmethod
    def _named(cls, rules: dict[str, _Rule]) -> dict[str, _Rule]:
        if any(not name for name in rules):
            raise ValueError("a tenant or job type must have a name")
        return rules


class RetentionPolicy:
    """Retention in seconds per (tenant, job type, outcome): a type's rule beats the tenant's default, which
    beats the platform default."""

    def __init__(self, default: Mapping[Outcome, int], tenants: Mapping[str, Mapping[Outcome, int]] | None = None,
                 types: Mapping[str, Mapping[Outcome, int]] | None = None) -> None:
        missing = set(Outcome) - set(default)
        if missing:
            raise InvalidRetentionPolicy(f"the platform default needs every outcome, missing {sorted(missing)}")
        self._default = dict(default)
        self._tenants = {name: dict(rule) for name, rule in (tenants or {}).items()}
        self._types = {name: dict(rule) for name, rule in (types or {}).items()}

    @classmethod
    def uniform(cls, retention_s: int) -> RetentionPolicy:
        """Every outcome kept `retention_s`: `JobRetentionDays` with no document."""
        return cls(dict.fromkeys(Outcome, retention_s))

    @classmethod
    def from_document(cls, document: str, fallback_s: int) -> RetentionPolicy:
        """The policy a JSON document describes; an outcome the platform default leaves out takes `fallback_s`
        (the JobRetentionDays setting). InvalidRetentionPolicy names what is wrong."""
        try:
            parsed = _Document.model_validate(json.loads(document))
        except json.JSONDecodeError as error:
            raise InvalidRetentionPolicy(f"retention policy is not JSON: {error}") from error
        except ValidationError as error:
            reasons = "; ".join(f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in error.errors())
            raise InvalidRetentionPolicy(f"invalid retention policy: {reasons}") from error
        unit_s = DAY_S if parsed.unit == "days" else 1
        default = dict.fromkeys(Outcome, fallback_s) | parsed.default.seconds(unit_s)
        return cls(default, {name: rule.seconds(unit_s) for name, rule in parsed.tenants.items()},
                   {name: rule.seconds(unit_s) for name, rule in parsed.types.items()})

    def retention_s(self, tenant_id: str, job_type: str, outcome: Outcome | str) -> int:
        """How long a job of `tenant_id` and `job_type` that ended with `outcome` is kept, in seconds."""
        final = Outcome(outcome)
        for rule in (self._types.get(job_type), self._tenants.get(tenant_id)):
            if rule is not None and final in rule:
                return rule[final]
        return self._default[final]

    def for_job(self, tenant_id: str, job_type: str, state: str) -> int:
        """The retention of a job's items as its state stands: its outcome's once it has ended; while it goes
        on (a run record of an attempt that ended, the job retrying), the longest of its outcomes', so no run
        record goes before the job row it belongs to, whatever the job's outcome turns out to be."""
        if state in set(Outcome):
            return self.retention_s(tenant_id, job_type, state)
        return max(self.retention_s(tenant_id, job_type, outcome) for outcome in Outcome)

    def _all(self) -> list[int]:
        return [*self._default.values(), *(s for rule in self._tenants.values() for s in rule.values()),
                *(s for rule in self._types.values() for s in rule.values())]

    @property
    def shortest_s(self) -> int:
        """The shortest retention of any job: an event older than this may describe a job already deleted."""
        return min(self._all())

    @property
    def longest_s(self) -> int:
        """The longest retention of any job."""
        return max(self._all())

    def to_document(self) -> str:
        """The policy as a document in seconds (what the local stack passes once it has scaled it)."""
        def rule(values: Mapping[Outcome, int]) -> dict[str, int]:
            return {outcome.value: seconds for outcome, seconds in values.items()}
        return json.dumps({"unit": "seconds", "default": rule(self._default),
                           "tenants": {name: rule(r) for name, r in self._tenants.items()},
                           "types": {name: rule(r) for name, r in self._types.items()}}, sort_keys=True)

    def scaled(self, scale: float) -> RetentionPolicy:
        """Every duration times `scale` (at least one second): for drills on a stack whose clocks are scaled."""
        def times(values: Mapping[Outcome, int]) -> dict[Outcome, int]:
            return {outcome: max(1, round(seconds * scale)) for outcome, seconds in values.items()}
        return RetentionPolicy(times(self._default), {n: times(r) for n, r in self._tenants.items()},
                               {n: times(r) for n, r in self._types.items()})

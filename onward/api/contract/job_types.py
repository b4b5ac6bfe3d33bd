"""The answers about job types (issue 37): each declared type's retry policy (GET /job-types), and the policy in
force for one job (on GET /jobs/{job_id}/explain)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from onward.api.contract.common import Answer
from onward.domain.clock import iso
from onward.domain.models import Job, JobType
from onward.domain.retry_policy import PLATFORM_POLICY, JobTypeDeclaration, RetryPolicy


class RetryPolicyAnswer(Answer):
    """A job type's retry policy (onward.domain.retry_policy.RetryPolicy)."""

    max_attempts: int = Field(description="attempts a job of the type gets when created without its own "
                                          "max_attempts")
    base_s: float = Field(description="the backoff's first ceiling: the ceiling after the n-th charged attempt is "
                                      "base_s * 2^(n-1), capped at cap_s")
    cap_s: float = Field(description="the longest wait between two attempts")
    jitter: Literal["full", "equal", "none"] = Field(
        description="how the wait is drawn under its ceiling: equal [ceiling/2, ceiling], full [0, ceiling], none: "
                    "the ceiling")
    permanent: list[str] = Field(description="error types (exception class names) that end a job dead without "
                                             "retry")
    max_snoozes: int = Field(description="snoozes a job may take; past it a snooze counts as a failed attempt")

    @classmethod
    def of(cls, policy: RetryPolicy) -> RetryPolicyAnswer:
        return cls.model_validate(policy.to_document())


class JobTypeAnswer(Answer):
    """One declared job type: its policy and which worker declared it (the last declaration wins)."""

    type: JobType
    retry: RetryPolicyAnswer
    declared_by: str = Field(description="the worker process that declared it last (`<host>:<pid>`)")
    worker_version: str = Field(description="the onward version that worker ran")
    declared_at: str = Field(json_schema_extra={"format": "date-time"})

    @classmethod
    def of(cls, declared: JobTypeDeclaration) -> JobTypeAnswer:
        return cls(type=declared.job_type, retry=RetryPolicyAnswer.of(declared.policy),
                   declared_by=declared.declared_by, worker_version=declared.worker_version,
                   declared_at=iso(declared.declared_at))


class JobTypesAnswer(Answer):
    """The declared job types, by name, and the policy of a type nobody declared one for."""

    types: list[JobTypeAnswer]
    platform_default: RetryPolicyAnswer = Field(description="the policy of a type no worker declared")


class PolicyInForce(Answer):
    """The retry policy in force for one job: its own max_attempts, and its type's declared backoff, permanent
    error types and snooze bound (the platform's when no worker declared the type)."""

    max_attempts: int = Field(description="the job's own (given at create, else its type's when created)")
    attempts_used: int = Field(description="attempts charged to it so far (snoozes and releases are not)")
    base_s: float
    cap_s: float
    jitter: Literal["full", "equal", "none"]
    permanent: list[str]
    max_snoozes: int
    snoozes: int = Field(description="snoozes it has taken")
    declared: bool = Field(description="false: no worker declared its type; the platform's defaults are shown")
    declared_by: str | None = None
    worker_version: str | None = None

    @classmethod
    def of(cls, job: Job, declared: JobTypeDeclaration | None) -> PolicyInForce:
        policy = PLATFORM_POLICY if declared is None else declared.policy
        return cls(max_attempts=job.max_attempts, attempts_used=job.attempts_used, base_s=policy.base_s,
                   cap_s=policy.cap_s, jitter=policy.jitter, permanent=list(policy.permanent),
                   max_snoozes=policy.max_snoozes, snoozes=job.snoozes, declared=declared is not None,
                   declared_by=None if declared is None else declared.declared_by,
                   worker_version=None if declared is None else declared.worker_version)

"""The HTTP API's contract: every request and answer body as a pydantic model.

handlers/api.py validates requests with these models and builds every answer from them; handlers/openapi.py
generates the document's schemas from them. So the document cannot say one thing while the code answers
another, and a change of a field is made once, here (or in onward.models for the shared value objects).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from onward.clock import iso
from onward.models import ErrorSummary, Freshness, JobId, JobType, Run, StatusView, ViewLag
from onward.states import JobState, RunOutcome, is_terminal


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Health(_Answer):
    status: Literal["ok"] = "ok"


class Accepted(_Answer):
    """A job created (202) or found by its Idempotency-Key (200), or queued again by a replay."""

    job_id: JobId
    status: JobState
    version: int


class CancelAccepted(_Answer):
    job_id: JobId
    status: Literal["cancelled", "cancel_requested"] = Field(
        description="cancelled at once, or requested (a running job stops at its worker's next heartbeat)")
    version: int


class ResultSummary(_Answer):
    size_bytes: int = Field(description="bytes of the result as JSON")
    inline: Any = Field(None, description="the result itself when it is at most 1 KiB, else null")


class JobStatus(_Answer):
    """One job's status with when it became true and how fresh the view behind it is. Every status the API
    shows comes from the status view, read consistently: one source, so no answer is older than one given
    before (the job table is ahead of the view; answering from both would step back)."""

    visible: Literal[True] = True
    job_id: JobId
    type: JobType
    status: JobState
    terminal: bool = Field(description="the status is final: succeeded, dead, cancelled or quarantined")
    version: int
    attempt: int
    cancel_requested: bool
    updated_at: str = Field(description="when this status became true (the transition's commit time)",
                            json_schema_extra={"format": "date-time"})
    result: ResultSummary | None = None
    error: ErrorSummary | None = Field(None, description="why the last attempt failed, or why the job ended")
    freshness: Freshness

    @classmethod
    def of_view(cls, view: StatusView, freshness: Freshness) -> JobStatus:
        result = (None if view.result_size_bytes is None
                  else ResultSummary(size_bytes=view.result_size_bytes, inline=view.result_inline))
        return cls(job_id=view.job_id, type=view.type, status=view.status, terminal=is_terminal(view.status),
                   version=view.version, attempt=view.attempt, cancel_requested=view.cancel_requested,
                   updated_at=view.occurred_at, result=result, error=view.error, freshness=freshness)


class PendingJob(_Answer):
    """A job that exists but that the status view has not shown yet: no status is shown rather than one
    from another source that a later answer could contradict. `view` says how far behind the view may be."""

    visible: Literal[False] = False
    job_id: JobId
    detail: str = "the status view has not seen this job yet; it will show its status once it has"
    view: ViewLag


class JobPage(_Answer):
    jobs: list[JobStatus]
    cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")
    view: ViewLag


class RunRecord(_Answer):
    """One attempt, as its run record says; times are ISO-8601 UTC like every time the API answers."""

    job_id: JobId
    attempt: int
    worker_id: str
    claimed_at: str = Field(json_schema_extra={"format": "date-time"})
    lease_expires_at: str = Field(json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(None, json_schema_extra={"format": "date-time"})
    outcome: RunOutcome | None = None
    error: ErrorSummary | None = None
    reclaimed_as: RunOutcome | None = Field(None, description="what closed the run before a late report came")
    late_report: RunOutcome | None = Field(None, description="what a superseded attempt reported (fenced)")
    late_report_at: str | None = Field(None, json_schema_extra={"format": "date-time"})

    @classmethod
    def of(cls, run: Run) -> RunRecord:
        def at(value: int | None) -> str | None:
            return None if value is None else iso(value)

        return cls(job_id=run.job_id, attempt=run.attempt, worker_id=run.worker_id, claimed_at=iso(run.claimed_at),
                   lease_expires_at=iso(run.lease_expires_at), finished_at=at(run.finished_at),
                   outcome=run.outcome, error=run.error, reclaimed_as=run.reclaimed_as,
                   late_report=run.late_report, late_report_at=at(run.late_report_at))


class Runs(_Answer):
    job_id: JobId
    runs: list[RunRecord]


class FieldError(_Answer):
    loc: list[str | int]
    msg: str
    type: str


class ProblemDetails(_Answer):
    """Every refusal (RFC 9457 problem details)."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = Field(None, description="a 422's places and reasons")
    job_status: JobState | None = Field(None, description="a 409 on cancel: how the job ended")


ANSWERS: tuple[type[BaseModel], ...] = (Health, Accepted, CancelAccepted, JobStatus, PendingJob, JobPage, Runs,
                                         ProblemDetails, ViewLag)

"""The bodies of the job routes (/jobs...): a job created, its status, runs, parameters and explanation, a tenant's
listing and counts, and a batch."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from onward.api.contract.common import Answer, ProblemDetails
from onward.api.contract.job_types import PolicyInForce
from onward.api.contract.progress import JobProgress, RunProgressRecord
from onward.domain.archive import ArchivedJob, ArchivedRun
from onward.domain.clock import EpochMs, iso
from onward.domain.concurrency import ConcurrencyRule
from onward.domain.models import (
    ErrorSummary,
    Freshness,
    Job,
    JobId,
    JobType,
    NewJob,
    Request,
    Run,
    StatusView,
    ViewLag,
)
from onward.domain.states import JobState, RunOutcome, is_terminal
from onward.domain.text_patterns import IDEMPOTENCY_KEY
from onward.observability.trace_links import trace_link
from onward.operator.explain import Explanation, WaitReason


class Accepted(Answer):
    """A job created (202) or found by its Idempotency-Key (200), or queued again by a replay."""

    job_id: JobId
    status: JobState
    version: int
    # unique jobs (issue 37): each present only when it says something
    duplicate_of_unique: bool | None = Field(
        default=None,
        description="true: another job of the tenant holds `unique.key` and this is it (200, nothing created)")
    replaced_job_id: JobId | None = Field(
        default=None, description="`unique.on_conflict: replace`: the waiting job cancelled to give this one the key")

class CancelAccepted(Answer):
    job_id: JobId
    status: Literal["cancelled", "cancel_requested"] = Field(
        description="cancelled at once, or requested (a running job stops at its worker's next heartbeat)")
    version: int

class ResultSummary(Answer):
    size_bytes: int = Field(description="bytes of the result as JSON")
    inline: Any = Field(None, description="the result itself when it is at most 1 KiB, else null")

class JobStatus(Answer):
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
    updated_at: str = Field(description="when the transition was decided (freshness.as_of: when it committed)",
                            json_schema_extra={"format": "date-time"})
    run_at: str | None = Field(None, description="when it was asked to start (its run_at, or created_at + delay_s): "
                                                 "no claim before it; null: as soon as a worker is free",
                               json_schema_extra={"format": "date-time"})
    result: ResultSummary | None = None
    error: ErrorSummary | None = Field(None, description="why the last attempt failed, or why the job ended")
    freshness: Freshness
    # progress (issue 38)
    progress: JobProgress | None = Field(None, description="the running attempt's latest progress; null unless "
                                                           "running and reported")
    # tags (issue 38)
    tags: dict[str, str] = Field(default_factory=dict, description="the job's tags, as created ({}: none)")
    # trace context (issue 38)
    trace_id: str | None = Field(None, pattern="^[0-9a-f]{32}$", description=(
        "the W3C trace id of its traceparent (POST /jobs' `traceparent` header, or the create span's when the "
        "API exports spans); its attempts' spans are in this trace. null: none"))
    trace_url: str | None = Field(None, description=(
        "the trace in the deployment's tracing UI (ONWARD_TRACE_URL with the trace id); null: none configured, or "
        "no trace"))

    @classmethod
    def of_view(cls, view: StatusView, freshness: Freshness, trace_url: str | None = None) -> JobStatus:
        """`trace_url`: the deployment's ONWARD_TRACE_URL template (onward.observability.trace_links)."""
        result = (None if view.result_size_bytes is None
                  else ResultSummary(size_bytes=view.result_size_bytes, inline=view.result_inline))
        return cls(job_id=view.job_id, type=view.type, status=view.status, terminal=is_terminal(view.status),
                   version=view.version, attempt=view.attempt, cancel_requested=view.cancel_requested,
                   updated_at=view.occurred_at, run_at=view.run_at, result=result, error=view.error,
                   freshness=freshness, tags=view.tags or {}, trace_id=view.trace_id,
                   trace_url=trace_link(trace_url, view.trace_id),
                   progress=JobProgress.of(view.progress if view.status is JobState.RUNNING else None))

class PendingJob(Answer):
    """A job that exists but that the status view has not shown yet: no status is shown rather than one
    from another source that a later answer could contradict. `view` says how far behind the view may be."""

    visible: Literal[False] = False
    job_id: JobId
    detail: str = "the status view has not seen this job yet; it will show its status once it has"
    view: ViewLag

class JobPage(Answer):
    jobs: list[JobStatus]
    cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")
    view: ViewLag

class RunRecord(Answer):
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
    lease_lost_at: str | None = Field(None, json_schema_extra={"format": "date-time"},
                                      description="when a refused heartbeat showed it still working after its lease")
    overlapped_with: list[int] = Field(default_factory=list, description=(
        "attempts of the same job whose running interval overlapped this one's (a zombie still working "
        "while its successor ran): their side effects may have happened twice"))
    # progress (issue 38)
    progress: RunProgressRecord | None = Field(None, description="the attempt's latest progress update written")

    @classmethod
    def of(cls, run: Run) -> RunRecord:
        def at(value: int | None) -> str | None:
            return None if value is None else iso(value)

        return cls(job_id=run.job_id, attempt=run.attempt, worker_id=run.worker_id, claimed_at=iso(run.claimed_at),
                   lease_expires_at=iso(run.lease_expires_at), finished_at=at(run.finished_at),
                   outcome=run.outcome, error=run.error, reclaimed_as=run.reclaimed_as,
                   late_report=run.late_report, late_report_at=at(run.late_report_at),
                   lease_lost_at=at(run.lease_lost_at), overlapped_with=list(run.overlapped_with),
                   progress=RunProgressRecord.of(run.progress))

class Runs(Answer):
    job_id: JobId
    runs: list[RunRecord]

class ArchivedRunRecord(Answer):
    """One attempt as the run-history archive keeps it (once the job's run records have expired)."""

    job_id: JobId
    attempt: int
    worker_id: str
    claimed_at: str = Field(json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(None, json_schema_extra={"format": "date-time"})
    outcome: RunOutcome | None = None
    error: ErrorSummary | None = None
    reclaimed_as: RunOutcome | None = None
    late_report: RunOutcome | None = None
    lease_lost_at: str | None = Field(None, json_schema_extra={"format": "date-time"})
    overlapped_with: list[int] = Field(default_factory=list)

    @classmethod
    def of(cls, job_id: str, run: ArchivedRun) -> ArchivedRunRecord:
        return cls(job_id=job_id, attempt=run.attempt, worker_id=run.worker_id, claimed_at=iso(run.claimed_ms),
                   finished_at=None if run.finished_ms is None else iso(run.finished_ms),
                   outcome=_outcome(run.outcome), error=_error(run.error_type, run.error_message),
                   reclaimed_as=_outcome(run.reclaimed_as), late_report=_outcome(run.late_report),
                   lease_lost_at=None if run.lease_lost_ms is None else iso(run.lease_lost_ms),
                   overlapped_with=list(run.overlapped_with))

def _outcome(value: str | None) -> RunOutcome | None:
    return None if value is None else RunOutcome(value)

def _error(error_type: str | None, message: str | None) -> ErrorSummary | None:
    return None if error_type is None else ErrorSummary.of(error_type, message or "")

class ArchivedRuns(Answer):
    """An archived job's attempts, from the run-history archive (`archived: true`)."""

    archived: Literal[True] = True
    job_id: JobId
    runs: list[ArchivedRunRecord]

class ArchivedJobStatus(Answer):
    """A job whose rows have expired from the tables, answered from the run-history archive: its newest archived
    (final) version, marked `archived: true`, with its attempts. It never changes again unless replayed."""

    visible: Literal[True] = True
    archived: Literal[True] = True
    job_id: JobId
    type: JobType
    status: JobState
    terminal: bool = Field(description="always true: only finished jobs are archived")
    version: int
    attempt: int
    updated_at: str = Field(description="when it finished", json_schema_extra={"format": "date-time"})
    run_at: str | None = Field(None, json_schema_extra={"format": "date-time"})
    result: ResultSummary | None = None
    error: ErrorSummary | None = Field(None, description="why the last attempt failed, or why the job ended")
    archived_at: str = Field(json_schema_extra={"format": "date-time"})
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    max_attempts: int
    priority: int
    params: dict[str, Any] | None = Field(description="what it was created with; null when the archive kept only "
                                                      "the first 4 KiB of it (too large to show)")
    runs: list[ArchivedRunRecord]

    @classmethod
    def of(cls, job: ArchivedJob) -> ArchivedJobStatus:
        result = None
        if job.result_size_bytes is not None:
            whole = job.result_summary is not None and job.result_size_bytes <= len(job.result_summary.encode())
            result = ResultSummary(size_bytes=job.result_size_bytes,
                                   inline=json.loads(job.result_summary) if whole and job.result_summary else None)
        state = JobState(job.state)
        return cls(job_id=job.job_id, type=job.type, status=state, terminal=is_terminal(state),
                   version=job.version, attempt=job.attempts, updated_at=iso(job.finished_ms),
                   run_at=None if job.run_at_ms is None else iso(job.run_at_ms), result=result,
                   error=_error(job.last_error_type, job.last_error_message), archived_at=iso(job.archived_ms),
                   created_at=iso(job.created_ms), max_attempts=job.max_attempts, priority=job.priority,
                   params=None if job.params_truncated else json.loads(job.params_json),
                   runs=[ArchivedRunRecord.of(job.job_id, run) for run in job.runs])

class JobParams(Answer):
    """What was asked for when the job was created (from the job table: it never changes)."""

    job_id: JobId
    type: JobType
    params: dict[str, Any]
    max_attempts: int
    priority: int
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    run_at: str | None = Field(None, description="when it was asked to start (its run_at, or created_at + delay_s); "
                                                 "null: as soon as a worker is free",
                               json_schema_extra={"format": "date-time"})
    timeout_s: float | None = Field(None, description="the execution timeout it asked for; null: its job type's "
                                                     "default (an attempt past it fails with error type Timeout)")
    # tags (issue 38)
    tags: dict[str, str] = Field(default_factory=dict, description="the tags it was created with ({}: none)")

    @classmethod
    def of(cls, job: Job) -> JobParams:
        return cls(job_id=job.job_id, type=job.type, params=job.params, max_attempts=job.max_attempts,
                   priority=job.priority, created_at=iso(job.created_at),
                   run_at=None if job.run_at is None else iso(job.run_at), timeout_s=job.timeout_s,
                   tags=job.tags or {})

class WaitDetails(Answer):
    """What a waiting job's reason was decided from: its tenant's dispatch counters (exact, read now), its
    tenant's claims of the window (the outbox's `by_time` index, as GET /ops/tenants counts them) and its
    tenant's jobs ahead. Every figure is its tenant's own, except `platform_claims` and `share`, answered to an
    operator bound to no tenant only."""

    running: int = Field(description="its tenant's jobs running now")
    cap: int | None = Field(description="its tenant's cap on jobs running at once while others wait; null: none")
    weight: float = Field(description="its tenant's weight in the fair share of worker time")
    waiting: int = Field(description="its tenant's queued and retry_wait jobs, this one included")
    ahead: int = Field(description="jobs of its tenant a claim takes before this one (priority with aging, "
                                   "then due order; due in the same millisecond, by job id): its place in the "
                                   "order one worker process claims them. Processes racing for one queue take "
                                   "its jobs due within 1 s of its oldest in random order")
    ahead_at_least: bool = Field(description="true: the count stopped at its bound; there may be more")
    claims_per_minute: float = Field(description="its tenant's claims (attempts started) per minute in the window")
    share: float | None = Field(description="its tenant's share of every tenant's claims in the window, 0 to 1; "
                                            "null: nothing was claimed, or the caller is not an operator bound "
                                            "to no tenant")
    platform_claims: int | None = Field(description="claims of every tenant in the window; null unless the caller "
                                                    "is an operator bound to no tenant (a tenant is never shown "
                                                    "other tenants' activity)")
    window_s: int = Field(description="the window: the last `window_s` seconds")
    window_complete: bool = Field(description="false: the window held more outbox entries than one read takes")

class JobExplanation(Answer):
    """Why a job is not running, and until when (onward.operator.explain), decided now from the job table and the
    dispatch
    counters: `status` and `version` are the job table's, which can be a moment ahead of the status view's
    (GET /jobs/{job_id}). A job that is running or has ended is answered as such (`running`, `finished`)."""

    job_id: JobId
    status: JobState
    version: int
    reason: WaitReason = Field(description="scheduled (its run_at is to come), backoff (retry_wait until its next "
                                           "attempt), tenant_at_cap (its tenant runs `cap` jobs), no_worker (no "
                                           "worker claimed a job of its tenant in the window), waiting_for_share "
                                           "(jobs of its tenant ahead, its tenant's share of the workers); "
                                           "rate_limited (it waits for the token of its rate limits it reserved for "
                                           "`until`); snoozed (its handler snoozed it: due again at `until`); paused "
                                           "(its tenant or type is paused, or the platform drains); running, "
                                           "finished")
    detail: str = Field(description="the explanation as a sentence (times in UTC)")
    decided_at: str = Field(description="when this was decided: `until` and `eta` are from this moment's reads",
                            json_schema_extra={"format": "date-time"})
    until: str | None = Field(description="when the reason ends by itself (scheduled: the run_at; backoff: the next "
                                          "attempt's earliest start; rate_limited: its reserved token's moment); "
                                          "null otherwise",
                              json_schema_extra={"format": "date-time"})
    eta: str | None = Field(description="when it is likely to start, from its tenant's claims per minute and the "
                                        "jobs ahead, never before `until` (no earlier than this when "
                                        "`ahead_at_least`); null: its tenant claimed nothing in the window, or no "
                                        "worker claims, or it is not waiting",
                            json_schema_extra={"format": "date-time"})
    details: WaitDetails | None = Field(description="what a waiting job's reason was decided from; null when it "
                                                    "is not waiting")
    freshness: Freshness = Field(description="as a status's: as_of is when the job's current status (this "
                                             "answer's) became true; the view's lag says how far GET /jobs/{job_id} "
                                             "may be behind it")
    # retry policy per job type (issue 37)
    retry_policy: PolicyInForce | None = Field(default=None, description="the retry policy in force for the job: its "
                                                                 "max_attempts, its type's backoff, permanent error "
                                                                 "types and snooze bound")

    @classmethod
    def of(cls, job: Job, explanation: Explanation, decided_at: EpochMs, freshness: Freshness) -> JobExplanation:
        waiting = explanation.waiting
        details = None if waiting is None else WaitDetails(
            running=waiting.tenant.usage.running, cap=waiting.tenant.tenant.policy.cap,
            weight=waiting.tenant.tenant.policy.weight, waiting=waiting.tenant.load().waiting,
            ahead=waiting.ahead.count, ahead_at_least=waiting.ahead.at_least,
            claims_per_minute=round(waiting.throughput.per_minute, 3),
            share=None if waiting.throughput.share is None else round(waiting.throughput.share, 4),
            platform_claims=waiting.throughput.platform_claims, window_s=waiting.throughput.window_ms // 1000,
            window_complete=waiting.throughput.complete)

        def at(value: EpochMs | None) -> str | None:
            return None if value is None else iso(value)

        return cls(job_id=job.job_id, status=job.state, version=job.version, reason=explanation.reason,
                   detail=explanation.detail, decided_at=iso(decided_at), until=at(explanation.until),
                   eta=at(explanation.eta), details=details, freshness=freshness)

class StatusCounts(Answer):
    """A tenant's jobs per status in the status view (every status listed, 0 included)."""

    counts: dict[JobState, int]
    examined: int = Field(description="index entries read, newest first")
    complete: bool = Field(description="false: the tenant has more jobs than one count reads (the newest "
                                       "`examined` are counted)")
    view: ViewLag

MAX_BATCH = 100

class BatchJob(NewJob):
    """One job of a batch: the body POST /jobs takes, and its own Idempotency-Key."""

    idempotency_key: Annotated[str, IDEMPOTENCY_KEY.constraints()] | None = Field(
        None, description="as POST /jobs's Idempotency-Key header: a retry with the same key and job answers the "
                          "job it created (200)")

    # concurrency keys (issue 37): an overflow strategy reads the key before the create: POST /jobs alone has one
    @field_validator("concurrency")
    @classmethod
    def _queue_overflow_only(cls, rule: ConcurrencyRule | None) -> ConcurrencyRule | None:
        if rule is not None and rule.on_overflow != "queue":
            raise ValueError("a batch's jobs take on_overflow `queue` only: send cancel_newest or "
                             "cancel_oldest_queued with POST /jobs")
        return rule

    def new_job(self) -> NewJob:
        """The job itself, as POST /jobs would have validated it (its Idempotency-Key apart)."""
        return NewJob.model_construct(self.model_fields_set - {"idempotency_key"},
                                      **{name: getattr(self, name) for name in NewJob.model_fields})

class BatchCreate(Request):
    """Jobs to create, each as POST /jobs would; each entry is checked on its own (a bad one refuses only
    itself), the list as a whole here."""

    jobs: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH,
                                       json_schema_extra={"items": {"$ref": "#/components/schemas/BatchJob"}})

class BatchOutcome(Answer):
    """One entry's answer, as POST /jobs would give it: `status` is its HTTP status, with `job_id` (202: created;
    200: an earlier request with its idempotency_key created it) or `problem` (the other is left out)."""

    status: int
    job_id: JobId | None = None
    problem: ProblemDetails | None = None
    # unique jobs (issue 37): as POST /jobs's answer says them
    duplicate_of_unique: bool | None = None
    replaced_job_id: JobId | None = None

class BatchCreated(Answer):
    results: list[BatchOutcome] = Field(description="one per entry, in the order sent")
    created: int = Field(description="jobs created by this request (202s)")

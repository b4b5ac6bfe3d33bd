"""The HTTP API's contract: every request and answer body as a pydantic model.

onward/api/app.py validates requests with these models and builds every answer from them;
onward/api/openapi.py generates the document's schemas from them. So the document cannot say one
thing while the code answers another, and a change of a field is made once, here (or in onward.domain.models for
the shared value objects).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, Strict

from onward.domain.clock import EpochMs, iso
from onward.domain.models import (
    ErrorSummary,
    Freshness,
    Job,
    JobId,
    JobType,
    Moment,
    NewJob,
    Request,
    Run,
    StatusView,
    TenantId,
    ViewLag,
)
from onward.domain.schedules import Schedule
from onward.domain.states import JobState, RunOutcome, is_terminal
from onward.domain.text_patterns import IDEMPOTENCY_KEY
from onward.operator.bulk import MAX_JOBS, BulkFilter, BulkKind, BulkReport
from onward.operator.explain import Explanation, WaitReason

# A status named in a request: its value ("dead"). Strict(False): strict mode takes only the enum member itself.
StateName = Annotated[JobState, Strict(False)]


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
    updated_at: str = Field(description="when the transition was decided (freshness.as_of: when it committed)",
                            json_schema_extra={"format": "date-time"})
    run_at: str | None = Field(None, description="when it was asked to start (its run_at, or created_at + delay_s): "
                                                 "no claim before it; null: as soon as a worker is free",
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
                   updated_at=view.occurred_at, run_at=view.run_at, result=result, error=view.error,
                   freshness=freshness)


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
    lease_lost_at: str | None = Field(None, json_schema_extra={"format": "date-time"},
                                      description="when a refused heartbeat showed it still working after its lease")
    overlapped_with: list[int] = Field(default_factory=list, description=(
        "attempts of the same job whose running interval overlapped this one's (a zombie still working "
        "while its successor ran): their side effects may have happened twice"))

    @classmethod
    def of(cls, run: Run) -> RunRecord:
        def at(value: int | None) -> str | None:
            return None if value is None else iso(value)

        return cls(job_id=run.job_id, attempt=run.attempt, worker_id=run.worker_id, claimed_at=iso(run.claimed_at),
                   lease_expires_at=iso(run.lease_expires_at), finished_at=at(run.finished_at),
                   outcome=run.outcome, error=run.error, reclaimed_as=run.reclaimed_as,
                   late_report=run.late_report, late_report_at=at(run.late_report_at),
                   lease_lost_at=at(run.lease_lost_at), overlapped_with=list(run.overlapped_with))


class Runs(_Answer):
    job_id: JobId
    runs: list[RunRecord]


class JobParams(_Answer):
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

    @classmethod
    def of(cls, job: Job) -> JobParams:
        return cls(job_id=job.job_id, type=job.type, params=job.params, max_attempts=job.max_attempts,
                   priority=job.priority, created_at=iso(job.created_at),
                   run_at=None if job.run_at is None else iso(job.run_at), timeout_s=job.timeout_s)


class WaitDetails(_Answer):
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


class JobExplanation(_Answer):
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
                                           "running, finished")
    detail: str = Field(description="the explanation as a sentence (times in UTC)")
    decided_at: str = Field(description="when this was decided: `until` and `eta` are from this moment's reads",
                            json_schema_extra={"format": "date-time"})
    until: str | None = Field(description="when the reason ends by itself (scheduled: the run_at; backoff: the next "
                                          "attempt's earliest start); null otherwise",
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


class StatusCounts(_Answer):
    """A tenant's jobs per status in the status view (every status listed, 0 included)."""

    counts: dict[JobState, int]
    examined: int = Field(description="index entries read, newest first")
    complete: bool = Field(description="false: the tenant has more jobs than one count reads (the newest "
                                       "`examined` are counted)")
    view: ViewLag


class Caller(_Answer):
    """Who the credential is: a tenant's (tenant_id), an operator's (operator), or an operator's bound to a
    tenant (both)."""

    tenant_id: TenantId | None
    operator: bool


# --- operators ---------------------------------------------------------------------------------------------

class TenantLoad(_Answer):
    """A tenant's dispatch settings and counters (the job table's, exact), and its claims in the window."""

    tenant_id: TenantId
    weight: float
    cap: int | None = Field(description="most jobs running at once while others wait; null: none")
    running: int
    waiting: int = Field(description="queued and retry_wait jobs")
    claims: list[int] = Field(description="attempts started in each bucket of the window, oldest first")
    claim_share: float | None = Field(description="its share of the window's claims, 0 to 1; null: no claims")


class ClaimWindow(_Answer):
    since: str = Field(json_schema_extra={"format": "date-time"})
    until: str = Field(json_schema_extra={"format": "date-time"})
    bucket_s: int
    examined: int = Field(description="outbox entries read")
    complete: bool = Field(description="false: the window held more entries than one read takes")


class Tenants(_Answer):
    """Every tenant's load. Shares are of claims (attempts started, from the outbox's `running` events), not
    of worker time."""

    tenants: list[TenantLoad]
    window: ClaimWindow


class ShardLagRow(_Answer):
    shard_id: str
    parents: list[str]
    bounded_by: Literal["own", "parents", "unknown"] = Field(
        description="own watermark, its parents' (a child of a reshard not yet confirmed), or unknown")
    confirmed_through: str | None = Field(json_schema_extra={"format": "date-time"})
    lag_s: float | None
    stale: bool
    processed_at: str | None = Field(description="when the projector last passed a heartbeat on from it",
                                     json_schema_extra={"format": "date-time"})
    slots: int


class RelayLag(_Answer):
    """The relay's watermark over the whole outbox stream: every commit before it is on the events stream."""

    confirmed_through: str | None = Field(json_schema_extra={"format": "date-time"})
    lag_s: float | None
    processed_at: str = Field(json_schema_extra={"format": "date-time"})


class PipelineLag(_Answer):
    view: ViewLag
    shards: list[ShardLagRow] = Field(description="each events-stream shard that bounds the view")
    relay: RelayLag | None = Field(description="null: the relay has passed no heartbeat on yet")


class ParkedRow(_Answer):
    source: Literal["projector", "relay"]
    shard_id: str
    sequence_number: str
    reason: str
    parked_at: str = Field(json_schema_extra={"format": "date-time"})
    raw_size: int
    raw_truncated: bool
    preview: str = Field(description="the head of the raw bytes as text (not UTF-8: escaped)")


class ParkedRecords(_Answer):
    records: list[ParkedRow]
    more: bool = Field(description="a source holds more than `limit`")


class FieldDifference(_Answer):
    field: str
    in_view: Any
    incoming: Any


class ConflictRow(_Answer):
    job_id: JobId
    tenant_id: TenantId | None
    version: int
    detected_at: str = Field(json_schema_extra={"format": "date-time"})
    reason: str
    differences: list[FieldDifference]


class Conflicts(_Answer):
    conflicts: list[ConflictRow]
    more: bool


class TenantJobs(_Answer):
    tenant_id: TenantId
    jobs: list[JobStatus]
    cursor: str | None = Field(description="more of this tenant's: GET /jobs?tenant=&status=&cursor=")


class ReplayableJobs(_Answer):
    """Dead and quarantined jobs, newest first, per tenant with any."""

    tenants: list[TenantJobs]
    view: ViewLag


def _each_once(job_ids: list[str]) -> list[str]:
    if len(set(job_ids)) != len(job_ids):
        raise ValueError("name each job once")
    return job_ids


class BulkReplay(Request):
    """Jobs to queue again, each as POST /jobs/{job_id}/replay would."""

    job_ids: Annotated[list[JobId], AfterValidator(_each_once)] = Field(min_length=1, max_length=100)


MAX_BATCH = 100


class BatchJob(NewJob):
    """One job of a batch: the body POST /jobs takes, and its own Idempotency-Key."""

    idempotency_key: Annotated[str, IDEMPOTENCY_KEY.constraints()] | None = Field(
        None, description="as POST /jobs's Idempotency-Key header: a retry with the same key and job answers the "
                          "job it created (200)")

    def new_job(self) -> NewJob:
        """The job itself, as POST /jobs would have validated it (its Idempotency-Key apart)."""
        return NewJob.model_construct(self.model_fields_set - {"idempotency_key"},
                                      **{name: getattr(self, name) for name in NewJob.model_fields})


class BatchCreate(Request):
    """Jobs to create, each as POST /jobs would; each entry is checked on its own (a bad one refuses only
    itself), the list as a whole here."""

    jobs: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH,
                                       json_schema_extra={"items": {"$ref": "#/components/schemas/BatchJob"}})


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


class ReplayOutcome(_Answer):
    """One job's answer, as POST /jobs/{job_id}/replay gives it: `status` is its HTTP status, with `job` (202)
    or `problem` (the other is left out)."""

    job_id: JobId
    status: int
    job: Accepted | None = None
    problem: ProblemDetails | None = None


class BulkReplayed(_Answer):
    results: list[ReplayOutcome] = Field(description="one per job, in the order asked")
    replayed: int = Field(description="jobs queued again")


class _BulkRequest(Request):
    """What a bulk action selects (onward.operator.bulk.BulkFilter), and whether it acts."""

    types: list[JobType] = Field(default_factory=list, max_length=20,
                                 description="only jobs of these types (empty: every type)")
    since: Moment | None = Field(None, description="only jobs whose current status began at or after this (its "
                                                   "updated_at; ISO-8601 with a zone)")
    until: Moment | None = Field(None, description="only jobs whose current status began at or before this")
    dry_run: bool = Field(True, description="true (the default): count the matching jobs and show a sample, "
                                            "changing nothing; false: act on each")
    max_jobs: int = Field(MAX_JOBS, ge=1, le=MAX_JOBS,
                          description="jobs one call selects at most; the report's `more` says when more matched")

    def bulk_filter(self, kind: BulkKind, tenant_id: str | None, states: list[JobState]) -> BulkFilter:
        """The filter (InvalidBulkFilter, naming the field, for states the action does not act on or an empty
        window)."""
        return BulkFilter(kind, tenant_id, frozenset(self.types), frozenset(states), _epoch_ms(self.since),
                          _epoch_ms(self.until))


def _epoch_ms(moment: AwareDatetime | None) -> EpochMs | None:
    return None if moment is None else int(moment.timestamp() * 1000)


class BulkReplayRequest(_BulkRequest):
    """Replay the dead and quarantined jobs this selects, each through the store's replay."""

    tenant: TenantId | None = Field(None, description="only this tenant's jobs (default: every tenant's; an "
                                                      "operator bound to a tenant: its own)")
    states: list[StateName] = Field(default_factory=list, max_length=2,
                                    description="dead and/or quarantined (empty: both)")


class BulkCancelRequest(_BulkRequest):
    """Cancel the waiting and running jobs of one tenant this selects, each as POST /jobs/{job_id}/cancel
    would."""

    tenant: TenantId = Field(description="the tenant whose jobs to cancel")
    states: list[StateName] = Field(default_factory=list, max_length=3,
                                    description="queued, retry_wait and/or running (empty: all three); a running "
                                                "job is asked to stop, one already asked is not selected")


class BulkFailure(_Answer):
    job_id: JobId
    error: str


class BulkActionReport(_Answer):
    """What a bulk action did (or, in a dry run, would act on). matched = applied + the skipped counts + failed +
    unprocessed."""

    action: BulkKind
    dry_run: bool
    tenant: TenantId | None = Field(description="the tenant acted on (null: every tenant)")
    matched: int = Field(description="jobs the filter selected from the status view (at most max_jobs)")
    more: bool = Field(description="more jobs matched than were selected: call again for the rest")
    sample: list[JobId] = Field(description="the first 20 selected, newest change first per tenant")
    applied: int = Field(description="jobs the action moved")
    applied_by_outcome: dict[str, int] = Field(description="replay: queued; cancel: cancelled (it was waiting), "
                                                           "cancel_requested (it was running)")
    skipped: dict[str, int] = Field(description="jobs the store's transition refused, by reason: not_replayable, "
                                                "already_ended, already_cancel_requested, not_found (the view was "
                                                "behind the job)")
    failed: int
    failures: list[BulkFailure] = Field(description="the first 100 failures with their errors")
    unprocessed: int = Field(description="jobs not acted on: all of a dry run's, or those left when it stopped")
    stopped: Literal["time_budget", "failures"] | None = Field(
        description="why it stopped before the last job: its time budget (20 s over HTTP) or 20 failures in a "
                    "row; null: it did not")
    applied_ids: list[JobId] = Field(description="the first 1,000 jobs moved")
    duration_s: float

    @classmethod
    def of(cls, report: BulkReport) -> BulkActionReport:
        return cls(action=report.action, dry_run=report.dry_run, tenant=report.tenant_id,
                   matched=report.matched, more=report.more, sample=list(report.sample), applied=report.applied,
                   applied_by_outcome=report.applied_by_outcome, skipped=report.skipped, failed=report.failed,
                   failures=[BulkFailure(job_id=f.job_id, error=f.error) for f in report.failures],
                   unprocessed=report.unprocessed, stopped=report.stopped,
                   applied_ids=list(report.applied_ids), duration_s=report.duration_s)


class BatchOutcome(_Answer):
    """One entry's answer, as POST /jobs would give it: `status` is its HTTP status, with `job_id` (202: created;
    200: an earlier request with its idempotency_key created it) or `problem` (the other is left out)."""

    status: int
    job_id: JobId | None = None
    problem: ProblemDetails | None = None


class BatchCreated(_Answer):
    results: list[BatchOutcome] = Field(description="one per entry, in the order sent")
    created: int = Field(description="jobs created by this request (202s)")


class ScheduleInfo(_Answer):
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


class Schedules(_Answer):
    schedules: list[ScheduleInfo] = Field(description="a page of the tenant's schedules by name")
    cursor: str | None = Field(description="pass as ?cursor= for the next page; null: this is the last")


ANSWERS: tuple[type[BaseModel], ...] = (Health, Accepted, CancelAccepted, JobStatus, PendingJob, JobPage, Runs,
                                         ProblemDetails, ViewLag, JobParams, StatusCounts, Caller, Tenants,
                                         PipelineLag, ParkedRecords, Conflicts, ReplayableJobs, BulkReplayed,
                                         JobExplanation, BatchCreated, BulkActionReport, ScheduleInfo,
                                         Schedules)

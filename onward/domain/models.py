"""Value objects of the job store (pydantic, frozen): Job, Run, OutboxEvent and what callers get back."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictFloat,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema

from onward.domain.clock import EpochMs, iso, system_clock
from onward.domain.concurrency import ConcurrencyRule
from onward.domain.documents import check_exact
from onward.domain.progress import RunProgress, ShownProgress
from onward.domain.rate_limits import is_reserved_key
from onward.domain.schema_versions import EVENT_SCHEMA
from onward.domain.states import SHOWS_ERROR, JobState, RunOutcome
from onward.domain.tags import TAGS_RULES, Tags
from onward.domain.text_patterns import JOB_ID, JOB_TYPE, RATE_LIMIT_KEY, TENANT_ID, TRACE_PARENT
from onward.domain.uniqueness import UniqueRule

JobId = Annotated[str, JOB_ID.constraints()]
TenantId = Annotated[str, TENANT_ID.constraints()]
JobType = Annotated[str, JOB_TYPE.constraints()]
WorkerId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TraceParentHeader = Annotated[str, TRACE_PARENT.constraints()]  # trace context (issue 38)
RateLimitKey = Annotated[str, RATE_LIMIT_KEY.constraints()]  # rate limits (issue 37)


def _storable_params(params: dict[str, Any]) -> dict[str, Any]:
    check_exact(params, "params", depth=1)  # UnstorableValue is a ValueError: pydantic reports it as such
    return params


StorableParams = Annotated[dict[str, Any], AfterValidator(_storable_params)]

MAX_ERROR_MESSAGE = 1000
MAX_INLINE_RESULT_BYTES = 1024
MAX_TIMEOUT_S = 24 * 3600  # the platform's cap on one attempt's run time (a job's timeout_s, a type's default)
DEFAULT_TIMEOUT_S = 15 * 60  # an attempt's timeout when neither the job nor its type sets one
MAX_DELAY_S = 365 * 86_400  # a delayed job starts at most this far ahead
RUN_AT_SKEW_S = 60  # a run_at this far in the past is taken as "now" (clocks differ); further back is refused


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorSummary(_Frozen):
    """Why an attempt failed: the exception class and a bounded message (flagged when cut)."""

    error_type: str
    message: str
    message_truncated: bool = False

    @classmethod
    def of(cls, error_type: str, message: str) -> ErrorSummary:
        """From any exception's name and text: cut to MAX_ERROR_MESSAGE characters, and made valid Unicode
        (a lone surrogate in a handler's message would otherwise make the report itself unstorable)."""
        cut = len(message) > MAX_ERROR_MESSAGE
        return cls(error_type=_valid_unicode(error_type)[:MAX_ERROR_MESSAGE],
                   message=_valid_unicode(message[:MAX_ERROR_MESSAGE]), message_truncated=cut)


def _valid_unicode(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _rfc3339_text(value: Any) -> Any:
    """A moment is RFC 3339 text (or a datetime from Python): a number, or digits, would be read as an epoch
    count in some unit, which nobody can tell from the value."""
    if isinstance(value, str) and ("T" in value.upper() or " " in value.strip()):
        return value
    if isinstance(value, datetime) or value is None:
        return value
    raise ValueError("give a date and time with its zone, e.g. 2026-12-01T10:00:00Z or 2026-12-01T12:00:00+02:00")


# A moment in a request: RFC 3339 text with its zone. Strict(False) lets pydantic parse the text (strict mode
# takes only a datetime object); _rfc3339_text refuses the numbers lax mode would read as epoch seconds.
Moment = Annotated[AwareDatetime, Strict(False), BeforeValidator(_rfc3339_text)]


class Request(BaseModel):
    """A body a caller sends: each field takes its JSON type only (strict: "false" is no boolean, "3" and 3.0
    are no integer, a number is no time), and a field the model does not have is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class NewJob(Request):
    """What a tenant asks for. The tenant itself always comes from the credential, never from here."""

    type: JobType
    params: StorableParams = Field(
        default_factory=dict, json_schema_extra={"propertyNames": {"minLength": 1}},
        description="stored as a DynamoDB map, so within DynamoDB's rules: at most 300,000 bytes as JSON, "
                    "nesting at most 32 levels (params itself is the first), numbers of at most 38 significant "
                    "digits with a magnitude from 1e-130 to below 1e126 (no NaN or Infinity), valid Unicode "
                    "strings, no empty keys. Given back exactly as sent (to the handler and GET "
                    "/jobs/{job_id}/params), so a float must have a fraction: DynamoDB's one number type would "
                    "give 2.0, 1e20 or -0.0 back as an integer, and they are refused")
    max_attempts: StrictInt = Field(  # strict: "3" is a client's bug, not a 3
        default=3, ge=1, le=100, description="attempts at most; without it, its job type's retry policy's "
                                             "(GET /job-types), else 3")
    priority: StrictInt = Field(default=0, ge=0, le=9)  # within the tenant: a due job of a higher priority goes first
    run_at: Moment | None = Field(
        default=None,
        description="start no earlier than this moment: RFC 3339 with a zone (2026-12-01T10:00:00Z, "
                    "2026-12-01T12:00:00+02:00), at most 60 s in the past and 365 days ahead; not with delay_s")
    delay_s: StrictFloat | None = Field(
        default=None, ge=0, le=MAX_DELAY_S, allow_inf_nan=False,
        description="start no earlier than this many seconds after the job is created (at most 365 days); not "
                    "with run_at")
    timeout_s: StrictFloat | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False,
        description="seconds one attempt may run: past it the attempt is stopped and fails with error type Timeout "
                    f"(retried as any failure). Default: the job type's, else {DEFAULT_TIMEOUT_S // 60} minutes; at "
                    f"most {MAX_TIMEOUT_S} ({MAX_TIMEOUT_S // 3600} h)")
    # tags (issue 38)
    tags: Tags | None = Field(default=None, description=TAGS_RULES)
    # trace context (issue 38): set from POST /jobs' `traceparent` and `tracestate` headers, never from the body
    trace_parent: SkipJsonSchema[TraceParentHeader | None] = Field(default=None, exclude=True)
    trace_state: SkipJsonSchema[str | None] = Field(default=None, exclude=True)
    # unique jobs (issue 37): at most one job of the tenant holds this key at a time (onward.domain.uniqueness)
    unique: UniqueRule | None = Field(default=None, description="at most one job of the tenant holds `unique.key` "
                                      "at a time, for `window_s` or while the holder has not finished "
                                      "(docs/flow-control.md#unique-jobs)")
    # rate limits (issue 37): the job's own rate limit key, beside its type's and its tenant's (docs/flow-control.md)
    rate_limit_key: RateLimitKey | None = Field(
        default=None, description="the key of the rate limit this job's starts count against (PUT "
                                  "/rate-limits/{key}), beside its type's (type:<type>) and its tenant's (tenant); "
                                  "not one of those reserved names")

    # concurrency keys (issue 37): at most `limit` jobs of the tenant with this key run at once
    concurrency: ConcurrencyRule | None = Field(
        default=None, description="at most `concurrency.limit` jobs of the tenant naming `concurrency.key` run at "
                                  "once; the others wait, holding no worker (docs/flow-control.md#concurrency-keys)")

    @field_validator("rate_limit_key")
    @classmethod
    def _own_rate_limit_key(cls, key: str | None) -> str | None:
        if key is not None and is_reserved_key(key):
            raise ValueError(f"{key!r} names a tenant's or a type's limit: a job names its own key")
        return key

    @field_validator("run_at")
    @classmethod
    def _run_at_in_range(cls, run_at: datetime | None, info: ValidationInfo) -> datetime | None:
        # "now" is the validating caller's: its clock by default, `context={"now_ms": ...}` to give another
        if run_at is None:
            return None
        now_ms = (info.context or {}).get("now_ms") or system_clock()
        at_ms = int(run_at.timestamp() * 1000)
        if at_ms < now_ms - RUN_AT_SKEW_S * 1000:
            raise ValueError(f"run_at is {(now_ms - at_ms) // 1000} s in the past (at most {RUN_AT_SKEW_S} s is "
                             "taken as now); give a time to come, or leave it out to start at once")
        if at_ms > now_ms + MAX_DELAY_S * 1000:
            raise ValueError("run_at is more than 365 days ahead")
        return run_at

    @field_validator("delay_s")
    @classmethod
    def _not_with_run_at(cls, delay_s: float | None, info: ValidationInfo) -> float | None:
        if delay_s is not None and info.data.get("run_at") is not None:
            raise ValueError("give run_at or delay_s, not both")
        return delay_s

    def start_at(self, now: EpochMs) -> EpochMs | None:
        """When the job was asked to start (run_at, or `now` + delay_s), in epoch ms; None: as soon as it can."""
        if self.run_at is not None:
            return int(self.run_at.timestamp() * 1000)
        if self.delay_s is not None:
            return now + math.ceil(self.delay_s * 1000)
        return None


class Job(_Frozen):
    """The authoritative job row (the hot item the dispatcher reads)."""

    job_id: JobId
    tenant_id: TenantId
    type: JobType
    params: dict[str, Any]
    state: JobState
    version: int = Field(ge=1)
    attempt: int = Field(ge=0)  # the fencing token: only ever rises, one per claim
    # attempts not counted against max_attempts: those before the last operator replay, and graceful releases
    attempt_floor: int = Field(default=0, ge=0)
    max_attempts: int = Field(ge=1)
    priority: int = Field(default=0, ge=0, le=9)
    not_before: EpochMs
    run_at: EpochMs | None = None  # when its tenant asked it to start (run_at or delay_s); None: at once
    # as asked (None: the type's default); no upper bound here, so a row stays readable if MAX_TIMEOUT_S falls:
    # the worker caps it when it runs an attempt
    timeout_s: float | None = Field(default=None, gt=0)
    lease_owner: str | None = None
    lease_expires_at: EpochMs | None = None
    cancel_requested: bool = False
    last_outcome: RunOutcome | None = None
    last_error: ErrorSummary | None = None
    created_at: EpochMs
    updated_at: EpochMs  # when the current status became true
    # tags (issue 38): as created (None: none); never changed
    tags: dict[str, str] | None = None
    # trace context (issue 38): the W3C traceparent its attempts continue (onward.observability), and tracestate
    trace_parent: TraceParentHeader | None = None
    trace_state: str | None = None
    # rate limits (issue 37): its own rate limit key; the moment of the token it reserved (it waits until then)
    rate_limit_key: str | None = None
    rate_reserved_at: EpochMs | None = None
    # snooze (issue 37): the snoozes its handler took (onward.domain.lifecycle.snooze; bounded by the type's policy)
    snoozes: int = Field(default=0, ge=0)
    # concurrency keys (issue 37): its key and limit (onward.domain.concurrency); never changed
    concurrency_key: str | None = None
    concurrency_limit: int | None = Field(default=None, ge=1)

    @property
    def attempts_used(self) -> int:
        """Attempts counted against max_attempts (a replay starts a fresh budget)."""
        return self.attempt - self.attempt_floor

    @property
    def attempts_exhausted(self) -> bool:
        return self.attempts_used >= self.max_attempts


class Run(_Frozen):
    """One attempt's record: written once, whole, by the transition that ends it (while it runs, its job row holds
    it: issue 34), with its outcome."""

    job_id: JobId
    attempt: int = Field(ge=1)
    worker_id: str
    claimed_at: EpochMs
    lease_expires_at: EpochMs
    finished_at: EpochMs | None = None
    outcome: RunOutcome | None = None
    error: ErrorSummary | None = None
    # A zombie's late report, kept so support can see it (outcome becomes `fenced`).
    reclaimed_as: RunOutcome | None = None
    late_report: RunOutcome | None = None
    late_report_at: EpochMs | None = None
    # A renewal of its lease refused after the reaper closed it: its worker was still working then.
    lease_lost_at: EpochMs | None = None
    # Attempts of this job whose running interval overlapped this one's (onward.domain.overlaps): two workers at once.
    overlapped_with: list[int] = Field(default_factory=list)
    # progress (issue 38): the attempt's latest progress update written (onward.domain.progress)
    progress: RunProgress | None = None
    # fence reconciler (issue 39): what fenced its late report (`region_epoch`: it came from the old home after a
    # failover, marked by the reconciler, onward.domain.fence_reconciliation)
    fenced_by: str | None = None


class OutboxEvent(_Frozen):
    """One committed transition, as other consumers will read it (schema versioned: `schema` is its major,
    onward.domain.schema_versions). A field this code does not know, added by a newer writer of the same
    major, is kept (`model_extra`) and passed on as it came, but never read, digested or projected."""

    event_id: str
    job_id: JobId
    tenant_id: TenantId
    type: JobType
    version: int = Field(ge=1)
    status: JobState
    attempt: int = Field(ge=0)
    cancel_requested: bool = False
    occurred_at: str
    schema_version: int = Field(default=EVENT_SCHEMA, alias="schema")
    error: ErrorSummary | None = None
    result_size_bytes: int | None = None
    result_inline: Any = None  # the result itself when it is at most MAX_INLINE_RESULT_BYTES
    # When DynamoDB committed it (its outbox-stream record's ApproximateCreationDateTime, whole seconds on
    # AWS): set by the relay, absent from the outbox itself and from events re-published from it.
    committed_at: str | None = None
    # When its tenant asked the job to start (run_at, or created_at + delay_s), on every event of a delayed
    # job; absent (never null on the wire) otherwise. Added after the first version of the contract: an
    # event without it reads, and digests, as it did before (onward.domain.projection.digest).
    run_at: str | None = None
    # tags (issue 38): the job's tags on every event of a tagged job; absent otherwise, and never digested
    tags: dict[str, str] | None = None
    # trace context (issue 38): the job's W3C traceparent; absent when it has none
    trace_parent: str | None = None

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    @classmethod
    def of(cls, job: Job, *, result: Any = None, result_size: int | None = None) -> OutboxEvent:
        inline = result if result_size is not None and result_size <= MAX_INLINE_RESULT_BYTES else None
        return cls(
            event_id=f"{job.job_id}:{job.version}",
            job_id=job.job_id,
            tenant_id=job.tenant_id,
            type=job.type,
            version=job.version,
            status=job.state,
            attempt=job.attempt,
            cancel_requested=job.cancel_requested,
            occurred_at=iso(job.updated_at),
            error=job.last_error if job.state in SHOWS_ERROR else None,
            result_size_bytes=result_size,
            result_inline=inline,
            run_at=None if job.run_at is None else iso(job.run_at),
            tags=job.tags or None,  # tags (issue 38)
            trace_parent=job.trace_parent,  # trace context (issue 38)
        )


class Lease(_Frozen):
    """What a worker holds after a claim: the job, its attempt (the fencing token) and the lease."""

    job: Job
    worker_id: str
    lease_expires_at: EpochMs

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def fencing_token(self) -> str:
        """`<job_id>:<attempt>`: pass it to external systems to refuse writes from a superseded attempt."""
        return f"{self.job.job_id}:{self.job.attempt}"


class StatusView(BaseModel):
    """One job's row in the status view, as the projector wrote it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: JobId
    tenant_id: TenantId
    type: JobType
    status: JobState
    version: int
    attempt: int
    cancel_requested: bool = False
    occurred_at: str  # when the writer decided the transition
    committed_at: str | None = None  # when DynamoDB committed it (None: re-published from the outbox)
    projected_at: str  # when the projector wrote it
    digest: str
    error: ErrorSummary | None = None
    result_size_bytes: int | None = None
    result_inline: Any = None
    run_at: str | None = None  # when its tenant asked it to start (None: at once, or a row projected before)
    # progress (issue 38): the running attempt's latest update, set by progress events of this very version
    progress: ShownProgress | None = None
    progress_seq: int | None = None
    # tags (issue 38)
    tags: dict[str, str] | None = None
    # trace context (issue 38): the 32-hex trace id of the job's traceparent
    trace_id: str | None = None

    @property
    def as_of(self) -> str:
        """When this status became true: its commit time, or the decision time (never later) without one."""
        return self.committed_at or self.occurred_at


class Freshness(_Frozen):
    """How fresh one status shown from the view is (onward.domain.freshness computes it)."""

    as_of: str  # when the shown status became true (commit time of its transition)
    age_s: float  # now - as_of
    view_lag_s: float | None  # upper bound of how far behind the view is; None when unknown
    watermark: str | None  # the view holds every transition committed strictly before this time
    stale: bool
    # fence reconciler (issue 39): after a failover, what this Region's view may not have seen of the lost home
    replication: ReplicationState | None = None


class ViewLag(_Frozen):
    """How far behind the whole status view may be, right now (onward.domain.freshness computes it)."""

    measured_at: str  # when this was measured (a status's Freshness.as_of is when the STATUS became true)
    view_lag_s: float | None  # None: no shard has been projected yet
    watermark: str | None  # the view holds every transition committed strictly before this time
    stale: bool
    stale_after_s: float  # the threshold `stale` was judged by
    shards: int  # shards with a watermark
    # fence reconciler (issue 39): after a failover, what this Region's view may not have seen of the lost home
    replication: ReplicationState | None = None


# fence reconciler (issue 39): the replication block of a status's freshness after a failover
class ReplicationState(_Frozen):
    """What the view of the Region that became home cannot vouch for (docs/regional-recovery.md, "The status
    page in the new Region"; onward.domain.replication_status computes it): statuses the lost home decided after
    `may_miss_after` may be missing until `reconciled`."""

    home_lost: str | None  # the Region that was home before the failover
    epoch: int
    fenced_at: str | None
    may_miss_after: str | None  # the newest home heartbeat received, less the RPO objective; None: none received
    reconciled: bool


Freshness.model_rebuild()
ViewLag.model_rebuild()

"""The API's answers as the client returns them: pydantic models that keep the fields they know and ignore the
rest, so a field the API adds later (a job's progress, tags, trace id) breaks no client, and a status as a plain
string, so a state added later does too. A job's status also says when the client received it and when the API
last confirmed it (a 304), which is what keeps its freshness honest between polls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

# The statuses that never change again unless an operator replays the job (the API marks them `x-terminal`
# in its OpenAPI document; tests/unit/client checks this list against the platform's).
FINAL_STATES = frozenset({"succeeded", "dead", "cancelled", "quarantined"})


# a flag the API answers true, or leaves out or null (the document's `boolean | null`): False unless true
Flag = Annotated[bool, BeforeValidator(lambda value: value is True)]


class Answer(BaseModel):
    """An answer of the API: the fields the client knows, any others ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Freshness(Answer):
    """How fresh a shown status was when the API answered it: `as_of` when the status became true, `age_s` then,
    `view_lag_s` an upper bound of how far behind the status view was (None: unknown), `watermark` (the view
    holds every transition committed before it), `stale` (the lag is past the objective, or unknown)."""

    as_of: str
    age_s: float
    view_lag_s: float | None = None
    watermark: str | None = None
    stale: bool = False


class ViewLag(Answer):
    """How far behind the whole status view was when measured (`measured_at`)."""

    measured_at: str | None = None
    view_lag_s: float | None = None
    watermark: str | None = None
    stale: bool = True
    stale_after_s: float | None = None
    shards: int | None = None


class ResultSummary(Answer):
    size_bytes: int
    inline: Any = None


class ErrorSummary(Answer):
    error_type: str
    message: str = ""
    message_truncated: bool = False


class Progress(Answer):
    """What a running attempt's handler last reported (context.progress): rate-limited, at most one every 2 s."""

    fraction: float
    message: str | None = None
    attempt: int | None = None
    at: str | None = None


def _now() -> datetime:
    return datetime.now(UTC)


class JobStatus(Answer):
    """GET /jobs/{job_id}'s answer. `visible` False: the view has not shown the job yet (no `status`; `view` says
    how far behind it is). `archived`: answered from the run-history archive.

    `received_at` is when the client received the 200 this body came from; `checked_at` when the API last
    confirmed nothing newer was projected (that 200, or a later 304 to a conditional read); `etag` the tag to
    send back. The freshness block is the API's as of `received_at`: `age_s_now()` ages it to now."""

    visible: bool = True
    archived: bool = False
    job_id: str
    type: str | None = None
    status: str | None = None
    terminal: bool = False
    version: int | None = None
    attempt: int | None = None
    cancel_requested: bool = False
    updated_at: str | None = None
    run_at: str | None = None
    result: ResultSummary | None = None
    error: ErrorSummary | None = None
    freshness: Freshness | None = None
    view: ViewLag | None = None  # only while not visible
    progress: Progress | None = None  # the running attempt's latest update; None once final (docs/progress.md)
    tags: dict[str, str] = Field(default_factory=dict)
    trace_id: str | None = None  # the W3C trace its attempts' spans are in (docs/observability.md)
    trace_url: str | None = None  # that trace in the deployment's tracing UI (ONWARD_TRACE_URL), when configured
    etag: str | None = None
    received_at: datetime = Field(default_factory=_now)
    checked_at: datetime = Field(default_factory=_now)

    @property
    def final(self) -> bool:
        """The status never changes again (unless an operator replays the job)."""
        return self.status in FINAL_STATES

    def age_s_now(self, now: datetime | None = None) -> float | None:
        """How long the shown status has been true, now: the API's `age_s` plus the time since it was received
        (None when no status is shown)."""
        if self.freshness is None:
            return None
        return self.freshness.age_s + ((now or _now()) - self.received_at).total_seconds()

    def confirmed(self, at: datetime | None = None) -> JobStatus:
        """This status, confirmed current by a 304 at `at`."""
        return self.model_copy(update={"checked_at": at or _now()})


class Submitted(Answer):
    """A job created (`created`: 202) or found by its Idempotency-Key (200), or queued again by a replay."""

    job_id: str
    status: str
    version: int
    created: bool = True
    idempotency_key: str | None = None
    # unique jobs (issue 37): the job holding `unique.key` was answered (nothing created); the job replaced
    duplicate_of_unique: Flag = False
    replaced_job_id: str | None = None


class BatchEntry(Answer):
    """One entry of a batch, in the order sent: `status` 202 (created), 200 (found by its key) with `job_id`, or
    a refusal's status with its `problem` (a dict of the problem document)."""

    status: int
    job_id: str | None = None
    problem: dict[str, Any] | None = None
    idempotency_key: str | None = None
    # unique jobs (issue 37): as Submitted's
    duplicate_of_unique: Flag = False
    replaced_job_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in (200, 202)


class BatchResult(Answer):
    results: list[BatchEntry]
    created: int


class Cancelled(Answer):
    """`cancelled` at once, or `cancel_requested` (a running job stops at its worker's next heartbeat)."""

    job_id: str
    status: str
    version: int


class StatusCounts(Answer):
    counts: dict[str, int]
    examined: int
    complete: bool
    view: ViewLag | None = None


class Schedule(Answer):
    name: str
    type: str
    params: dict[str, Any] = Field(default_factory=dict)
    max_attempts: int | None = None
    priority: int | None = None
    cron: str | None = None
    rate: str | None = None
    timezone: str | None = None
    tenant_id: str | None = None
    created_at: str | None = None
    next_fire_at: str | None = None


# --- webhooks (docs/webhooks.md) --------------------------------------------------------------------------------


class Webhook(Answer):
    """A registered endpoint, as the API answers it: never its secret."""

    webhook_id: str
    url: str
    events: list[str]
    tenant_id: str | None = None
    created_at: str | None = None


class Delivery(Answer):
    """One event sent (or to be sent) to one endpoint: `state` is pending, delivered or failed."""

    delivery_id: str
    webhook_id: str
    job_id: str
    version: int
    status: str
    state: str
    attempts: int = 0
    event_id: str | None = None
    created_at: str | None = None
    next_attempt_at: str | None = None
    delivered_at: str | None = None
    last_status_code: int | None = None
    last_error: str | None = None


# --- rate limits (issue 37; docs/flow-control.md) ----------------------------------------------------------------


class RateLimit(Answer):
    """One of a tenant's rate limits: at most `limit` starts per `period_s` on `key` (`tenant`, `type:<type>` or
    a job's own `rate_limit_key`)."""

    key: str
    limit: int
    period_s: float
    tenant_id: str | None = None
    updated_at: str | None = None
# retry policies per job type (issue 37)
class TypeRetryPolicy(Answer):
    """A job type's retry policy, as its workers declared it (GET /job-types; docs/flow-control.md)."""

    max_attempts: int
    base_s: float
    cap_s: float
    jitter: str  # "equal", "full" or "none"
    permanent: list[str] = Field(default_factory=list)
    max_snoozes: int | None = None


class JobType(Answer):
    """A declared job type: its retry policy and the worker that declared it last."""

    type: str
    retry: TypeRetryPolicy
    declared_by: str | None = None
    worker_version: str | None = None
    declared_at: str | None = None
# --- pause, resume and the drain switch (issue 37; docs/flow-control.md) ----------------------------------------


class Paused(Answer):
    """A pause: a tenant (`type` None: every job of it), a type of every tenant (`tenant` None), or both."""

    tenant: str | None = None
    type: str | None = None


class PauseChange(Answer):
    """A pause or resume as done: `changed` False when it already was (or was not) in force; every worker
    process sees it within `takes_effect_within_s`."""

    pause: Paused
    in_force: bool
    changed: bool
    takes_effect_within_s: float
    released: int = 0  # a type's resume: its held jobs put back in their queues
    more: bool = False  # jobs still held (the resume stopped at its time budget): resume again


class Pauses(Answer):
    """The pauses in force (a tenant's: those that hold its jobs) and the platform's drain switch."""

    pauses: list[Paused]
    draining: bool


class DrainState(Answer):
    draining: bool
    changed: bool
    takes_effect_within_s: float

"""The bodies of the operator's routes (/ops/...): tenants' loads, the pipeline's lag, parked records, conflicts,
replayable jobs, replay by id, and the bulk actions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, Field

from onward.api.contract.common import Answer, ProblemDetails, StateName
from onward.api.contract.jobs import Accepted, JobStatus
from onward.domain.clock import EpochMs
from onward.domain.models import (
    JobId,
    JobType,
    Moment,
    Request,
    TenantId,
    ViewLag,
)
from onward.domain.states import JobState
from onward.operator.bulk import MAX_JOBS, BulkFilter, BulkKind, BulkReport


class TenantLoad(Answer):
    """A tenant's dispatch settings and counters (the job table's, exact), and its claims in the window."""

    tenant_id: TenantId
    weight: float
    cap: int | None = Field(description="most jobs running at once while others wait; null: none")
    running: int
    waiting: int = Field(description="queued and retry_wait jobs")
    claims: list[int] = Field(description="attempts started in each bucket of the window, oldest first")
    claim_share: float | None = Field(description="its share of the window's claims, 0 to 1; null: no claims")

class ClaimWindow(Answer):
    since: str = Field(json_schema_extra={"format": "date-time"})
    until: str = Field(json_schema_extra={"format": "date-time"})
    bucket_s: int
    examined: int = Field(description="outbox entries read")
    complete: bool = Field(description="false: the window held more entries than one read takes")

class Tenants(Answer):
    """Every tenant's load. Shares are of claims (attempts started, from the outbox's `running` events), not
    of worker time."""

    tenants: list[TenantLoad]
    window: ClaimWindow

class ShardLagRow(Answer):
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

class RelayLag(Answer):
    """The relay's watermark over the whole outbox stream: every commit before it is on the events stream."""

    confirmed_through: str | None = Field(json_schema_extra={"format": "date-time"})
    lag_s: float | None
    processed_at: str = Field(json_schema_extra={"format": "date-time"})

class PipelineLag(Answer):
    view: ViewLag
    shards: list[ShardLagRow] = Field(description="each events-stream shard that bounds the view")
    relay: RelayLag | None = Field(description="null: the relay has passed no heartbeat on yet")

class ParkedRow(Answer):
    source: Literal["projector", "relay"]
    shard_id: str
    sequence_number: str
    reason: str
    parked_at: str = Field(json_schema_extra={"format": "date-time"})
    raw_size: int
    raw_truncated: bool
    preview: str = Field(description="the head of the raw bytes as text (not UTF-8: escaped)")
    job_id: str | None = Field(default=None, description="the job it belongs to, when known: what `onward redrive` "
                               "replays")
    failures: int = Field(default=0, description="failed deliveries before it was parked (a poison record); 0: "
                          "unreadable, parked at once")
    redriven_at: str | None = Field(default=None, json_schema_extra={"format": "date-time"},
                                    description="when `onward redrive` replayed its job; null: not yet")

class ParkedRecords(Answer):
    records: list[ParkedRow]
    more: bool = Field(description="a source holds more than `limit`")

class FieldDifference(Answer):
    field: str
    in_view: Any
    incoming: Any

class ConflictRow(Answer):
    job_id: JobId
    tenant_id: TenantId | None
    version: int
    detected_at: str = Field(json_schema_extra={"format": "date-time"})
    reason: str
    differences: list[FieldDifference]

class Conflicts(Answer):
    conflicts: list[ConflictRow]
    more: bool

class TenantJobs(Answer):
    tenant_id: TenantId
    jobs: list[JobStatus]
    cursor: str | None = Field(description="more of this tenant's: GET /jobs?tenant=&status=&cursor=")

class ReplayableJobs(Answer):
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

class ReplayOutcome(Answer):
    """One job's answer, as POST /jobs/{job_id}/replay gives it: `status` is its HTTP status, with `job` (202)
    or `problem` (the other is left out)."""

    job_id: JobId
    status: int
    job: Accepted | None = None
    problem: ProblemDetails | None = None

class BulkReplayed(Answer):
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

class BulkFailure(Answer):
    job_id: JobId
    error: str

class BulkActionReport(Answer):
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

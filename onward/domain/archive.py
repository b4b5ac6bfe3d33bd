"""The run-history archive's record (pure): one row per finished job VERSION, with its run records, a summary
of its result and its events, as written to Parquet (locally) and to S3 through Firehose (on AWS), and the
columns of the Glue table both are read through.

A job replayed after it finished is archived again at its newer version; readers take the newest version of
each job (LATEST_VERSIONS), so a record written twice (a redelivered batch) or a job archived once per
finish is the same in effect: idempotent by (job_id, version).

Times are epoch milliseconds (BIGINT) so that the same SQL does arithmetic on them in DuckDB and Athena;
`day` (the UTC day the version finished, `YYYY-MM-DD`) and `tenant` are the partition keys of the layout
`jobs/day=<day>/tenant=<tenant>/...` (the Glue table is partitioned by `day`; `tenant` is also a column).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from onward.domain.clock import EpochMs
from onward.domain.models import Job, OutboxEvent, Run

ARCHIVE_SCHEMA = 1
RESULT_SUMMARY_BYTES = 1024  # the archived part of a result's JSON: enough to recognise it, not a copy of it
PARAMS_BYTES = 4096  # the archived part of the params' JSON


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ArchivedRun(_Row):
    attempt: int
    worker_id: str
    claimed_ms: int
    finished_ms: int | None = None
    outcome: str | None = None  # RunOutcome
    error_type: str | None = None
    error_message: str | None = None
    reclaimed_as: str | None = None
    late_report: str | None = None
    lease_lost_ms: int | None = None
    overlapped_with: list[int] = []


class ArchivedEvent(_Row):
    version: int
    status: str  # JobState
    attempt: int
    occurred_at: str  # ISO-8601, as the event carries it
    committed_at: str | None = None
    error_type: str | None = None


class ArchivedJob(_Row):
    """One finished version of one job, as the archive keeps it."""

    schema_version: int = ARCHIVE_SCHEMA
    job_id: str
    tenant: str
    type: str
    state: str  # a final JobState
    version: int
    attempts: int
    max_attempts: int
    priority: int
    created_ms: int
    run_at_ms: int | None = None  # when its tenant asked it to start; None: at once
    first_claim_ms: int | None = None  # None: it never ran (cancelled while queued)
    finished_ms: int
    waited_ms: int  # from due (created or run_at) to the first claim, or to the end if it never ran
    ran_ms: int  # the attempts' running time, summed
    last_outcome: str | None = None
    last_error_type: str | None = None
    last_error_message: str | None = None
    params_json: str  # at most PARAMS_BYTES of the params' JSON (params_truncated says so)
    params_truncated: bool = False
    result_size_bytes: int | None = None
    result_summary: str | None = None  # at most RESULT_SUMMARY_BYTES of the result's JSON
    runs: list[ArchivedRun]
    events: list[ArchivedEvent]
    archived_ms: int
    day: str  # partition: the UTC day it finished, YYYY-MM-DD

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_id, self.version)


def _clip(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode(errors="ignore"), True


def utc_day(at: EpochMs) -> str:
    return datetime.fromtimestamp(at / 1000, tz=UTC).strftime("%Y-%m-%d")


def archived_run(run: Run) -> ArchivedRun:
    return ArchivedRun(
        attempt=run.attempt, worker_id=run.worker_id, claimed_ms=run.claimed_at, finished_ms=run.finished_at,
        outcome=run.outcome, error_type=run.error.error_type if run.error else None,
        error_message=run.error.message if run.error else None, reclaimed_as=run.reclaimed_as,
        late_report=run.late_report, lease_lost_ms=run.lease_lost_at, overlapped_with=list(run.overlapped_with))


def archived_event(event: OutboxEvent) -> ArchivedEvent:
    return ArchivedEvent(version=event.version, status=event.status, attempt=event.attempt,
                         occurred_at=event.occurred_at, committed_at=event.committed_at,
                         error_type=event.error.error_type if event.error else None)


def archived_job(job: Job, runs: list[Run], result: Any, events: list[OutboxEvent], *,
                 archived_at: EpochMs) -> ArchivedJob:
    """The archive's record of a finished job from what the authority holds (its row, run records, result)
    and its events. Pure: the caller reads them."""
    ordered = sorted(runs, key=lambda run: run.attempt)
    due = job.run_at if job.run_at is not None else job.created_at
    first_claim = ordered[0].claimed_at if ordered else None
    waited = (first_claim if first_claim is not None else job.updated_at) - due
    ran = sum((run.finished_at or run.lease_lost_at or job.updated_at) - run.claimed_at for run in ordered)
    params, params_cut = _clip(json.dumps(job.params, separators=(",", ":"), sort_keys=True), PARAMS_BYTES)
    result_json = None if result is None else json.dumps(result, separators=(",", ":"), default=str)
    return ArchivedJob(
        job_id=job.job_id, tenant=job.tenant_id, type=job.type, state=job.state, version=job.version,
        attempts=job.attempt, max_attempts=job.max_attempts, priority=job.priority, created_ms=job.created_at,
        run_at_ms=job.run_at, first_claim_ms=first_claim, finished_ms=job.updated_at, waited_ms=max(0, waited),
        ran_ms=max(0, ran), last_outcome=job.last_outcome,
        last_error_type=job.last_error.error_type if job.last_error else None,
        last_error_message=job.last_error.message if job.last_error else None,
        params_json=params, params_truncated=params_cut,
        result_size_bytes=None if result_json is None else len(result_json.encode()),
        result_summary=None if result_json is None else _clip(result_json, RESULT_SUMMARY_BYTES)[0],
        runs=[archived_run(run) for run in ordered], events=[archived_event(event) for event in events],
        archived_ms=archived_at, day=utc_day(job.updated_at))


def _hive_type(annotation: Any) -> str:
    """The Glue (Hive) type of one field's annotation."""
    text = str(annotation).replace("typing.", "").replace(" | None", "").replace("Optional[", "").rstrip("]")
    if annotation in (int, int | None):
        return "bigint"
    if annotation in (bool, bool | None):
        return "boolean"
    if annotation in (str, str | None):
        return "string"
    if annotation == list[int]:
        return "array<bigint>"
    raise TypeError(f"no Hive type for {text}")


def _struct(model: type[BaseModel]) -> str:
    return "struct<" + ",".join(f"{name}:{_hive_type(field.annotation)}"
                                for name, field in model.model_fields.items()) + ">"


def glue_columns() -> list[tuple[str, str]]:
    """The Glue table's columns (name, Hive type), in record order, without the partition key `day`:
    template.yaml's ArchiveTable must name exactly these (tests/unit/project checks it)."""
    columns: list[tuple[str, str]] = []
    for name, field in ArchivedJob.model_fields.items():
        if name == "day":
            continue
        if name == "runs":
            columns.append((name, f"array<{_struct(ArchivedRun)}>"))
        elif name == "events":
            columns.append((name, f"array<{_struct(ArchivedEvent)}>"))
        else:
            columns.append((name, _hive_type(field.annotation)))
    return columns


# The newest archived version of each job, in SQL that DuckDB and Athena (Trino) both read; `{source}` is the
# table (Athena: the Glue table; DuckDB: a read_parquet over the archive directory).
LATEST_VERSIONS = """
SELECT * FROM (
  SELECT a.*, row_number() OVER (PARTITION BY job_id ORDER BY version DESC, archived_ms DESC) AS newest
  FROM {source} a
) WHERE newest = 1
"""

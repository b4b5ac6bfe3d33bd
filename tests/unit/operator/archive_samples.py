"""Archived-job records for the history tests: built directly (the archive's record is pure data)."""

from __future__ import annotations

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun, utc_day

DAY_MS = 86_400_000
START_MS = 1_764_547_200_000  # 2025-12-01T00:00:00Z


def record(job_id: str, *, tenant: str = "acme", type_: str = "demo.echo", state: str = "succeeded",
           version: int = 3, attempts: int = 1, created_ms: int = START_MS, waited_ms: int = 1000,
           ran_ms: int = 2000, archived_ms: int | None = None) -> ArchivedJob:
    first_claim = created_ms + waited_ms
    runs = [ArchivedRun(attempt=n, worker_id=f"w{n}", claimed_ms=first_claim + (n - 1) * ran_ms,
                        finished_ms=first_claim + n * ran_ms, outcome="succeeded" if n == attempts else "failed",
                        error_type=None if n == attempts else "Boom")
            for n in range(1, attempts + 1)]
    finished = first_claim + attempts * ran_ms
    return ArchivedJob(
        job_id=job_id, tenant=tenant, type=type_, state=state, version=version, attempts=attempts, max_attempts=5,
        priority=0, created_ms=created_ms, first_claim_ms=first_claim, finished_ms=finished, waited_ms=waited_ms,
        ran_ms=ran_ms * attempts, params_json="{}", runs=runs,
        events=[ArchivedEvent(version=version, status=state, attempt=attempts,
                              occurred_at="2025-12-01T00:00:00.000Z")],
        archived_ms=archived_ms if archived_ms is not None else finished + 1000, day=utc_day(finished))


def job_id(n: int) -> str:
    return f"{n:032x}"

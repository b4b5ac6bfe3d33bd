"""The job store's reads of one job (its row, runs, result, events, history): JobStore's base, over the
recorder it is given. Strongly consistent; another tenant's job is JobNotFound, as a missing one is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from onward.domain.errors import JobNotFound
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.text_patterns import JOB_ID
from onward.store.ports.recorder import JobRecorder
from onward.store.ports.rows import JobHistory, JobRow


def is_job_id(job_id: object) -> bool:
    """Whether `job_id` can name a job (anything else is JobNotFound without a read)."""
    return isinstance(job_id, str) and JOB_ID.matches(job_id)


class JobReads:
    """Reads of single jobs through `_recorder` (set by the subclass: onward.store.service.JobStore)."""

    _recorder: JobRecorder

    def get(self, job_id: str, tenant_id: str | None = None) -> Job:
        """The job, strongly consistent. With `tenant_id`, another tenant's job is JobNotFound."""
        return self.row(job_id, tenant_id).job

    def row(self, job_id: str, tenant_id: str | None = None) -> JobRow:
        """The job row with its ready shards, strongly consistent. With `tenant_id`, another tenant's job is
        JobNotFound, found by the very read that finds none for a missing job (JobRecorder.tenant_job): no
        caller can tell the two apart, not even by how long the answer took."""
        if tenant_id is None:
            return self._read(job_id)
        row = self._recorder.tenant_job(job_id, tenant_id) if is_job_id(job_id) else None
        if row is None:
            raise JobNotFound(job_id)
        return row

    def runs(self, job_id: str, tenant_id: str | None = None) -> list[Run]:
        self.get(job_id, tenant_id)
        return self._recorder.runs(job_id)

    def result(self, job_id: str, tenant_id: str | None = None) -> Any:
        self.get(job_id, tenant_id)
        return self._recorder.result(job_id)

    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order."""
        return self._recorder.events(job_id)

    def history(self, job_id: str) -> JobHistory | None:
        """The job's row, run records and result (unscoped; on DynamoDB one Query of its partition), None when
        its row is gone: what the archiver archives (onward.pipeline.archive.archiver)."""
        return self._recorder.history(job_id) if is_job_id(job_id) else None

    def all_jobs(self) -> Iterator[Job]:
        """Every job row (a scan: for reconciliation and audits, not for hot paths)."""
        return self._recorder.all_jobs()

    def _read(self, job_id: str) -> JobRow:
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        row = self._recorder.job(job_id)
        if row is None:
            raise JobNotFound(job_id)
        return row

"""The progress role of the recorder (issue 38): a running attempt's progress update, written on its run record
and as a progress event in the outbox, fenced by the attempt, never touching the job row."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum

from onward.domain.clock import EpochMs
from onward.domain.progress import ProgressEvent, RunProgress, progress_event


@dataclass(frozen=True)
class ProgressWrite:
    """One progress update of attempt `attempt` of a job at `version`, by `worker_id`; `expires_at` is its
    outbox item's TTL (epoch seconds)."""

    job_id: str
    tenant_id: str
    attempt: int
    worker_id: str
    version: int
    seq: int
    fraction: float
    message: str | None
    at: EpochMs
    expires_at: int

    def event(self) -> ProgressEvent:
        return progress_event(self.job_id, self.tenant_id, self.version, self.attempt, self.seq, self.fraction,
                              self.message, self.at)

    def on_run(self) -> RunProgress:
        return RunProgress(fraction=self.fraction, message=self.message, at=self.at, seq=self.seq)


class ProgressWritten(StrEnum):
    """How a progress write ended."""

    WRITTEN = "written"
    ALREADY = "already"  # the run record holds this update or a newer one: a retry of a write that landed
    JOB_MOVED = "job_moved"  # the job row is not running at that version under that attempt and worker
    CONFLICT = "conflict"  # a concurrent transaction on one of its items (DynamoDB): nothing written


class ProgressLog(ABC):
    """Progress updates: one atomic conditional unit each, under the conditions that the job row is running
    at `version` under `attempt` and `worker_id` (checked, not written), that the run record is open and holds
    an older update, and that the outbox holds no event under the update's key. Thread-safe."""

    @abstractmethod
    def record_progress(self, write: ProgressWrite) -> ProgressWritten:
        """Write the update on the run record and its event in the outbox, or nothing."""

    @abstractmethod
    def progress_events(self, job_id: str) -> list[ProgressEvent]:
        """The job's progress events in the outbox, in (version, seq) order (for tests and audits)."""

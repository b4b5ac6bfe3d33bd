"""The job log role of the recorder: job rows, runs, results, outbox events and Idempotency-Keys, read
strongly consistent, and the atomic writes that change them (create, create_many, commit, a run's marks)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import RunOutcome
from onward.store.ports.outcomes import CommitOutcome, CreateOutcome, ManyCreated
from onward.store.ports.rows import IdempotencyRecord, JobHistory, JobRow
from onward.store.ports.write_plans import NewJobWrite, OverlapMark, TransitionWrite


class JobLog(ABC):
    """A job's items: its row, its run records, its result and its events, and the writes of its
    transitions, each one atomic conditional unit (onward.store.ports.write_plans states the conditions).
    Thread-safe."""

    # reads

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job row, None when there is none."""

    @abstractmethod
    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        """The job row if it is `tenant_id`'s: None for another tenant's job exactly as for a missing one, by
        the same read (the tenant is a condition of the read itself: no row of another tenant comes back)."""

    @abstractmethod
    def run(self, job_id: str, attempt: int) -> Run | None:
        """One attempt's run record."""

    @abstractmethod
    def runs(self, job_id: str) -> list[Run]:
        """The job's run records in attempt order."""

    @abstractmethod
    def result(self, job_id: str) -> Any:
        """The job's result, None when it has none."""

    @abstractmethod
    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order."""

    def history(self, job_id: str) -> JobHistory | None:
        """The job's row, run records and result, read consistently; None when its row is gone. Here three
        reads; a recorder that keeps them together reads them at once."""
        row = self.job(job_id)
        if row is None:
            return None
        return JobHistory(row.job, self.runs(job_id), self.result(job_id))

    @abstractmethod
    def all_jobs(self) -> Iterator[Job]:
        """Every job row (a scan)."""

    @abstractmethod
    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        """What an Idempotency-Key of the tenant was used for."""

    # writes

    @abstractmethod
    def create(self, write: NewJobWrite) -> CreateOutcome:
        """Write a new job atomically; KEY_USED (nothing written) when its Idempotency-Key is taken."""

    @abstractmethod
    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        """Write new jobs atomically, all or none, in ONE transaction (`transaction_cuts` says how many fit;
        StoreInvariantViolation beyond: check_one_transaction): their jobs' counts summed per queue entry.
        KEY_USED (nothing written) names every write whose Idempotency-Key is taken."""

    @abstractmethod
    def commit(self, write: TransitionWrite) -> CommitOutcome:
        """Write one transition atomically, or nothing when any of its conditions fails (then `judge` says
        what the failure means)."""

    @abstractmethod
    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        """Record a zombie's late report on its run record (outcome `fenced`, the outcome it had kept as
        `reclaimed_as`), only if the run is the worker's and still open or closed as lease_expired. False
        when it was not marked. `expires_at` is its TTL if it has none yet (a run the reaper closed keeps
        the one stamped then, so it never outlives its ended job's row). With `overlap`, the same update
        marks the overlaps the report reveals (as mark_overlap)."""

    @abstractmethod
    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        """Record on a zombie's run record that a renewal of its lease was refused at `at` (`lease_lost_at`:
        its worker was still working then), only if the run is the worker's, was closed by the reaper
        (lease_expired, or fenced since) and has no such mark yet. False when it was not marked. With
        `overlap`, the same update marks the overlaps it reveals (as mark_overlap)."""

    @abstractmethod
    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        """Add `overlap.attempts` to a run's `overlapped_with` and put the run in the `overlaps` index (keyed
        by `overlap.began_at` unless it is there already), whatever its outcome. False: no such run."""

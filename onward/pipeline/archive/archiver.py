"""The archiver: the events stream (Kinesis) -> the run-history archive, a consumer of its own beside the
projector (its own function and event source mapping, so its own position in the stream).

For each batch: the events whose status is final (succeeded, cancelled, dead, quarantined) name the jobs to
archive, each job once (its newest final event of the batch). For each, the authority is read, unscoped: the
job row, its run records, its result (the jobs table) and its events (the outbox); the record is built by
onward.domain.archive.archived_job and the batch's records go to the sink in ONE write. The batch is to be
acknowledged only once that write returned: a crash between the two redelivers the batch, and its records are
written again at the same versions, which readers collapse (LATEST_VERSIONS): nothing twice in effect.

- The row is newer than the event and no longer final (replayed since): skipped, its next final event
  archives it. A row that is final at a newer version is archived at that version.
- The row is gone (expired before the archiver saw it): counted (`expired_before_archive`) and logged. The
  bound the docs state: the archiver must keep up within the shortest job retention.
- No sink (neither ONWARD_ARCHIVE_DIR nor a delivery stream set): archiving is off; batches are acknowledged
  without a read.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

from aws_lambda_powertools import Logger

from onward.domain.archive import ArchivedJob, archived_job
from onward.domain.clock import Clock, system_clock
from onward.domain.models import OutboxEvent
from onward.domain.states import is_terminal
from onward.faults import fault_point
from onward.pipeline.archive.sinks import ArchiveSink
from onward.pipeline.projector.records import UnreadableRecord, parse_record
from onward.store.ports.rows import JobHistory

logger = Logger(service="onward-archiver")

Skipped = Literal["expired", "replayed"]
EXPIRED: Skipped = "expired"  # the job row is gone
REPLAYED: Skipped = "replayed"  # the job row is newer and not final: replayed since

READER_THREADS = 8  # jobs of one batch read at once
_readers = ThreadPoolExecutor(max_workers=READER_THREADS, thread_name_prefix="onward-archiver")


@dataclass
class ArchiveTally:
    """What one batch did (the handler's metrics)."""

    final_events: int = 0
    archived: int = 0
    skipped_replayed: int = 0
    expired_before_archive: int = 0
    # re-published by `onward replay` (no committed_at) for a job already gone: archived before it expired (or
    # counted as expired_before_archive when its first final event came): not a new miss, and no warning
    replayed_gone: int = 0
    unreadable: int = 0  # the projector parks these; the archiver only counts them
    bytes_written: int = 0
    sink_writes: int = 0
    expired_jobs: list[str] = field(default_factory=list)


class ArchiveTotals:
    """Every batch's tally in this process (local drills and the soak read it; on Lambda the metrics are it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tally = ArchiveTally()

    def add(self, tally: ArchiveTally) -> None:
        with self._lock:
            for name in ("final_events", "archived", "skipped_replayed", "expired_before_archive", "replayed_gone",
                         "unreadable", "bytes_written", "sink_writes"):
                setattr(self.tally, name, getattr(self.tally, name) + getattr(tally, name))
            self.tally.expired_jobs += tally.expired_jobs


def final_events(records: Sequence[bytes], tally: ArchiveTally) -> dict[str, OutboxEvent]:
    """Each job's newest final event among the records (heartbeats and non-final events pass)."""
    newest: dict[str, OutboxEvent] = {}
    for data in records:
        try:
            read = parse_record(data)
        except UnreadableRecord:
            tally.unreadable += 1
            continue
        if not isinstance(read, OutboxEvent) or not is_terminal(read.status):
            continue
        tally.final_events += 1
        held = newest.get(read.job_id)
        if held is None or read.version > held.version:
            newest[read.job_id] = read
    return newest


class ArchiveReads(Protocol):
    """What the archiver reads of a job, unscoped: JobStore (in memory), or on DynamoDB the archiver's own
    reader (onward.store.dynamo.history), which can do nothing else."""

    def history(self, job_id: str) -> JobHistory | None: ...

    def events(self, job_id: str) -> list[OutboxEvent]: ...


class Archiver:
    """Builds and writes the archive's records of a batch's finished jobs. `sink` None: archiving is off."""

    def __init__(self, store: ArchiveReads, sink: ArchiveSink | None, clock: Clock = system_clock) -> None:
        self._store = store
        self._sink = sink
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self._sink is not None

    def archive_batch(self, records: Sequence[bytes], tally: ArchiveTally | None = None) -> ArchiveTally:
        """Archive the batch's finished jobs; returns once the sink holds them (raises otherwise: the batch
        is to be delivered again). Passes the fault point `archiver.after_write` after the write."""
        tally = tally if tally is not None else ArchiveTally()
        if self._sink is None:
            return tally
        events = final_events(records, tally)
        built = list(_readers.map(self._record_of, events.values()))
        archived: list[ArchivedJob] = []
        for event, record in zip(events.values(), built, strict=True):
            if record == EXPIRED and event.committed_at is None:
                tally.replayed_gone += 1
            elif record == EXPIRED:
                tally.expired_before_archive += 1
                tally.expired_jobs.append(event.job_id)
                logger.warning("job expired before it was archived: the archiver is behind the job retention",
                               extra={"job_id": event.job_id, "version": event.version})
            elif record == REPLAYED:
                tally.skipped_replayed += 1
            elif isinstance(record, ArchivedJob):
                archived.append(record)
        if archived:
            tally.bytes_written += self._sink.write(archived)
            tally.sink_writes += 1
            tally.archived += len(archived)
        fault_point("archiver.after_write")
        return tally

    def _record_of(self, event: OutboxEvent) -> ArchivedJob | Skipped:
        """The job's record, or why there is none: its row is gone, or it is not final any more."""
        history = self._store.history(event.job_id)  # one read of the jobs table
        if history is None:
            return EXPIRED
        job = history.job
        if not is_terminal(job.state):
            return REPLAYED
        events = [e for e in self._store.events(event.job_id) if e.version <= job.version]  # one of the outbox
        return archived_job(job, history.runs, history.result, events, archived_at=self._clock())


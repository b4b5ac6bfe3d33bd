"""Re-drive: once the cause of parked records is fixed, replay their jobs through the outbox.

A parked record (unreadable, or a poison record that failed every delivery: onward/pipeline/poison.py) is not
re-published as it is: its job's events are re-published from the outbox, the authority, every version in order
(as `onward replay --job` does), so the view ends at the job's latest version whatever was parked. The projector's
version guard makes this idempotent: versions it holds already become counted duplicates, and a record redriven
twice changes nothing. Each record whose job was re-published whole is marked `redriven_at`; it stays listed,
marked, until it expires. A record that names no job the outbox holds (bytes that never were an event) cannot be
re-driven: it is reported, and left for a person to read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from onward.pipeline.outbox import OutboxReader
from onward.pipeline.parking import ParkedRecord, ParkedRecords
from onward.pipeline.relay.publisher import KinesisPublisher


@dataclass
class RedriveReport:
    """What a re-drive found and did."""

    jobs: dict[str, list[ParkedRecord]] = field(default_factory=dict)  # job -> its parked records not redriven
    orphans: list[ParkedRecord] = field(default_factory=list)  # no job the outbox holds: left as they are
    selected: int = 0  # events of those jobs in the outbox
    published: int = 0  # events re-published
    failed_jobs: list[str] = field(default_factory=list)  # jobs whose events did not all go out: not marked

    @property
    def complete(self) -> bool:
        return not self.failed_jobs and self.published == self.selected


def job_of(record: ParkedRecord) -> str | None:
    """The job a parked record belongs to: as parked, else the Kinesis partition key its stream metadata names
    (the relay keys every event by its job), else a `job_id` its bytes hold as JSON."""
    if record.job_id:
        return record.job_id
    if record.stream_record:
        try:
            key = json.loads(record.stream_record).get("kinesis", {}).get("partitionKey")
        except (ValueError, AttributeError):
            key = None
        if isinstance(key, str) and key:
            return key
    try:
        payload = json.loads(record.raw)
    except ValueError:
        return None
    job_id = payload.get("job_id") if isinstance(payload, dict) else None
    return job_id if isinstance(job_id, str) and job_id else None


def pending(parked: ParkedRecords, sources: Iterable[str], reader: OutboxReader) -> RedriveReport:
    """The parked records not yet re-driven, by job (those the outbox knows), and the others."""
    report = RedriveReport()
    for source in sources:
        for record in parked.parked_by(source):
            if record.redriven_at is not None:
                continue
            job_id = job_of(record)
            if job_id is not None and (job_id in report.jobs or reader.events_of(job_id)):
                report.jobs.setdefault(job_id, []).append(record)
            else:
                report.orphans.append(record)
    return report


def redrive(parked: ParkedRecords, reader: OutboxReader, publisher: KinesisPublisher, sources: Iterable[str],
            progress: Callable[[str, int], None] = lambda job_id, published: None) -> RedriveReport:
    """Re-publish, job by job, every event the outbox holds for the jobs of the parked records not yet
    re-driven, and mark those records once their job's events all went out."""
    report = pending(parked, sources, reader)
    for job_id, records in report.jobs.items():
        events = sorted(reader.events_of(job_id), key=lambda event: event.version)
        published = sum(publisher.publish(events))
        report.selected += len(events)
        report.published += published
        progress(job_id, published)
        if published < len(events):
            report.failed_jobs.append(job_id)
            continue
        for record in records:
            parked.mark_redriven(record)
    return report

"""Reconcile: find jobs whose view is behind the authoritative job row for longer than a threshold, and
(on request) re-publish the outbox events the view is missing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onward.domain.clock import EpochMs
from onward.domain.models import Job
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.relay.publisher import KinesisPublisher
from onward.pipeline.view import StatusViewReader


@dataclass(frozen=True)
class Lagging:
    job_id: str
    job_version: int
    view_version: int | None  # None: the view has never seen the job
    behind_s: float  # how long the job row has been ahead of the view


def find_lagging(jobs: Iterable[Job], view: StatusViewReader, now: EpochMs, threshold_s: float) -> list[Lagging]:
    lagging = []
    for job in jobs:
        behind_s = (now - job.updated_at) / 1000
        if behind_s < threshold_s:
            continue  # recent: the pipeline may simply not have caught up yet
        shown = view.get(job.job_id)
        if shown is None or shown.version < job.version:
            lagging.append(Lagging(job.job_id, job.version, shown.version if shown else None, behind_s))
    return lagging


def repair(lagging: Iterable[Lagging], outbox: OutboxReader, publisher: KinesisPublisher) -> int:
    """Re-publish, per lagging job, the events newer than what its view shows; the number published."""
    published = 0
    for lag in lagging:
        missing = [event for event in outbox.events_of(lag.job_id) if event.version > (lag.view_version or 0)]
        published += sum(publisher.publish(missing))
    return published

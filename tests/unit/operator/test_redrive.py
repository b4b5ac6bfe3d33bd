"""`onward redrive` (onward/operator/redrive.py) without a stack: which job a parked record belongs to, and that a
job is replayed whole from the outbox and its records marked only once all its events went out. The local stack's
own drill is tests/integration/pipeline/test_poison_record.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.operator.redrive import job_of, redrive
from onward.pipeline.parking import ParkedRecord


def parked(sequence: str, raw: bytes, *, job_id: str | None = None, stream_record: str | None = None,
           redriven_at: str | None = None) -> ParkedRecord:
    return ParkedRecord("projector", "shardId-1", sequence, "why", raw, "2026-12-04T08:00:00.000Z", len(raw),
                        job_id=job_id, stream_record=stream_record, failures=3, redriven_at=redriven_at,
                        parked_id=f"shardId-1#{sequence}")


def event(job_id: str, version: int) -> OutboxEvent:
    return OutboxEvent(event_id=f"{job_id}:{version}", job_id=job_id, tenant_id="acme", type="demo.echo",
                       version=version, status=JobState.QUEUED, attempt=0, occurred_at="2026-12-04T08:00:00.000Z")


class Parked:
    def __init__(self, records: list[ParkedRecord]) -> None:
        self.records = records
        self.marked: list[str] = []

    def parked_by(self, source: str) -> list[ParkedRecord]:
        return [record for record in self.records if record.source == source]

    def mark_redriven(self, record: ParkedRecord) -> None:
        self.marked.append(record.sequence_number)


class Outbox:
    def __init__(self, events: list[OutboxEvent]) -> None:
        self.events = events

    def events_of(self, job_id: str) -> list[OutboxEvent]:
        return [e for e in reversed(self.events) if e.job_id == job_id]


class Publisher:
    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.published: list[tuple[str, int]] = []

    def publish(self, events: Sequence[OutboxEvent]) -> list[bool]:
        answers = [e.job_id != self.refuse for e in events]
        self.published += [(e.job_id, e.version) for e, ok in zip(events, answers, strict=True) if ok]
        return answers


def test_the_job_of_a_parked_record_is_as_parked_else_its_partition_key_else_in_its_bytes() -> None:
    metadata = json.dumps({"kinesis": {"partitionKey": "from-key"}})
    assert job_of(parked("1", b"{}", job_id="named", stream_record=metadata)) == "named"
    assert job_of(parked("2", b'{"job_id": "in-bytes"}', stream_record=metadata)) == "from-key"
    assert job_of(parked("3", b'{"job_id": "in-bytes"}')) == "in-bytes"
    assert job_of(parked("4", b"\xff not json")) is None
    assert job_of(parked("5", b"[1, 2]")) is None


A, B, GONE = "a" * 32, "b" * 32, "0" * 32


def test_a_job_is_replayed_whole_in_version_order_and_its_records_marked() -> None:
    records = Parked([parked("1", b"", job_id=A), parked("2", b"", job_id=A), parked("3", b"", job_id=B),
                      parked("4", b"", job_id=GONE), parked("5", b"", job_id=A, redriven_at="earlier")])
    publisher: Any = Publisher(refuse=B)
    outbox: Any = Outbox([event(A, 1), event(A, 2), event(B, 1)])
    parked_records: Any = records
    report = redrive(parked_records, outbox, publisher, ["projector"])

    assert publisher.published == [(A, 1), (A, 2)]
    assert records.marked == ["1", "2"]  # b's events did not all go out: not marked; 5 was redriven before
    assert report.failed_jobs == [B] and not report.complete
    assert [r.sequence_number for r in report.orphans] == ["4"]  # the outbox holds no such job
    assert (report.selected, report.published) == (3, 2)

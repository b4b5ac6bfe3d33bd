"""The relay parks an event whose publish fails on every delivery (onward/pipeline/poison.py) on its 3rd failed
delivery, and relays the records after it in the same invocation: without it, its shard stayed on that record until
the mapping gave it up, and then only the record's metadata was kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from onward.domain.models import OutboxEvent
from onward.pipeline.checkpoints import OUTBOX_STREAM, RELAY_CONSUMER
from onward.pipeline.heartbeats import Heartbeat
from onward.pipeline.poison import PARK_AFTER_FAILURES
from onward.pipeline.relay.publisher import PublishStats
from onward.pipeline.relay.relay import Relay, StreamRecord
from tests.unit.pipeline.test_relay_interleavings import BASE_MS, event_image

REFUSED = "b" * 32


@dataclass
class Refusing:
    """Kinesis refusing every event of one job (and, as the publisher stops there, every one after it)."""

    published: list[str] = field(default_factory=list)
    stats: PublishStats = field(default_factory=PublishStats)

    def publish(self, events: Sequence[OutboxEvent]) -> list[bool]:
        answers: list[bool] = []
        for event in events:
            if event.job_id == REFUSED or (answers and not answers[-1]):
                answers.append(False)
                continue
            self.published.append(event.job_id)
            answers.append(True)
        return answers

    def publish_heartbeat(self, heartbeat: Heartbeat) -> bool:
        return True


class Counts:
    def __init__(self) -> None:
        self.failures: dict[tuple[str, str, str], int] = {}

    def count(self, consumer: str, shard_id: str, sequence_number: str) -> int:
        key = (consumer, shard_id, sequence_number)
        self.failures[key] = self.failures.get(key, 0) + 1
        return self.failures[key]


class Parked:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def park(self, source: str, shard_id: str, sequence_number: str, raw: bytes, reason: str, **extra: Any) -> None:
        self.records.append({"source": source, "shard_id": shard_id, "sequence_number": sequence_number,
                             "raw": raw, "reason": reason, **extra})


def test_an_event_kinesis_keeps_refusing_is_parked_on_its_third_delivery_and_the_rest_relayed() -> None:
    jobs = ["a" * 32, REFUSED, "c" * 32]
    records = [StreamRecord(str(n + 1), "INSERT", event_image(job, 1, BASE_MS + n), BASE_MS + n)
               for n, job in enumerate(jobs)]
    publisher, parked = Refusing(), Parked()
    publisher_: Any = publisher
    parked_: Any = parked
    checkpoints: Any = None
    counts: Any = Counts()
    relay = Relay(publisher_, checkpoints, parked_, failure_counts=counts)

    outcomes = [relay.relay(records[1:] if n else records) for n in range(PARK_AFTER_FAILURES)]

    assert [o.first_unpublished for o in outcomes] == ["2"] * (PARK_AFTER_FAILURES - 1) + [None]
    assert publisher.published == ["a" * 32, "c" * 32]  # c went out once the refused event was parked
    assert outcomes[-1].parked == 1 and outcomes[-1].published == 1
    (record,) = parked.records
    assert (record["source"], record["shard_id"], record["sequence_number"]) == (RELAY_CONSUMER, OUTBOX_STREAM, "2")
    assert record["job_id"] == REFUSED and record["failures"] == PARK_AFTER_FAILURES
    assert b'"job_id": {"S": "' + REFUSED.encode() in record["raw"]  # the outbox image, in full

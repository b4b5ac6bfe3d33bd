"""One poison record on the local stack: an event the projector fails on every time it is delivered (a fault
injected at `projector.before_write` for one job) delays only its own job.

The other jobs, on the same events-stream shard too, become visible in the same drain; the poison record is
parked with its full record (the event's bytes, the stream's metadata, the error, its failed deliveries) before
the mapping gives it up, so the mapping's on-failure destination hears of nothing; once the fault is gone,
`onward redrive` replays the job through the outbox and it is visible too, its parked record marked.

What breaks without the code: without MaximumRetryAttempts and bisection on the mapping (the local pollers now
follow template.yaml's, onward_infra/pollers/failures.py) the failing batch was retried until its records were
6 h old, and every job behind the poison record on its shard stayed invisible (the drain never caught up); with the
bound but no parking (onward/pipeline/poison.py) the record would be discarded with only its metadata, and the
job never shown; without `onward redrive` (onward/operator/redrive.py) nothing would replay it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from onward.cli.main import main
from onward.domain.models import NewJob
from onward.faults import fault_subject, installed
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.poison import PARK_AFTER_FAILURES, FailureCounts
from onward.store.dynamo.attributes import from_item
from onward.store.service import JobStore

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # they read the streams

ECHO = NewJob(type="demo.echo", params={"n": 1})


class PoisonError(RuntimeError):
    """What the projector meets on the poisoned job's events: a bug, say, that only its payload triggers."""


def views(dynamodb: Any, settings: Any) -> dict[str, dict[str, Any]]:
    pages = dynamodb.get_paginator("scan").paginate(TableName=settings.status_table, ConsistentRead=True)
    return {item["job_id"]["S"]: from_item(item) for page in pages for item in page["Items"]}


def jobs_on_shard(kinesis: Any, stream: str, shard_id: str) -> set[str]:
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = kinesis.get_records(ShardIterator=iterator, Limit=10_000)["Records"]
    return {json.loads(record["Data"]).get("job_id") for record in records} - {None}


def test_one_poison_record_delays_only_its_own_job_and_redrive_shows_it(store, pipeline, settings, dynamodb,
                                                                         endpoint, capsys) -> None:
    jobs = [store.create("acme", ECHO).job.job_id for _ in range(16)]
    poisoned = jobs[7]

    def poison(point: str) -> None:
        if fault_subject() == poisoned:
            raise PoisonError(f"cannot project job {poisoned}")

    with installed("projector.before_write", poison):
        pipeline.drain()

    shown = views(dynamodb, settings)
    assert set(shown) == set(jobs) - {poisoned}
    assert {shown[job]["version"] for job in shown} == {1}
    (parked,) = ParkedRecords(dynamodb, settings.parked_table).parked_by(PROJECTOR_CONSUMER)
    neighbours = jobs_on_shard(endpoint.client("kinesis"), settings.events_stream, parked.shard_id) - {poisoned}
    assert neighbours and neighbours <= set(shown)  # jobs behind it on its shard went through
    assert parked.job_id == poisoned and parked.failures == PARK_AFTER_FAILURES
    assert json.loads(parked.raw)["job_id"] == poisoned  # the event itself, in full
    metadata = json.loads(parked.stream_record or "{}")
    assert metadata["kinesis"]["partitionKey"] == poisoned
    assert metadata["kinesis"]["sequenceNumber"] == parked.sequence_number
    assert "PoisonError" in parked.reason and f"failed {PARK_AFTER_FAILURES} deliveries" in parked.reason
    assert pipeline.projector_poller.discarded.by_condition == {}  # parked before the mapping gave it up

    assert main(["redrive", "--dry-run"]) == 0
    assert f"{poisoned}: 1 parked record (projector)" in capsys.readouterr().out
    assert main(["redrive"]) == 0
    assert "1 jobs replayed, 1 of 1 events re-published" in capsys.readouterr().out
    pipeline.drain()

    assert views(dynamodb, settings)[poisoned]["version"] == 1
    (redriven,) = ParkedRecords(dynamodb, settings.parked_table).parked_by(PROJECTOR_CONSUMER)
    assert redriven.redriven_at is not None
    assert main(["redrive"]) == 0  # nothing left to replay
    assert "0 jobs replayed" in capsys.readouterr().out


def test_a_record_that_cannot_even_be_parked_reaches_the_queue_and_redrive_replays_its_window(
        pipeline, settings, dynamodb, endpoint, monkeypatch, capsys) -> None:
    """With DynamoDB refusing the count (so no park either) the mapping gives the record up after its retries and
    sends its metadata to the on-failure queue, as on AWS; `onward redrive` replays the outbox window the message
    names and deletes it. Without the drain the message would wait in the queue, and the job stay invisible. (The
    jobs are created on this host's clock: the window is the records' arrival times.)"""
    store = JobStore(settings, client=dynamodb)
    jobs = [store.create("acme", ECHO).job.job_id for _ in range(4)]
    poisoned = jobs[1]

    def refuse(*_: Any) -> int:
        raise RuntimeError("DynamoDB refuses every write")

    def poison(point: str) -> None:
        if fault_subject() == poisoned:
            raise PoisonError(f"cannot project job {poisoned}")

    monkeypatch.setattr(FailureCounts, "count", refuse)
    with installed("projector.before_write", poison):
        pipeline.drain()

    assert set(views(dynamodb, settings)) == set(jobs) - {poisoned}
    assert pipeline.projector_poller.discarded.by_condition == {"RetryAttemptsExhausted": 1}
    assert ParkedRecords(dynamodb, settings.parked_table).parked_by(PROJECTOR_CONSUMER) == []

    assert main(["redrive"]) == 0
    assert "1 of 1 batches the projector's mapping gave up replayed" in capsys.readouterr().out
    pipeline.drain()

    assert views(dynamodb, settings)[poisoned]["version"] == 1
    sqs = endpoint.client("sqs")
    assert sqs.receive_message(QueueUrl=settings.projector_failures_queue).get("Messages", []) == []


def test_a_record_that_fails_fewer_times_than_the_bound_is_projected_not_parked(store, pipeline, settings,
                                                                                 dynamodb) -> None:
    """A transient failure (here: the first two deliveries) is retried by the mapping and then succeeds:
    nothing is parked, nothing waits for an operator."""
    job = store.create("acme", ECHO).job.job_id
    failed: list[str] = []

    def flaky(point: str) -> None:
        if fault_subject() == job and len(failed) < PARK_AFTER_FAILURES - 1:
            failed.append(point)
            raise PoisonError("a moment's failure")

    with installed("projector.before_write", flaky):
        pipeline.drain()

    assert len(failed) == PARK_AFTER_FAILURES - 1
    assert views(dynamodb, settings)[job]["version"] == 1
    assert ParkedRecords(dynamodb, settings.parked_table).parked_by(PROJECTOR_CONSUMER) == []


def test_the_parked_record_keeps_what_the_stream_delivered() -> None:
    """The stream metadata kept beside the data is the Lambda record but its data (tested without a stack)."""
    from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord

    from onward.entrypoints.projector import _metadata

    record = {"kinesis": {"partitionKey": "job-1", "sequenceNumber": "7", "data": base64.b64encode(b"{}").decode(),
                          "approximateArrivalTimestamp": 1.5}, "eventID": "shardId-1:7", "eventSource": "aws:kinesis"}
    assert json.loads(_metadata(KinesisStreamRecord(record))) == {
        "kinesis": {"partitionKey": "job-1", "sequenceNumber": "7", "approximateArrivalTimestamp": 1.5},
        "eventID": "shardId-1:7", "eventSource": "aws:kinesis"}

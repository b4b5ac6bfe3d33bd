"""Upgrades in any order (onward.domain.schema_versions, docs/upgrades.md): the relay and the projector of one
release fed, through their Lambda handlers and the event shapes their sources really send (a DynamoDB Streams
record of the outbox table, Kinesis records), what the writer of the next release or of the previous one
writes; and the job store's readers fed the items of either.

The next release is simulated as its writer would write (an event with a field this code does not know, a
newer major) and as its consumer would read (a model of the event with the new field: NextOutboxEvent, or
this code's reader of a newer major).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from onward.api import app as api_app
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.projection import digest
from onward.domain.schema_versions import NewerSchema
from onward.entrypoints import projector as projector_app
from onward.entrypoints import relay as relay_app
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.entrypoints.test_lambda_events import (
    assert_http_v2,
    http_event,
    job_store,
    kinesis_event,
    outbox_event,
    outbox_stream_arn,
    sample,
)

pytestmark = pytest.mark.integration

EVENTS_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/events"


class NextOutboxEvent(OutboxEvent):
    """The event as the next release reads it: one optional field more (an additive change, same major)."""

    priority_band: str | None = None


def outbox_image(environment: dict[str, str], endpoint, job_id: str) -> dict[str, Any]:
    return endpoint.client("dynamodb").query(
        TableName=environment["OUTBOX_TABLE"], KeyConditionExpression="job_id = :j",
        ExpressionAttributeValues={":j": {"S": job_id}})["Items"][0]


def stream_insert(environment: dict[str, str], endpoint, image: dict[str, Any]) -> dict[str, Any]:
    """The sample's INSERT record of the outbox table's stream, carrying `image`."""
    event = sample("dynamodb-update")
    record = event["Records"][0]
    record["eventSourceARN"] = outbox_stream_arn(environment, endpoint)
    record["dynamodb"].update(Keys={"job_id": image["job_id"], "version": image["version"]}, NewImage=image,
                              StreamViewType="NEW_IMAGE", SequenceNumber="900000000000000000001")
    event["Records"] = [record]
    return event


def published(environment: dict[str, str], endpoint, job_id: str) -> list[bytes]:
    kinesis = endpoint.client("kinesis")
    stream = environment["EVENTS_STREAM"]
    found = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        found += [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]
                  if json.loads(r["Data"]).get("job_id") == job_id]
    return found


def scan(environment: dict[str, str], endpoint, table: str) -> list[dict[str, Any]]:
    return endpoint.client("dynamodb").scan(TableName=environment[table])["Items"]


def view(environment: dict[str, str], endpoint, job_id: str) -> dict[str, Any]:
    return endpoint.client("dynamodb").get_item(TableName=environment["STATUS_TABLE"],
                                                Key={"job_id": {"S": job_id}})["Item"]


@pytest.mark.own_stack  # it reads the events stream back
def test_this_release_carries_a_field_the_next_writer_adds_and_the_next_projector_agrees(
        lambda_environment, endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next release's writer adds `priority_band` to its events; this release's relay and projector run
    beside it while the deploy goes on. Without extra fields kept (OutboxEvent's extra="allow", Heartbeat's
    "ignore") the relay parked the event ("Extra inputs are not permitted") and the job's status froze; without
    them passed on whole, the next projector never saw the field; without DIGESTED_FIELDS, the next release's
    projector took this release's projection of the same event for a conflict."""
    job = job_store().create("acme", NewJob(type="demo.echo")).job
    image = {**outbox_image(lambda_environment, endpoint, job.job_id), "priority_band": {"S": "high"}}

    relayed = relay_app.handler(stream_insert(lambda_environment, endpoint, image), LocalLambdaContext("relay"))

    assert relayed == {"batchItemFailures": []}
    [data] = published(lambda_environment, endpoint, job.job_id)
    assert json.loads(data)["priority_band"] == "high"  # passed on as the writer wrote it
    projected = projector_app.handler(kinesis_event([data], EVENTS_ARN), LocalLambdaContext("projector"))
    assert projected == {"batchItemFailures": []}
    assert view(lambda_environment, endpoint, job.job_id)["version"] == {"N": "1"}
    assert scan(lambda_environment, endpoint, "PARKED_TABLE") == []

    # The same record redelivered to the next release's projector: a duplicate, not a conflict.
    for module in ("projector", "records"):  # records.py reads the event, projector.py sorts it by type
        monkeypatch.setattr(f"onward.pipeline.projector.{module}.OutboxEvent", NextOutboxEvent)
    again = projector_app.handler(kinesis_event([data], EVENTS_ARN), LocalLambdaContext("projector"))
    assert again == {"batchItemFailures": []}
    assert scan(lambda_environment, endpoint, "CONFLICTS_TABLE") == []


def test_the_next_projector_reads_what_this_and_the_previous_writer_wrote(lambda_environment, endpoint,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The reverse order: the consumer upgraded first. The golden sample is the first contract's event (no
    `run_at`, added later; no `priority_band`): the next release's projector applies it with the same digest
    this release gives it. Without defaults on added fields and ADDED_FIELDS, the upgraded projector parked the
    old writer's events, or took their redelivery for a conflict."""
    previous = outbox_event(version=2, status="running")
    for module in ("projector", "records"):  # records.py reads the event, projector.py sorts it by type
        monkeypatch.setattr(f"onward.pipeline.projector.{module}.OutboxEvent", NextOutboxEvent)

    response = projector_app.handler(kinesis_event([json.dumps(previous).encode()], EVENTS_ARN),
                                     LocalLambdaContext("projector"))

    assert response == {"batchItemFailures": []}
    row = view(lambda_environment, endpoint, previous["job_id"])
    assert row["status"] == {"S": "running"}
    assert row["digest"] == {"S": digest(OutboxEvent.model_validate(previous))}
    assert scan(lambda_environment, endpoint, "PARKED_TABLE") == []


def test_a_newer_major_is_parked_with_its_reason_and_the_upgraded_projector_reads_it(
        lambda_environment, endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """A breaking change (schema 2) reaching this release's consumers, as a deploy out of order would send
    it: both park it, with a reason that names both majors, and go on with the shard; the projector of the
    release that reads schema 2 applies the parked record. Without the check, the relay published an event it
    could not understand and the projector parked it as "unsupported" with no word of what to do."""
    job = job_store().create("acme", NewJob(type="demo.echo")).job
    image = {**outbox_image(lambda_environment, endpoint, job.job_id), "schema": {"N": "2"}}
    newer = outbox_event(schema=2)

    relayed = relay_app.handler(stream_insert(lambda_environment, endpoint, image), LocalLambdaContext("relay"))
    projected = projector_app.handler(kinesis_event([json.dumps(newer).encode()], EVENTS_ARN),
                                      LocalLambdaContext("projector"))

    assert relayed == projected == {"batchItemFailures": []}
    parked = {item["source"]["S"]: item for item in scan(lambda_environment, endpoint, "PARKED_TABLE")}
    assert parked["relay"]["reason"]["S"].startswith("outbox event of schema 2, newer than this reader's 1")
    assert parked["projector"]["reason"]["S"].startswith("event of schema 2, newer than this reader's 1")

    monkeypatch.setattr("onward.pipeline.projector.records.EVENT_SCHEMA", 2)  # the upgraded projector (its reader)
    redriven = projector_app.handler(kinesis_event([parked["projector"]["raw"]["B"]], EVENTS_ARN),
                                     LocalLambdaContext("projector"))
    assert redriven == {"batchItemFailures": []}
    assert view(lambda_environment, endpoint, newer["job_id"])["status"] == {"S": newer["status"]}


def test_the_store_and_the_api_read_an_item_with_a_field_they_do_not_know_and_refuse_a_newer_shape(
        lambda_environment, endpoint) -> None:
    """A job row written by the next release (an attribute more, same shape) is read by this release's API;
    one of a newer shape is refused with the reason rather than read in part. Without known_fields, the Job
    model's extra="forbid" failed every read of the job (a 500 on GET /jobs/{id} for the old API version
    while a canary of the new one runs)."""
    job = job_store().create("acme", NewJob(type="demo.echo")).job
    dynamodb = endpoint.client("dynamodb")
    key = {"pk": {"S": f"JOB#{job.job_id}"}, "sk": {"S": "JOB"}}
    dynamodb.update_item(TableName=lambda_environment["JOBS_TABLE"], Key=key,
                         UpdateExpression="SET priority_band = :b", ExpressionAttributeValues={":b": {"S": "high"}})

    answer = api_app.handler(http_event("GET", f"/jobs/{job.job_id}", claims={"tenant": "acme"},
                                        path_parameters={"job_id": job.job_id}), LocalLambdaContext("api"))

    assert_http_v2(answer)
    assert answer["statusCode"] == 200, answer["body"]
    assert json.loads(answer["body"])["job_id"] == job.job_id
    dynamodb.update_item(TableName=lambda_environment["JOBS_TABLE"], Key=key,
                         UpdateExpression="SET shape = :s", ExpressionAttributeValues={":s": {"N": "2"}})
    with pytest.raises(NewerSchema, match="job row of schema 2, newer than this reader's 1"):
        job_store().get(job.job_id)

"""Bad input, generated (hypothesis), on the embedded endpoint: malformed Kinesis records reaching the
projector, malformed outbox-stream images reaching the relay, and results too large for a DynamoDB item.

tests/integration/pipeline/test_projection.py and test_relay.py show one example of each poison kind; these
generate many (random bytes, JSON of any shape, valid events with one field removed or replaced) and check
the property for each: the record is parked with its raw bytes and a reason, the batch reports no failure
(the shard is never blocked) and the valid record behind it is applied.
"""

from __future__ import annotations

import base64
import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.domain.errors import PayloadTooLarge
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.states import JobState, RunOutcome
from onward.entrypoints import projector as projector_handler
from onward.pipeline.checkpoints import OUTBOX_STREAM
from onward.pipeline.outbox import event_from_image
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.projector.records import UnreadableRecord, parse_record
from onward.pipeline.relay.publisher import encode
from onward.pipeline.relay.relay import StreamRecord
from onward.runtime.worker import Registry, Worker
from onward.store.dynamo.attributes import from_item, to_item
from onward.store.service import MAX_RESULT_BYTES, JobStore
from onward_infra.lambda_context import LocalLambdaContext

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # they read the streams

SHARD = "shardId-000000000000"
FUZZ = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
_sequences = itertools.count(1_000)

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=10)


# what a DynamoDB attribute can hold (numbers within its 38 digits, none closer to 0 than 1e-130: a float such
# as 5e-324 is refused by boto3's serializer as an Underflow before any request)
ATTRIBUTE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(-1e9, 1e9, allow_nan=False).filter(lambda number: number == 0 or abs(number) >= 1e-100)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10)


def valid_event(version: int = 1) -> OutboxEvent:
    job_id = uuid.uuid4().hex
    # as the relay delivers it: committed (a re-published event, without committed_at, has its job looked up)
    moment = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT07:00:00.000Z")
    return OutboxEvent(event_id=f"{job_id}:{version}", job_id=job_id, tenant_id="acme", type="demo.echo",
                       version=version, status=JobState.QUEUED, attempt=0, occurred_at=moment, committed_at=moment)


@st.composite
def poison_payloads(draw: st.DrawFn) -> bytes:
    """Random bytes, any JSON value, or a valid event's JSON with one field removed or replaced."""
    kind = draw(st.sampled_from(["bytes", "json", "removed", "replaced"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    payload = json.loads(encode(valid_event()))
    name = draw(st.sampled_from(sorted(payload)))
    if kind == "removed":
        del payload[name]
    else:
        payload[name] = draw(JSON)
    return json.dumps(payload).encode()


def kinesis_record(data: bytes, sequence: int) -> dict[str, Any]:
    return {"kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": f"pk-{sequence}",
                        "sequenceNumber": str(sequence), "data": base64.b64encode(data).decode(),
                        "approximateArrivalTimestamp": 1_800_000_000.0},
            "eventSource": "aws:kinesis", "eventVersion": "1.0", "eventID": f"{SHARD}:{sequence}",
            "eventName": "aws:kinesis:record", "invokeIdentityArn": "arn:aws:iam::123456789012:role/p",
            "awsRegion": "us-east-1", "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/events"}


def test_any_malformed_kinesis_record_is_parked_with_its_reason_and_never_blocks_the_shard(
        stack_environment, settings, dynamodb):
    """Without parking, an unreadable record would raise, fail the batch from there, and Lambda would
    redeliver it forever: the valid event behind it would never reach the view."""
    parked = ParkedRecords(dynamodb, settings.parked_table)
    status_table = settings.status_table

    @FUZZ
    @given(poison=poison_payloads())
    def check(poison: bytes) -> None:
        good = valid_event()
        first, second = next(_sequences), next(_sequences)
        response = projector_handler.handler({"Records": [kinesis_record(poison, first),
                                                          kinesis_record(encode(good), second)]},
                                             LocalLambdaContext("onward-projector"))
        assert response.get("batchItemFailures", []) == [], "a bad record must not block the shard"
        view = dynamodb.get_item(TableName=status_table, Key={"job_id": {"S": good.job_id}}, ConsistentRead=True)
        assert from_item(view["Item"])["version"] == 1, "the record behind the poison was applied"
        try:
            parse_record(poison)
        except UnreadableRecord:
            mine = [p for p in parked.parked_by("projector") if p.sequence_number == str(first)]
            assert len(mine) == 1 and mine[0].raw == poison and mine[0].shard_id == SHARD
            assert mine[0].reason, "parked with its reason"

    check()


@st.composite
def broken_images(draw: st.DrawFn, image: dict[str, Any]) -> dict[str, Any]:
    """A real outbox image with one attribute removed, retyped, replaced by garbage, or given a map whose
    values carry no DynamoDB type (as moto's stream encodes a map with an empty key: the decoder raised
    AttributeError, which the relay did not park)."""
    broken = dict(image)
    name = draw(st.sampled_from(sorted(image)))
    action = draw(st.sampled_from(["remove", "retype", "garbage", "untyped"]))
    if action == "untyped":
        broken[name] = {"M": {"N": draw(st.sampled_from(["1", "x", ""]))}}
        return broken
    if action == "remove":
        del broken[name]
    elif action == "retype":
        ((kind, value),) = image[name].items()
        broken[name] = {"N": "12.5"} if kind == "S" else {"S": str(value)}
    else:
        broken[name] = to_item({"v": draw(ATTRIBUTE_JSON)}).get("v", {"NULL": True})  # to_item leaves out None
    return broken


def test_any_malformed_outbox_image_is_parked_and_the_batch_goes_on_past_it(
        stack_environment, store, settings, dynamodb):
    """Without parking in the relay, one undecodable image would be the batch's first failure on every
    redelivery and the outbox stream would stop there; here the batch reports no failure (the event source
    moves past it), the image is parked under the outbox stream (Lambda's event names no shard) and the
    valid event behind it is published."""
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    (event,) = store.events(job_id)
    image = to_item(event.model_dump(mode="json", by_alias=True))
    relay = Deployment(settings, clients={"dynamodb": dynamodb}).relay
    parked = ParkedRecords(dynamodb, settings.parked_table)

    @FUZZ
    @given(broken=broken_images(image))
    def check(broken: dict[str, Any]) -> None:
        first, second = next(_sequences), next(_sequences)
        now = system_clock()
        outcome = relay.relay([StreamRecord(str(first), "INSERT", broken, now),
                               StreamRecord(str(second), "INSERT", image, now)])
        assert outcome.first_unpublished is None, "nothing held the stream back"
        try:
            event_from_image(broken)
        except Exception:  # noqa: BLE001 - whatever the decoder refuses must be parked
            assert (outcome.parked, outcome.published) == (1, 1)
            mine = [p for p in parked.parked_by("relay") if p.sequence_number == str(first)]
            assert len(mine) == 1 and mine[0].reason.startswith("invalid outbox image")
            assert mine[0].shard_id == OUTBOX_STREAM
        else:
            assert outcome.published == 2

    check()


# --- oversized results -------------------------------------------------------------------------------------

def _worker(store: JobStore, result: Any) -> Worker:
    registry = Registry()
    registry.register("demo.echo")(lambda context: result)
    return Worker(store, registry, worker_id="w-big", lease_s=30)


def test_a_result_too_large_for_an_item_fails_the_job_clearly_and_stores_nothing_truncated(store):
    """Without the size check in JobStore.complete, DynamoDB would refuse the transaction (ValidationException
    over 400 KB) on every try and the job would loop through lease expiries; or a cut result would be
    stored as if whole. The worker records a permanent failure naming the size and the limit."""
    job_id = store.create("acme", NewJob(type="demo.echo", max_attempts=3)).job.job_id
    too_big = {"blob": "x" * (MAX_RESULT_BYTES + 1)}

    assert _worker(store, too_big).run_once()

    job = store.get(job_id)
    assert job.state is JobState.DEAD and job.attempt == 1, "refused once, clearly: not retried"
    assert job.last_error is not None and job.last_error.error_type == PayloadTooLarge.__name__
    assert str(MAX_RESULT_BYTES) in job.last_error.message and "bytes" in job.last_error.message
    assert store.result(job_id) is None, "nothing stored, so nothing truncated"
    (run,) = store.runs(job_id)
    assert run.outcome is RunOutcome.FAILED and run.error == job.last_error
    assert store.events(job_id)[-1].error == job.last_error  # the view will say why


def test_a_large_result_within_the_limit_is_stored_whole_and_the_event_carries_only_its_size(store):
    """A result up to MAX_RESULT_BYTES is kept whole in its own RESULT item (by reference from the job and
    the view); the event carries its size, not the result (inline only up to 1 KB), so a Kinesis record
    never grows with it. Without that, a large result would be cut or exceed the 1 MiB record."""
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    large = {"blob": "y" * (MAX_RESULT_BYTES - 100)}

    assert _worker(store, large).run_once()

    assert store.get(job_id).state is JobState.SUCCEEDED
    assert store.result(job_id) == large
    last = store.events(job_id)[-1]
    assert last.result_inline is None and last.result_size_bytes == len(json.dumps(large, separators=(",", ":")))

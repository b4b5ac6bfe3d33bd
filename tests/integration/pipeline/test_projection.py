"""The status projector over real HTTP to the embedded endpoint: the version guard, conflicts, requests per
event, cancellation through the view, watermarks, poison records, stop-at-first-failure, replay, and a
whole population of jobs from the store through relay, Kinesis and projector into the view."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.models import ErrorSummary, NewJob, OutboxEvent
from onward.domain.projection import ProjectionOutcome, digest
from onward.domain.states import JobState
from onward.entrypoints import projector as projector_handler
from onward.pipeline.checkpoints import CheckpointStore
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.projector.coalesce import Coalesced
from onward.pipeline.projector.projector import StatusProjector
from onward.pipeline.relay.publisher import KinesisPublisher, encode
from onward.store.dynamo.attributes import from_item
from onward.store.service import CancelStatus, JobStore, ReportStatus
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.pipeline.test_heartbeat import slot_commits, vouched

A, D, S, C = (ProjectionOutcome.APPLIED, ProjectionOutcome.DUPLICATE, ProjectionOutcome.STALE,
              ProjectionOutcome.CONFLICT)
ECHO = NewJob(type="demo.echo", params={"n": 1})
SHARD = "shardId-000000000000"


# --- helpers --------------------------------------------------------------------------------------------

def new_job_id() -> str:
    return uuid.uuid4().hex


# Yesterday: events as the relay delivers them, committed well within every retention (older than the shortest
# one, the projector would look their jobs up: onward/pipeline/projector/gone.py; these jobs have no rows).
EVENT_DAY = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")


def make_event(job_id: str, version: int, status: str, *, attempt: int = 1, second: int | None = None,
               **extra: Any) -> OutboxEvent:
    moment = f"{EVENT_DAY}T06:50:{version if second is None else second:02d}.000Z"
    extra.setdefault("committed_at", moment)
    return OutboxEvent(event_id=f"{job_id}:{version}", job_id=job_id, tenant_id="acme", type="demo.echo",
                       version=version, status=JobState(status), attempt=attempt, occurred_at=moment, **extra)


def view_of(dynamodb, settings, job_id: str) -> dict[str, Any] | None:
    item = dynamodb.get_item(TableName=settings.status_table, Key={"job_id": {"S": job_id}},
                             ConsistentRead=True).get("Item")
    return None if item is None else from_item(item)


def all_views(dynamodb, settings) -> dict[str, dict[str, Any]]:
    pages = dynamodb.get_paginator("scan").paginate(TableName=settings.status_table, ConsistentRead=True)
    return {item["job_id"]["S"]: from_item(item) for page in pages for item in page["Items"]}


def conflicts_of(dynamodb, settings, job_id: str) -> list[dict[str, Any]]:
    return [from_item(item) for item in dynamodb.query(
        TableName=settings.conflicts_table, KeyConditionExpression="job_id = :j",
        ExpressionAttributeValues={":j": {"S": job_id}}, ConsistentRead=True)["Items"]]


STREAM_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/onward-events"


def kinesis_event(payloads: list[bytes], *, shard_id: str = SHARD, first_sequence: int = 1,
                  stream_arn: str = STREAM_ARN) -> dict[str, Any]:
    """A Kinesis event as Lambda delivers it (the shape infra/onward_infra/pollers/ builds from GetRecords)."""
    records = []
    for offset, data in enumerate(payloads):
        sequence = str(first_sequence + offset)
        records.append({
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": f"pk-{sequence}",
                "sequenceNumber": sequence,
                "data": base64.b64encode(data).decode(),
                "approximateArrivalTimestamp": 1_800_000_000.0 + offset,
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": f"{shard_id}:{sequence}",
            "eventName": "aws:kinesis:record",
            "invokeIdentityArn": "arn:aws:iam::123456789012:role/onward-projector",
            "awsRegion": "us-east-1",
            "eventSourceARN": stream_arn,
        })
    return {"Records": records}


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    return projector_handler.handler(event, LocalLambdaContext("onward-projector"))


def failed_sequences(response: dict[str, Any]) -> list[str]:
    return [failure["itemIdentifier"] for failure in response.get("batchItemFailures", [])]


class RequestCounter:
    """Every DynamoDB API call a client makes (botocore's before-call hook: once per operation)."""

    def __init__(self, client: Any) -> None:
        self.operations: list[str] = []
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, event_name: str, **_: Any) -> None:
        self.operations.append(event_name.rsplit(".", 1)[-1])

    def during(self, call, *args: Any) -> tuple[Any, list[str]]:
        start = len(self.operations)
        result = call(*args)
        return result, self.operations[start:]


@pytest.fixture
def projector(stack_environment) -> StatusProjector:
    """The projector exactly as the Lambda handler builds it from its environment."""
    return Deployment.from_environment().status_projector


@pytest.fixture
def outcomes() -> list[ProjectionOutcome]:
    """Records the outcome of every event a StatusProjector projects while the test runs (handler and pollers
    included: a batch's jobs through project_coalesced, a lone event through project), without changing what
    it does."""
    seen: list[ProjectionOutcome] = []
    original, original_coalesced = StatusProjector.project, StatusProjector.project_coalesced

    def spy(self: StatusProjector, event: OutboxEvent) -> ProjectionOutcome:
        outcome = original(self, event)
        seen.append(outcome)
        return outcome

    def spy_coalesced(self: StatusProjector, events: Sequence[OutboxEvent]) -> tuple[Coalesced, int]:
        plan, writes = original_coalesced(self, events)
        seen.extend(plan.outcomes)
        return plan, writes

    with mock.patch.object(StatusProjector, "project", spy), \
            mock.patch.object(StatusProjector, "project_coalesced", spy_coalesced):
        yield seen


# --- the five-event sequence and conflicts --------------------------------------------------------------

def test_the_five_event_sequence_ends_succeeded_v3_with_stale_duplicate_and_a_kept_conflict(
        projector, settings, dynamodb):
    """Invariant 7 against the real table. Without the `version < :v` condition the stale running/v2 would
    move the view backwards; without the digest the failed/v3 would either overwrite succeeded/v3 silently
    or vanish as a 'duplicate'; without _keep_conflict there would be no record of the disagreement."""
    job_id = new_job_id()
    running = make_event(job_id, 2, "running")
    succeeded = make_event(job_id, 3, "succeeded", result_size_bytes=8, result_inline={"n": 1})
    dead = make_event(job_id, 3, "dead", error=ErrorSummary.of("RuntimeError", "boom"))

    got = [projector.project(running), projector.project(succeeded)]
    after_v3 = view_of(dynamodb, settings, job_id)
    got += [projector.project(running), projector.project(succeeded), projector.project(dead)]

    assert got == [A, A, S, D, C]
    final = view_of(dynamodb, settings, job_id)
    assert final == after_v3  # item for item, projected_at included: nothing after v3 wrote the view
    assert (final["status"], final["version"], final["digest"]) == ("succeeded", 3, digest(succeeded))
    assert final["occurred_at"] == succeeded.occurred_at and final["result_inline"] == {"n": 1}
    assert "error" not in final

    (conflict,) = conflicts_of(dynamodb, settings, job_id)
    assert conflict["version"] == 3
    assert json.loads(conflict["view_payload"])["digest"] == digest(succeeded)
    assert json.loads(conflict["view_payload"])["status"] == "succeeded"
    assert OutboxEvent.model_validate_json(conflict["incoming_payload"]) == dead

    projector.project(dead)  # the same conflict redelivered is kept once (same conflict id)
    assert len(conflicts_of(dynamodb, settings, job_id)) == 1


# --- requests per event ---------------------------------------------------------------------------------

def test_each_event_costs_one_request_fresh_duplicate_or_stale_and_two_for_a_conflict(settings):
    """The issue's performance target (1.0 requests per event). Without ReturnValuesOnConditionCheckFailure
    =ALL_OLD the projector would need a GetItem to classify every refusal (2 requests for duplicates and
    stale events); a read-then-write projector pays 2 on every event."""
    client = settings.client("dynamodb")
    counter = RequestCounter(client)
    projector = StatusProjector(client, settings.status_table, settings.conflicts_table,
                                CheckpointStore(client, settings.checkpoint_table),
                                ParkedRecords(client, settings.parked_table))
    job_id = new_job_id()
    v1, v2 = make_event(job_id, 1, "queued", attempt=0), make_event(job_id, 2, "running")
    cases = [
        (v1, A, ["PutItem"]),  # fresh: no view yet
        (v2, A, ["PutItem"]),  # fresh: newer than the view
        (v2, D, ["PutItem"]),  # duplicate
        (v1, S, ["PutItem"]),  # stale
        (make_event(job_id, 2, "running", attempt=9), C, ["PutItem", "PutItem"]),  # conflict: kept apart
    ]
    for event, expected, requests in cases:
        outcome, made = counter.during(projector.project, event)
        assert (outcome, made) == (expected, requests), event


# --- cancellation through the view ----------------------------------------------------------------------

def test_cancel_wins_the_view_ends_cancelled(store, pipeline, settings, dynamodb):
    """Invariant 9 seen by the browser: the request shows as running + cancel_requested, then cancelled;
    the worker's late completion is fenced and never reaches the view. Without the version guard a
    redelivered running/v3 could still overwrite cancelled/v4."""
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    assert store.cancel(job.job_id, "acme").status is CancelStatus.REQUESTED
    pipeline.drain()
    requested = view_of(dynamodb, settings, job.job_id)
    assert (requested["status"], requested["version"], requested["cancel_requested"]) == ("running", 3, True)

    assert store.acknowledge_cancel(lease).applied
    assert store.complete(lease, "late").status is ReportStatus.FENCED
    pipeline.drain()
    final = view_of(dynamodb, settings, job.job_id)
    assert (final["status"], final["version"]) == ("cancelled", 4)
    assert final["version"] == store.get(job.job_id).version
    assert "result_inline" not in final
    assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_ENDED


def test_completion_wins_the_view_ends_succeeded_and_a_later_cancel_is_already_ended(
        store, pipeline, settings, dynamodb):
    """Invariant 9, other schedule: the refused cancel writes no event, so the view stays succeeded."""
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    assert store.complete(lease, {"rows": 3}).applied
    pipeline.drain()
    before = view_of(dynamodb, settings, job.job_id)
    assert store.cancel(job.job_id, "acme").status is CancelStatus.ALREADY_ENDED
    assert pipeline.drain() == 0  # nothing was committed, nothing travels
    final = view_of(dynamodb, settings, job.job_id)
    assert final == before
    assert (final["status"], final["version"], final["result_inline"]) == ("succeeded", 3, {"rows": 3})


# --- watermark ------------------------------------------------------------------------------------------

def _shard_of(kinesis, stream: str, partition_key: str) -> str:
    """Which shard Kinesis routes a partition key to (MD5 of the key within the shards' hash ranges)."""
    point = int(hashlib.md5(partition_key.encode()).hexdigest(), 16)
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        low, high = (int(shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
        if low <= point <= high:
            return shard["ShardId"]
    raise AssertionError(partition_key)


def test_each_kinesis_shard_gets_a_watermark_of_the_beat_it_projected_and_events_move_none(
        store, pipeline, settings, dynamodb, clock, endpoint):
    """Invariant 10: freshness is computed from these. Events move no watermark: one job's event comes from
    one partition of the outbox and says nothing of the others, so with every shard carrying events and no
    beat nothing is vouched for. A beat's slots, projected on a shard, confirm it through the oldest slot's
    commit time (read here from the outbox stream itself), and with it every event committed before: each
    view row's commit time is before the watermark. Without finish_batch recording the slots no watermark
    exists and the read path could only guess how far behind the view is; with one global watermark a
    stalled shard would hide behind a busy one; were events still moving it, the first assertion fails."""
    kinesis = endpoint.client("kinesis")
    shard_count = len(kinesis.list_shards(StreamName=settings.events_stream)["Shards"])
    carrying: set[str] = set()
    for _ in range(64):  # job ids are random: create until every shard carries some job
        clock.advance(1.5)
        job = store.create("acme", ECHO).job
        carrying.add(_shard_of(kinesis, settings.events_stream, job.job_id))
        if len(carrying) == shard_count:
            break
    store.claim("w1", 30)
    assert len(carrying) == shard_count > 1
    pipeline.drain()
    checkpoints = CheckpointStore(dynamodb, settings.checkpoint_table)
    assert checkpoints.watermarks("projector") == []  # every shard projected events, none is confirmed

    beat = pipeline.heartbeats.emit()
    started = iso(system_clock())
    pipeline.drain()
    finished = iso(system_clock())

    committed = slot_commits(endpoint, settings.outbox_table, epoch_ms(beat.occurred_at))
    assert sorted(committed) == list(range(beat.slots))
    confirmed = vouched(beat, committed)
    marks = {mark.shard_id: mark for mark in checkpoints.watermarks("projector")}
    assert {shard: (mark.newest_event_at, mark.slots) for shard, mark in marks.items()} == dict.fromkeys(
        carrying, (confirmed, beat.slots))
    assert all(started <= mark.processed_at <= finished for mark in marks.values())
    views = all_views(dynamodb, settings)
    assert len(views) == len(list(store.all_jobs()))
    assert all(view["committed_at"] < confirmed for view in views.values())  # all vouched for


# --- poison records -------------------------------------------------------------------------------------

def test_poison_records_are_parked_with_raw_bytes_and_reason_and_the_shard_moves_on(
        stack_environment, settings, dynamodb):
    """Invariant 8. Without parking, the garbage record would fail the batch and Lambda would redeliver it
    forever, blocking event B (and everything behind it on the shard)."""
    a, b = make_event(new_job_id(), 1, "queued", attempt=0), make_event(new_job_id(), 2, "running")
    garbage = b"\x00\xff not json at all"
    wrong_schema = json.dumps({**json.loads(encode(b)), "schema": 2}).encode()
    missing = json.dumps({"schema": 1, "job_id": a.job_id, "version": 5}).encode()
    batch = kinesis_event([encode(a), garbage, wrong_schema, missing, encode(b)], first_sequence=41)

    response = invoke(batch)

    assert failed_sequences(response) == []
    assert view_of(dynamodb, settings, a.job_id)["version"] == 1
    assert view_of(dynamodb, settings, b.job_id)["status"] == "running"
    parked = sorted(ParkedRecords(dynamodb, settings.parked_table).parked_by("projector"),
                    key=lambda record: int(record.sequence_number))
    assert [(p.shard_id, p.sequence_number, p.raw) for p in parked] == [
        (SHARD, "42", garbage), (SHARD, "43", wrong_schema), (SHARD, "44", missing)]
    reasons = [p.reason for p in parked]
    assert reasons[0].startswith("not JSON")
    assert reasons[1].startswith("event of schema 2, newer than this reader's 1")
    assert reasons[2].startswith("invalid event")

    assert failed_sequences(invoke(batch)) == []  # a redelivery parks each record once
    assert len(ParkedRecords(dynamodb, settings.parked_table).parked_by("projector")) == 3


# --- stop at the first failure --------------------------------------------------------------------------

def test_a_failing_record_stops_the_batch_and_redelivery_from_it_applies_the_rest(
        stack_environment, settings, dynamodb):
    """The issue's ordering rule (powertools #2850). Without InOrderBatchProcessor (entrypoints.in_order_batches),
    Powertools would go on and apply job Y's running/v2 although its queued/v1 failed; the response would
    name only record 2, and Lambda would resume there. Here record 3 is held back and reported too (Y's two
    events are one folded write, which fails as its first record, Y's v1)."""
    x, y = new_job_id(), new_job_id()
    records = [make_event(x, 1, "queued", attempt=0), make_event(y, 1, "queued", attempt=0),
               make_event(y, 2, "running")]
    batch = kinesis_event([encode(e) for e in records], first_sequence=7)
    original = StatusProjector._put_view

    def throttled_on_y(self: StatusProjector, event: OutboxEvent, below: int) -> dict[str, Any] | None:
        if event.job_id == y:
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
            raise ClientError(error, "PutItem")
        return original(self, event, below)

    with mock.patch.object(StatusProjector, "_put_view", throttled_on_y):
        response = invoke(batch)

    assert failed_sequences(response) == ["8", "9"]
    assert view_of(dynamodb, settings, x)["version"] == 1
    assert view_of(dynamodb, settings, y) is None  # neither y/v1 (failed) nor y/v2 (behind it)

    redelivered = {"Records": batch["Records"][1:]}  # Lambda resumes at the lowest failed sequence number
    assert failed_sequences(invoke(redelivered)) == []
    final = view_of(dynamodb, settings, y)
    assert (final["status"], final["version"]) == ("running", 2)


# --- replay ---------------------------------------------------------------------------------------------

def test_replaying_a_delivered_window_changes_nothing_and_counts_duplicates(
        store, pipeline, settings, dynamodb, endpoint, outcomes):
    """Invariant 7 under replay (`onward replay`): re-published events are all refused by the version guard
    without writing, so the view is identical item for item (projected_at too), each job's last event counts
    as a duplicate and every earlier one as stale; the watermarks (at the beat before the replay) do not
    move: re-published events carry no beat, and an event moves no watermark."""
    done = store.create("acme", ECHO).job
    store.complete(store.claim("w1", 30), {"ok": True})
    dead = store.create("acme", ECHO).job
    store.fail(store.claim("w1", 30), ErrorSummary.of("ValueError", "bad"), permanent=True)
    cancelled = store.create("globex", ECHO).job
    store.cancel(cancelled.job_id)
    running = store.create("globex", ECHO).job
    store.claim("w1", 30)
    job_ids = [done.job_id, dead.job_id, cancelled.job_id, running.job_id]
    pipeline.drain(beat=True)
    checkpoints = CheckpointStore(dynamodb, settings.checkpoint_table)
    views_before = all_views(dynamodb, settings)
    marks_before = {m.shard_id: m.newest_event_at for m in checkpoints.watermarks("projector")}
    assert set(views_before) == set(job_ids)
    assert len(marks_before) > 1 and None not in marks_before.values()
    outcomes.clear()

    events = [event for job_id in job_ids for event in store.events(job_id)]
    assert all(KinesisPublisher(endpoint.client("kinesis"), settings.events_stream).publish(events))
    # each consumer of the events stream (the projector, and the webhook matcher beside it) takes each once
    assert pipeline.drain() == len(events) * len(pipeline.pollers[1:])

    assert Counter(outcomes) == {D: len(job_ids), S: len(events) - len(job_ids)}
    assert all_views(dynamodb, settings) == views_before
    assert {m.shard_id: m.newest_event_at for m in checkpoints.watermarks("projector")} == marks_before
    assert dynamodb.scan(TableName=settings.conflicts_table, Select="COUNT")["Count"] == 0


# --- end to end -----------------------------------------------------------------------------------------

PLANS = ("complete", "fail_permanent", "retry_then_complete", "cancel_queued", "cancel_running", "running")


def test_thirty_jobs_of_three_tenants_end_with_the_view_equal_to_the_job_rows(
        store: JobStore, pipeline, settings, dynamodb, clock):
    """Invariant 8 end to end: every committed transition travels outbox -> relay -> Kinesis -> projector,
    so after the pipeline drains each job's view shows exactly its row's version and state. A lost, reordered
    or backwards-applied event anywhere on the path leaves some job behind or wrong."""
    plan: dict[str, str] = {}
    for index in range(30):
        tenant = ("acme", "globex", "initech")[index % 3]
        job = store.create(tenant, NewJob(type="demo.echo", params={"i": index}, max_attempts=3)).job
        plan[job.job_id] = PLANS[index % len(PLANS)]
        clock.advance(0.01)
    for job_id, what in plan.items():
        if what == "cancel_queued":
            assert store.cancel(job_id).status is CancelStatus.CANCELLED
    pipeline.drain()  # part of the history travels early, the rest in later batches

    for _ in range(2):  # the second round takes the retries once their backoff has passed
        while (lease := store.claim("w1", 7200)) is not None:
            what = plan[lease.job_id]
            if what == "complete" or (what == "retry_then_complete" and lease.attempt > 1):
                assert store.complete(lease, {"job": lease.job_id}).applied
            elif what == "fail_permanent":
                assert store.fail(lease, ErrorSummary.of("ValueError", "bad input"), permanent=True).applied
            elif what == "retry_then_complete":
                assert store.fail(lease, ErrorSummary.of("ConnectionError", "timeout")).applied
            elif what == "cancel_running":
                assert store.cancel(lease.job_id).status is CancelStatus.REQUESTED
                assert store.acknowledge_cancel(lease).applied
            clock.advance(0.01)
        clock.advance(3600)
    pipeline.drain()

    jobs = {job_id: store.get(job_id) for job_id in plan}
    assert Counter(job.state.value for job in jobs.values()) == {
        "succeeded": 10, "dead": 5, "cancelled": 10, "running": 5}
    views = all_views(dynamodb, settings)
    assert set(views) == set(plan)
    for job_id, job in jobs.items():
        view = views[job_id]
        assert (view["version"], view["status"]) == (job.version, job.state.value), job_id
        assert (view["tenant_id"], view["attempt"], view["cancel_requested"], view["occurred_at"]) == (
            job.tenant_id, job.attempt, job.cancel_requested, iso(job.updated_at)), job_id
        assert view["digest"] == digest(store.events(job_id)[-1])

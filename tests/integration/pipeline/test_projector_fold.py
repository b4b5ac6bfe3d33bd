"""The projector's batches against the embedded endpoint: a job's events in one batch coalesced into one PutItem,
conflicts kept as one by one keeps them when the view holds more than assumed (and between two records of one
batch), the writes saved counted, the failures a batch reports when one job's writes fail (the earliest
failed record and everything after it), and the fault point every projected record passes."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain.models import ErrorSummary, OutboxEvent
from onward.domain.projection import digest
from onward.entrypoints import projector as projector_handler
from onward.faults import InjectedCrash, fault_subject, installed
from onward.pipeline.projector.projector import BatchTally, ShardRecord, StatusProjector
from onward.pipeline.relay.publisher import encode
from tests.integration.pipeline.test_projection import (
    SHARD,
    conflicts_of,
    failed_sequences,
    invoke,
    kinesis_event,
    make_event,
    new_job_id,
    view_of,
)

PUT_ITEM = "DynamoDB_20120810.PutItem"


def lifecycle(job_id: str) -> list[OutboxEvent]:
    return [make_event(job_id, 1, "queued", attempt=0), make_event(job_id, 2, "running"),
            make_event(job_id, 3, "succeeded", result_size_bytes=8, result_inline={"n": 1})]


def projected_since(before: dict[str, int]) -> dict[str, int]:
    """The handler's outcome totals (what the soak's audit reads) since `before`, zeros left out."""
    after = projector_handler.totals.snapshot()
    return {name: count - before[name] for name, count in after.items() if count != before[name]}


class ThrottledFor:
    """A DynamoDB client whose PutItems naming `first` or one of `then` fail as throttled, those of `then` only
    once `first`'s has failed (or WAIT_S passed); everything else goes to the real client."""

    WAIT_S = 5.0

    def __init__(self, real: Any, first: str, then: set[str]) -> None:
        self._real, self._first, self._then = real, first, then
        self._first_failed = threading.Event()

    def put_item(self, **request: Any) -> Any:
        job_id = request["Item"]["job_id"]["S"]
        if job_id in self._then:
            self._first_failed.wait(self.WAIT_S)
        if job_id == self._first or job_id in self._then:
            if job_id == self._first:
                self._first_failed.set()
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
            raise ClientError(error, "PutItem")
        return self._real.put_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def projector_on(client: Any) -> StatusProjector:
    """A projector wired as the handler's deployment wires it, on `client`."""
    deployment = Deployment.from_environment()
    settings = deployment.settings
    return StatusProjector(client, settings.require("status_table"), settings.require("conflicts_table"),
                           deployment.checkpoint_store, deployment.parked_records,
                           retention_s=settings.job_retention_s)


def test_a_jobs_three_events_in_one_batch_are_one_put_item_and_the_view_holds_the_newest(
        stack_environment, settings, dynamodb, endpoint):
    """Without the fold each event is its own PutItem (three for X); with a fold that wrote the oldest, or any
    but the newest, the view would not hold succeeded/v3. All three still count as applied (the soak's
    "applied each event exactly once" reads these totals); a lone event of another job is untouched."""
    x, y = new_job_id(), new_job_id()
    events = [*lifecycle(x), make_event(y, 1, "queued", attempt=0)]
    before = projector_handler.totals.snapshot()
    requests_for_x = endpoint.watch(x)
    try:
        response = invoke(kinesis_event([encode(e) for e in events]))
    finally:
        endpoint.unwatch(x)

    assert failed_sequences(response) == []
    assert requests_for_x == {PUT_ITEM: 1}
    view = view_of(dynamodb, settings, x)
    assert (view["status"], view["version"], view["digest"]) == ("succeeded", 3, digest(events[2]))
    assert view["result_inline"] == {"n": 1}
    assert view_of(dynamodb, settings, y)["version"] == 1
    assert projected_since(before) == {"applied": 4}


def test_a_batch_carrying_a_conflicting_version_keeps_the_conflict_exactly_as_one_by_one(
        stack_environment, settings, dynamodb, endpoint):
    """The view holds X succeeded/v2; the batch carries X v2 with other content (dead) and v3. The first
    write's condition (the view below v2, the batch's first) is refused with what the view holds, and the plan
    is made again from it: v2 is a conflict, kept apart with both payloads, and v3 is applied in one more
    write. A write conditioned on the newest (v3) would go through at once and the conflict would never be
    seen; writing them one by one would take a PutItem more."""
    x = new_job_id()
    held = make_event(x, 2, "succeeded", result_size_bytes=8, result_inline={"n": 1})
    Deployment.from_environment().status_projector.project(held)
    other = make_event(x, 2, "dead", error=ErrorSummary.of("RuntimeError", "boom"))
    v3 = make_event(x, 3, "queued", attempt=0)
    before = projector_handler.totals.snapshot()
    requests_for_x = endpoint.watch(x)
    try:
        response = invoke(kinesis_event([encode(other), encode(v3)]))
    finally:
        endpoint.unwatch(x)

    assert failed_sequences(response) == []
    assert projected_since(before) == {"conflict": 1, "applied": 1}
    (conflict,) = conflicts_of(dynamodb, settings, x)
    assert conflict["version"] == 2
    assert OutboxEvent.model_validate_json(conflict["incoming_payload"]) == other
    view = view_of(dynamodb, settings, x)
    assert (view["status"], view["version"], view["digest"]) == ("queued", 3, digest(v3))
    # the refused first write, v3, the kept conflict
    assert requests_for_x == {PUT_ITEM: 3}


def test_two_records_of_one_batch_disagreeing_on_a_version_are_a_kept_conflict_and_the_saving_is_counted(
        stack_environment, settings, dynamodb, endpoint):
    """X's v1, v2 (succeeded), v2 again with other content (dead), v2 redelivered, in one batch on an empty
    view: one by one the first v2 is applied and the dead one refused as a conflict against it. Coalesced, the
    view is written once (the first v2), the conflict is kept with both payloads, the redelivered v2 is a
    duplicate, and the tally says 3 view writes were saved. A coalescing that kept only the newest of each
    version, or the last record, would lose the conflict or show dead."""
    x = new_job_id()
    v1, v2 = make_event(x, 1, "queued", attempt=0), make_event(x, 2, "succeeded", result_size_bytes=8,
                                                              result_inline={"n": 1})
    other = make_event(x, 2, "dead", error=ErrorSummary.of("RuntimeError", "boom"))
    records = [ShardRecord(str(index + 1), encode(event)) for index, event in enumerate([v1, v2, other, v2])]
    tally = BatchTally()
    requests_for_x = endpoint.watch(x)
    try:
        assert Deployment.from_environment().status_projector.project_batch(SHARD, records, tally) is None
    finally:
        endpoint.unwatch(x)

    assert tally.outcomes == {"applied": 2, "conflict": 1, "duplicate": 1}
    assert tally.writes_saved == 3
    view = view_of(dynamodb, settings, x)
    assert (view["status"], view["version"], view["digest"]) == ("succeeded", 2, digest(v2))
    (conflict,) = conflicts_of(dynamodb, settings, x)
    assert OutboxEvent.model_validate_json(conflict["incoming_payload"]) == other
    assert requests_for_x == {PUT_ITEM: 2}  # the view's one write, the kept conflict


def test_a_failing_job_reports_the_earliest_failed_record_and_every_later_one_and_redelivery_converges(
        stack_environment, settings, dynamodb, monkeypatch):
    """Jobs B and D fail (throttled; D's first) in a batch of A, B, C, D. B's two events are one coalesced write,
    whose failure is its FIRST record's (sequence 2): that record and everything after it are reported,
    though A's v2 and C's v1 after it may have been written by their own groups (their redelivery counts as
    duplicates). Without the rule a response could name only the failing record (Powertools' stock
    processor), start at D's (the failure met first, not the earliest in batch order) or at B's newest (5),
    and Lambda would resume past B's v1, never to write it. Redelivered from sequence 2 on a healthy client,
    every view converges and each event counts applied exactly once."""
    a, b, c, d = (new_job_id() for _ in range(4))
    events = [make_event(a, 1, "queued", attempt=0), make_event(b, 1, "queued", attempt=0),
              make_event(a, 2, "running"), make_event(c, 1, "queued", attempt=0), make_event(b, 2, "running"),
              make_event(d, 1, "queued", attempt=0)]
    batch = kinesis_event([encode(e) for e in events], first_sequence=1)
    deployment = Deployment.from_environment()
    before = projector_handler.totals.snapshot()

    throttled = ThrottledFor(deployment.client("dynamodb"), first=d, then={b})
    with monkeypatch.context() as patched:
        patched.setattr(deployment, "status_projector", projector_on(throttled))
        response = invoke(batch)

    assert failed_sequences(response) == ["2", "3", "4", "5", "6"]
    assert view_of(dynamodb, settings, a)["version"] == 2  # record 1, before the failure, is written
    assert view_of(dynamodb, settings, b) is None
    assert view_of(dynamodb, settings, d) is None

    assert failed_sequences(invoke({"Records": batch["Records"][1:]})) == []
    assert {job: view_of(dynamodb, settings, job)["version"] for job in (a, b, c, d)} == {a: 2, b: 2, c: 1, d: 1}
    projected = projected_since(before)
    assert projected["applied"] == len(events)
    assert set(projected) <= {"applied", "duplicate"}


def test_a_crash_after_a_coalesced_write_passes_the_fault_point_for_each_of_its_records(
        stack_environment, settings, dynamodb):
    """A drill crashes at the fault point after X's first record; the coalesced write projected all three, so
    all three count applied and all three pass the fault point before the crash is raised (the soak's audit
    balances outcomes against passes). A mutant stopping at the crash would leave v2 and v3 applied but
    never passed: their redelivery (stale, duplicate) would look like redeliveries nobody caused."""
    x = new_job_id()
    events = lifecycle(x)
    records = [ShardRecord(str(index + 1), encode(event)) for index, event in enumerate(events)]
    passed: list[str | None] = []

    def crash_after_the_first(name: str) -> None:
        passed.append(fault_subject())
        if fault_subject() == f"{SHARD}:1":
            raise InjectedCrash(name)

    projector = Deployment.from_environment().status_projector
    tally = BatchTally()
    with installed("projector.after_record", crash_after_the_first), pytest.raises(InjectedCrash):
        projector.project_batch(SHARD, records, tally)

    assert sorted(passed) == [f"{SHARD}:1", f"{SHARD}:2", f"{SHARD}:3"]
    assert tally.outcomes == {"applied": 3}
    assert view_of(dynamodb, settings, x)["version"] == 3

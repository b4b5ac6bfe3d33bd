"""A delayed job's `run_at` on its outbox events, in the status view row and in the status the API answers
(every status comes from the view: one source per answer), added to the event contract compatibly.

Without `OutboxEvent.of` setting it, or `view_fields` carrying it, or `JobStatus.of_view` reading it, the
status of a delayed job would answer `run_at: null`; were it written as `"run_at": null` on the wire or in the
outbox, an event of a job started at once would no longer have the contract's first shape; were it in the
digest while absent, every event written before it existed would digest differently, and its redelivery after
a deploy would be kept apart as a conflict."""

from __future__ import annotations

import json

from onward.api.contract.jobs import JobStatus
from onward.domain import lifecycle
from onward.domain.clock import iso
from onward.domain.freshness import freshness_of, view_lag
from onward.domain.models import Job, NewJob, OutboxEvent, StatusView
from onward.domain.projection import digest, view_fields, view_item
from onward.pipeline.projector.records import parse_record
from onward.pipeline.relay.publisher import encode
from onward.store.dynamo.keys import event_from_values, outbox_item
from tests.unit.domain.test_projection import CONTRACT_FIELDS, GOLDEN_DIGEST, golden_payload

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"
DELAY_S = 90


def created(request: NewJob) -> Job:
    return lifecycle.create(JOB_ID, "acme", request, NOW).after


def status_of(event: OutboxEvent) -> JobStatus:
    """The status the API answers for the view row `event` writes (the projector's item, as the reader reads it)."""
    row = StatusView.model_validate({name: value for name, value in view_item(event, iso(NOW), 3600).items()
                                     if value is not None})
    return JobStatus.of_view(row, freshness_of(row.as_of, view_lag([], NOW), NOW))


def test_a_delayed_jobs_events_carry_its_run_at_to_the_view_and_the_status() -> None:
    """Every event of the job, not only its creation's: a claimed and retried job still says when it was
    asked to start."""
    job = created(NewJob(type="demo.echo", delay_s=DELAY_S))
    event = OutboxEvent.of(job)
    assert event.run_at == iso(NOW + DELAY_S * 1000)
    claimed = lifecycle.claim(job, "w1", 30_000, NOW + DELAY_S * 1000 + 1)
    assert isinstance(claimed, lifecycle.Change)
    assert OutboxEvent.of(claimed.after).run_at == event.run_at
    assert view_fields(event)["run_at"] == event.run_at
    assert status_of(event).run_at == event.run_at


def test_the_run_at_crosses_the_outbox_and_the_wire_unchanged() -> None:
    change = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo", delay_s=DELAY_S), NOW)
    event = OutboxEvent.of(change.after)
    item = outbox_item(change, 3600)
    assert item["run_at"] == event.run_at
    assert event_from_values(item) == event
    wire = encode(event)
    assert json.loads(wire)["run_at"] == event.run_at
    assert parse_record(wire) == event


def test_a_job_started_at_once_has_the_contracts_first_shape_and_a_null_run_at_in_its_status() -> None:
    change = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo"), NOW)
    event = OutboxEvent.of(change.after)
    assert event.run_at is None
    assert "run_at" not in json.loads(encode(event))
    assert "run_at" not in outbox_item(change, 3600)
    assert set(json.loads(encode(event))) <= CONTRACT_FIELDS - {"run_at"}
    assert status_of(event).run_at is None
    assert json.loads(status_of(event).model_dump_json())["run_at"] is None  # documented: null, at once


def test_an_event_without_run_at_digests_as_before_and_one_with_it_differently() -> None:
    old_shape = OutboxEvent.model_validate(golden_payload())
    assert digest(old_shape) == GOLDEN_DIGEST
    delayed = old_shape.model_copy(update={"run_at": "2026-11-30T06:00:00.000Z"})
    assert digest(delayed) != GOLDEN_DIGEST
    assert digest(delayed.model_copy(update={"run_at": "2026-11-30T06:00:01.000Z"})) != digest(delayed)


def test_a_view_row_written_before_run_at_existed_still_reads() -> None:
    """A row the projector wrote before the field existed has no `run_at`: its status shows null."""
    row = {name: value for name, value in view_item(OutboxEvent.model_validate(golden_payload()), iso(NOW),
                                                     3600).items() if value is not None}
    assert "run_at" not in row
    assert StatusView.model_validate(row).run_at is None

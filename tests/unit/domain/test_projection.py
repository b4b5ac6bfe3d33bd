"""The status projection as pure functions (onward/domain/projection.py) and the public event contract.

Without the version guard in `classify`, a redelivered or reordered event would move a status backwards;
without the digest, a same-version disagreement would be silently overwritten (or a redelivery would look
like a conflict); without the golden sample, a renamed field would break every other consumer of the stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onward.domain import lifecycle
from onward.domain.documents import json_size
from onward.domain.lifecycle import Change, Decision
from onward.domain.models import EVENT_SCHEMA, ErrorSummary, Job, NewJob, OutboxEvent
from onward.domain.projection import ProjectionOutcome, classify, digest, fold, view_fields
from onward.domain.states import JobState
from onward.pipeline.projector.records import UnreadableRecord, parse_record
from onward.pipeline.relay.publisher import encode

GOLDEN = Path(__file__).resolve().parents[2] / "events" / "outbox_event_v1.json"
# The digest of the golden sample. The view stores digests: if this changes (new field, other canonical
# form), every redelivery of an old event after a deploy is reported as a conflict. Change it on purpose only.
GOLDEN_DIGEST = "37659187a57ca1668a2d157803eddef282e3912640b40beb74b6181adba3f634"

# The public field names (JSON, by alias): other consumers read exactly these.
CONTRACT_FIELDS = {
    "event_id", "job_id", "tenant_id", "type", "version", "status", "attempt", "cancel_requested",
    "occurred_at", "schema", "error", "result_size_bytes", "result_inline",
    "committed_at",  # set by the relay from the stream record; left out of the digest
    "run_at",  # added later, only on a delayed job's events: the golden sample (of a job started at once) has none
    "tags",  # tags (issue 38): only on a tagged job's events, never digested; the golden sample has none
    "trace_parent",  # trace context (issue 38): added later, only on a traced job's events; not digested
}
ERROR_FIELDS = {"error_type", "message", "message_truncated"}

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"
OTHER_JOB = "fedcba9876543210fedcba9876543210"

A, D, S, C = (ProjectionOutcome.APPLIED, ProjectionOutcome.DUPLICATE, ProjectionOutcome.STALE,
              ProjectionOutcome.CONFLICT)


def make_event(version: int, status: str, *, job_id: str = JOB_ID, attempt: int = 1,
               **extra: Any) -> OutboxEvent:
    return OutboxEvent(
        event_id=f"{job_id}:{version}", job_id=job_id, tenant_id="acme", type="demo.echo", version=version,
        status=JobState(status), attempt=attempt, occurred_at=f"2026-11-30T06:50:{version:02d}.000Z", **extra,
    )


def golden_payload() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


# --- the golden sample of the event contract --------------------------------------------------------------

def test_the_golden_sample_is_a_complete_valid_event():
    event = OutboxEvent.model_validate(golden_payload())
    assert event.event_id == f"{event.job_id}:{event.version}"
    assert event.schema_version == EVENT_SCHEMA == 1
    assert event.status is JobState.SUCCEEDED
    assert event.result_size_bytes == json_size(event.result_inline)
    # Every contract field is present, except `error` (a succeeded event has none; the wire leaves it out)
    # and `run_at` (the job was not delayed; the sample keeps the shape of the contract's first version), and
    # `tags` and `trace_parent` (the job had neither).
    assert set(golden_payload()) == CONTRACT_FIELDS - {"error", "run_at", "tags", "trace_parent"}


def test_the_golden_sample_round_trips_through_the_wire_format_unchanged():
    """encode() is what the relay puts on Kinesis: the same names and values must come out, and parse back
    to the same event. A renamed field or alias (e.g. `schema` -> `schema_version`) fails here."""
    payload = golden_payload()
    event = OutboxEvent.model_validate(payload)
    wire = encode(event)
    assert json.loads(wire) == payload
    assert OutboxEvent.model_validate_json(wire) == event
    assert parse_record(wire) == event  # and the projector reads it as the same event
    assert digest(parse_record(wire)) == digest(event) == GOLDEN_DIGEST


def test_the_contract_field_names_are_pinned():
    """Adding a field is a contract change too (and changes every digest): update the sample on purpose."""
    aliases = {info.alias or name for name, info in OutboxEvent.model_fields.items()}
    assert aliases == CONTRACT_FIELDS
    assert set(ErrorSummary.model_fields) == ERROR_FIELDS


def test_an_error_event_keeps_its_error_summary_on_the_wire():
    error = ErrorSummary.of("ConnectionError", "upstream timeout")
    event = make_event(3, "dead", error=error)
    payload = json.loads(encode(event))
    assert payload["error"] == {"error_type": "ConnectionError", "message": "upstream timeout",
                                "message_truncated": False}
    assert "result_inline" not in payload and "result_size_bytes" not in payload
    assert OutboxEvent.model_validate_json(encode(event)) == event


def test_unknown_fields_are_kept_unread_and_a_newer_major_is_refused():
    """An additive field of a newer writer (same major) is kept and passed on, but neither digested nor
    projected: without that, a projector not yet upgraded would park every event of an upgraded writer, and
    two projectors of different releases would take one redelivery for a conflict. A newer major is refused
    whole (parked, with the reason naming both majors)."""
    plain = parse_record(json.dumps(golden_payload()).encode())
    extended = parse_record(json.dumps({**golden_payload(), "priority_band": "high"}).encode())
    assert isinstance(plain, OutboxEvent) and isinstance(extended, OutboxEvent)
    assert extended.model_extra == {"priority_band": "high"}
    assert json.loads(encode(extended))["priority_band"] == "high"
    assert digest(extended) == digest(plain) == GOLDEN_DIGEST
    assert view_fields(extended) == view_fields(plain)
    with pytest.raises(UnreadableRecord, match="event of schema 2, newer than this reader's 1"):
        parse_record(json.dumps({**golden_payload(), "schema": 2}).encode())
    with pytest.raises(UnreadableRecord, match="not a version"):
        parse_record(json.dumps({**golden_payload(), "schema": "1"}).encode())


# --- digest ---------------------------------------------------------------------------------------------

def test_digest_is_stable_across_constructions():
    payload = golden_payload()
    reordered = dict(reversed(list(payload.items())))
    first = OutboxEvent.model_validate(payload)
    assert digest(first) == digest(OutboxEvent.model_validate(reordered)) == digest(first.model_copy())
    assert digest(first) == GOLDEN_DIGEST
    nested = {**payload, "result_inline": {"file": "exports/2026-11.csv", "rows": 1204}}  # inner key order
    assert digest(OutboxEvent.model_validate(nested)) == GOLDEN_DIGEST


@pytest.mark.parametrize(
    "change",
    [
        {"status": JobState.DEAD},
        {"attempt": 2},
        {"cancel_requested": True},
        {"occurred_at": "2026-11-30T06:50:58.124Z"},
        {"tenant_id": "globex"},
        {"type": "reports.other"},
        {"result_size_bytes": 43},
        {"result_inline": {"rows": 1205, "file": "exports/2026-11.csv"}},
        {"result_inline": None},
        {"error": ErrorSummary.of("E", "x")},
        {"version": 4, "event_id": "5f0c8a1e2b3d4c5e6f708192a3b4c5d6:4"},
    ],
    ids=",".join,
)
def test_digest_changes_with_any_field(change):
    event = OutboxEvent.model_validate(golden_payload())
    assert digest(event.model_copy(update=change)) != digest(event)


# --- classify -------------------------------------------------------------------------------------------

def test_classify_each_relation_of_event_to_view():
    held = make_event(3, "succeeded")
    assert classify(None, None, held) is A  # no view yet
    assert classify(2, digest(make_event(2, "running")), held) is A  # newer
    assert classify(4, "anything", held) is S  # older than the view
    assert classify(3, digest(held), held) is D  # the same event again
    assert classify(3, digest(make_event(3, "dead")), held) is C  # same version, other content
    assert classify(3, None, held) is C  # a view without a digest cannot prove sameness


def test_the_five_event_sequence_classifies_as_the_brief_says():
    """running/v2, succeeded/v3, running/v2 again, succeeded/v3 again, failed(dead)/v3."""
    sequence = [make_event(2, "running"), make_event(3, "succeeded"), make_event(2, "running"),
                make_event(3, "succeeded"), make_event(3, "dead", error=ErrorSummary.of("E", "boom"))]
    view: OutboxEvent | None = None
    outcomes = []
    for event in sequence:
        outcome = classify(view and view.version, view and digest(view), event)
        outcomes.append(outcome)
        if outcome is A:
            view = event
    assert outcomes == [A, A, S, D, C]
    assert view == sequence[1]


def test_view_fields_carry_status_version_times_digest_and_summaries():
    event = make_event(3, "dead", attempt=2, error=ErrorSummary.of("ValueError", "bad"))
    fields = view_fields(event)
    assert (fields["status"], fields["version"], fields["attempt"], fields["occurred_at"]) == (
        "dead", 3, 2, event.occurred_at)
    assert fields["digest"] == digest(event)
    assert fields["error"] == {"error_type": "ValueError", "message": "bad", "message_truncated": False}
    assert fields["result_inline"] is None and "projected_at" not in fields


# --- fold -----------------------------------------------------------------------------------------------

def test_fold_keeps_each_jobs_highest_version_whatever_the_order():
    a1, a2, a3 = make_event(1, "queued"), make_event(2, "running"), make_event(3, "succeeded")
    b1, b2 = make_event(1, "queued", job_id=OTHER_JOB), make_event(2, "cancelled", job_id=OTHER_JOB)
    assert fold([a3, b1, a1, b2, a2, a3]) == {JOB_ID: a3, OTHER_JOB: b2}
    assert fold([]) == {}


def test_fold_keeps_the_first_seen_of_two_same_version_events():
    """As the live view does: the first of a same-version pair stays, the second is a conflict."""
    first, second = make_event(3, "succeeded"), make_event(3, "dead")
    assert fold([first, second]) == {JOB_ID: first}


# --- the property the brief requires --------------------------------------------------------------------

OPS = ("claim", "complete", "fail", "fail_permanent", "reap", "release", "cancel", "acknowledge_cancel",
       "replay")


def _step(job: Job, op: str, now: int) -> Decision:
    worker = job.lease_owner or "w1"
    match op:
        case "claim":
            return lifecycle.claim(job, "w1", 30_000, now)
        case "complete":
            return lifecycle.complete(job, job.attempt, worker, {"n": job.version}, now)
        case "fail" | "fail_permanent":
            return lifecycle.fail(job, job.attempt, worker, ErrorSummary.of("E", f"v{job.version}"),
                                  permanent=op == "fail_permanent", retry_delay_ms=1_000, now=now)
        case "reap":
            return lifecycle.reap(job, now)
        case "release":
            return lifecycle.release(job, job.attempt, worker, now)
        case "cancel":
            return lifecycle.cancel(job, now)
        case "acknowledge_cancel":
            return lifecycle.acknowledge_cancel(job, job.attempt, worker, now)
        case "replay":
            return lifecycle.replay(job, now)
    raise AssertionError(op)


def history(ops: list[str]) -> list[OutboxEvent]:
    """A job's outbox events for a legal run of operations (refused operations write nothing)."""
    now = NOW
    job = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo", max_attempts=2), now).after
    events = [OutboxEvent.of(job)]
    for op in ops:
        now += 60_000  # past any lease and retry delay
        decision = _step(job, op, now)
        if isinstance(decision, Change):
            job = decision.after
            size = json_size(decision.result) if decision.has_result else None
            events.append(OutboxEvent.of(job, result=decision.result, result_size=size))
    return events


@given(data=st.data())
def test_any_delivery_order_with_duplicates_ends_at_the_highest_version_never_going_back(data):
    """Invariant 7 as a property: deliver a job's events in any order, each any number of times (at least
    once), through a pure model of the view that writes only when classify says APPLIED."""
    events = history(data.draw(st.lists(st.sampled_from(OPS), max_size=14), label="ops"))
    assert [e.version for e in events] == list(range(1, len(events) + 1))
    extra = data.draw(st.lists(st.sampled_from(events), max_size=2 * len(events)), label="duplicates")
    deliveries = data.draw(st.permutations(events + extra), label="deliveries")

    view: OutboxEvent | None = None
    seen_versions: list[int] = []
    for event in deliveries:
        outcome = classify(view.version if view else None, digest(view) if view else None, event)
        assert outcome is not C, "the same event delivered twice must never look like a conflict"
        if outcome is A:
            assert view is None or event.version > view.version
            view = event
        else:
            assert view is not None and (event.version < view.version) == (outcome is S)
        assert not seen_versions or view.version >= seen_versions[-1], "the view moved backwards"
        seen_versions.append(view.version)

    assert view == events[-1]
    assert fold(deliveries) == {JOB_ID: events[-1]}  # a rebuild from history agrees with the live view

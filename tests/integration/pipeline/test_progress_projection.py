"""Progress through the pipeline (issue 38) over real HTTP to the embedded endpoint: a running attempt's update
travels outbox -> relay -> Kinesis -> projector onto the status view without raising the version; any update
arriving after the job moved on (its completion, a cancel request) is a no-op, never a conflict; a duplicate
and an older update change nothing."""

from __future__ import annotations

import json
from typing import Any

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.domain.progress import ProgressEvent, progress_event
from onward.domain.projection import ProjectionOutcome
from onward.pipeline.projector.projector import BatchTally, ShardRecord, StatusProjector
from onward.pipeline.relay.publisher import encode
from onward.store.service import JobStore
from tests.integration.pipeline.test_projection import (
    RequestCounter,
    conflicts_of,
    failed_sequences,
    invoke,
    kinesis_event,
    make_event,
    new_job_id,
    projector,
    view_of,
)

__all__ = ["projector"]  # the fixture, shared with test_projection.py

ECHO = NewJob(type="demo.echo", params={"n": 1})


def records(*events: Any) -> list[ShardRecord]:
    return [ShardRecord(str(100 + n), encode(event)) for n, event in enumerate(events)]


def update(job_id: str, seq: int, *, version: int = 2, attempt: int = 1) -> ProgressEvent:
    return progress_event(job_id, "acme", version, attempt, seq, seq / 10, f"step {seq}", 1_800_000_000_000)


def test_progress_reaches_the_view_through_the_pipeline_and_the_final_status_carries_none(
        store: JobStore, pipeline, settings, dynamodb):
    """Without the relay passing progress events on (and the projector's conditional update) the view would
    show no progress; without the whole-row write of the completion the final status would keep the last
    update's progress."""
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", 30)
    assert store.report_progress(lease, version=lease.job.version, seq=1, fraction=0.25, message="a").written
    pipeline.drain()
    shown = view_of(dynamodb, settings, job.job_id)
    assert (shown["status"], shown["version"], shown["progress_seq"]) == ("running", 2, 1)
    assert shown["progress"] == {"fraction": 0.25, "message": "a", "attempt": 1, "at": shown["progress"]["at"]}

    assert store.report_progress(lease, version=lease.job.version, seq=2, fraction=0.5, message="b").written
    store.complete(lease, {"ok": True})
    pipeline.drain()
    final = view_of(dynamodb, settings, job.job_id)
    assert (final["status"], final["version"]) == ("succeeded", 3)
    assert "progress" not in final and "progress_seq" not in final
    assert conflicts_of(dynamodb, settings, job.job_id) == []
    assert store.get(job.job_id).version == 3  # two updates raised no version


def test_progress_after_the_completion_is_a_no_op_never_a_conflict(projector: StatusProjector, settings, dynamodb):
    """The projector's ordering: the completion (v3) is shown, then a progress event of v2 arrives (a
    redelivery, or a shard behind): without the version condition it would be written on the final status."""
    job_id = new_job_id()
    tally = BatchTally()
    assert projector.project_batch("s", records(make_event(job_id, 1, "queued"), make_event(job_id, 2, "running"),
                                                update(job_id, 1)), tally) is None
    assert view_of(dynamodb, settings, job_id)["progress_seq"] == 1
    assert projector.project_batch("s", records(make_event(job_id, 3, "succeeded")), tally) is None

    late = BatchTally()
    assert projector.project_batch("s", records(update(job_id, 2)), late) is None

    final = view_of(dynamodb, settings, job_id)
    assert (final["status"], final["version"], final.get("progress")) == ("succeeded", 3, None)
    assert late.progress.outcomes == {"superseded": 1}
    assert late.outcomes.get(ProjectionOutcome.CONFLICT, 0) == 0 and conflicts_of(dynamodb, settings, job_id) == []


def test_a_duplicate_is_a_no_op_and_an_older_update_is_dropped(projector: StatusProjector, settings, dynamodb):
    """Without the progress_seq condition a redelivered older update would move the shown progress back."""
    job_id = new_job_id()
    projector.project_batch("s", records(make_event(job_id, 1, "queued"), make_event(job_id, 2, "running"),
                                         update(job_id, 5)), BatchTally())
    before = view_of(dynamodb, settings, job_id)

    tally = BatchTally()
    assert projector.project_batch("s", records(update(job_id, 5)), tally) is None
    assert projector.project_batch("s", records(update(job_id, 3)), tally) is None

    assert view_of(dynamodb, settings, job_id) == before
    assert tally.progress.outcomes == {"duplicate": 1, "superseded": 1}


def test_in_one_batch_progress_behind_a_transition_is_superseded_and_ahead_of_one_applies(
        projector: StatusProjector, settings, dynamodb):
    """A batch's progress is judged against the version its transitions leave: an update of v2 in the batch
    that also completes the job (v3) is not written; one of v2 in the batch that starts the attempt is."""
    done, running = new_job_id(), new_job_id()
    tally = BatchTally()
    batch = records(make_event(done, 1, "queued"), make_event(done, 2, "running"), update(done, 1),
                    make_event(done, 3, "succeeded"),
                    make_event(running, 1, "queued"), make_event(running, 2, "running"), update(running, 2),
                    update(running, 1))
    assert projector.project_batch("s", batch, tally) is None

    assert view_of(dynamodb, settings, done).get("progress") is None
    shown = view_of(dynamodb, settings, running)
    assert (shown["progress_seq"], shown["progress"]["message"]) == (2, "step 2")
    assert tally.progress.outcomes == {"superseded": 2, "applied": 1}


def test_a_progress_event_is_one_json_record_that_says_its_kind():
    """Other consumers of the events stream (the archiver, webhooks) skip records by `kind`, as heartbeats."""
    payload = json.loads(encode(update("j" * 32, 1)))
    assert payload["kind"] == "progress" and payload["schema"] == 1 and payload["version"] == 2


def test_the_projectors_lambda_handler_projects_progress_and_counts_it(stack_environment, settings, dynamodb, capsys,
                                                                       monkeypatch):
    """Through the Lambda handler, as the event-source mapping calls it: without its progress metrics declared
    (onward/telemetry.py) every batch holding a progress event failed and was redelivered until discarded."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    job_id = new_job_id()
    first = invoke(kinesis_event([encode(make_event(job_id, 1, "queued")), encode(make_event(job_id, 2, "running")),
                                  encode(update(job_id, 1)), encode(update(job_id, 2))]))
    second = invoke(kinesis_event([encode(update(job_id, 1)), encode(update(job_id, 3))], first_sequence=10))

    assert failed_sequences(first) == failed_sequences(second) == []
    assert view_of(dynamodb, settings, job_id)["progress_seq"] == 3
    printed = capsys.readouterr().out
    assert '"ProgressApplied"' in printed and '"ProgressSuperseded"' in printed


def test_an_update_costs_one_transaction_in_the_store_and_one_write_in_the_projector(
        store: JobStore, projector: StatusProjector, settings, dynamodb):
    """docs/progress.md counts an update's cost from these: a read before the write, or a second view write,
    would change it (and the store must not read the job row: the ConditionCheck fences the attempt)."""
    store.create("acme", ECHO)
    lease = store.claim("w1", 30)
    store_calls = RequestCounter(dynamodb)
    assert store.report_progress(lease, version=lease.job.version, seq=1, fraction=0.5, message="half").written
    assert store_calls.operations == ["TransactWriteItems"]

    job_id = new_job_id()
    projector.project_batch("s", records(make_event(job_id, 1, "queued"), make_event(job_id, 2, "running")),
                            BatchTally())
    view_calls = RequestCounter(Deployment.from_environment().client("dynamodb"))
    for seq in (1, 1, 2):  # applied, duplicate (refused: the refusal says why, no read), applied
        assert projector.project_batch("s", records(update(job_id, seq)), BatchTally()) is None
    assert view_calls.operations == ["UpdateItem"] * 3

"""The archive's record of a finished job (onward.domain.archive): what it keeps of the authority's items."""

from onward.domain.archive import PARAMS_BYTES, RESULT_SUMMARY_BYTES, archived_job, glue_columns
from onward.domain.models import ErrorSummary, Job, OutboxEvent, Run
from onward.domain.states import JobState, RunOutcome

DAY_MS = 86_400_000
JOB = "0f" * 16


def _job(**changes: object) -> Job:
    values: dict[str, object] = {"job_id": JOB, "tenant_id": "acme", "type": "report.export", "params": {"n": 1},
                                     "state": JobState.SUCCEEDED, "version": 5, "attempt": 2, "max_attempts": 3,
                                     "not_before": 1_000, "created_at": 1_000, "updated_at": DAY_MS + 9_000}
    values.update(changes)
    return Job.model_validate(values)


def _runs() -> list[Run]:
    return [Run(job_id=JOB, attempt=2, worker_id="w2", claimed_at=6_000, lease_expires_at=9_000,
                finished_at=DAY_MS + 9_000, outcome=RunOutcome.SUCCEEDED),
            Run(job_id=JOB, attempt=1, worker_id="w1", claimed_at=3_000, lease_expires_at=5_000,
                finished_at=4_000, outcome=RunOutcome.FAILED, error=ErrorSummary(error_type="Boom", message="no"))]


def test_a_finished_job_keeps_its_runs_in_order_its_waiting_and_running_time_and_its_day() -> None:
    record = archived_job(_job(), _runs(), {"rows": 3}, [], archived_at=DAY_MS + 10_000)
    assert [run.attempt for run in record.runs] == [1, 2]
    assert record.runs[0].error_type == "Boom" and record.runs[0].outcome == "failed"
    assert record.waited_ms == 2_000  # created at 1 s, first claimed at 3 s
    assert record.ran_ms == 1_000 + (DAY_MS + 3_000)
    assert record.day == "1970-01-02"  # the UTC day it FINISHED, not the day it was created
    assert record.result_summary == '{"rows":3}' and record.result_size_bytes == 10
    assert record.key == (JOB, 5)


def test_a_scheduled_job_waits_from_its_run_at_and_one_that_never_ran_waits_until_it_ended() -> None:
    assert archived_job(_job(run_at=2_500), _runs(), None, [], archived_at=0).waited_ms == 500
    never = archived_job(_job(state=JobState.CANCELLED, attempt=0, updated_at=7_000), [], None, [], archived_at=0)
    assert never.first_claim_ms is None and never.waited_ms == 6_000 and never.ran_ms == 0


def test_large_params_and_results_are_cut_to_a_summary_and_say_so() -> None:
    record = archived_job(_job(params={"blob": "x" * 10_000}), _runs(), "y" * 10_000, [], archived_at=0)
    assert record.params_truncated and len(record.params_json.encode()) <= PARAMS_BYTES
    assert len((record.result_summary or "").encode()) == RESULT_SUMMARY_BYTES
    assert record.result_size_bytes == 10_002  # the whole result's size, not the summary's


def test_events_are_kept_with_their_versions() -> None:
    event = OutboxEvent.model_validate({"event_id": "e", "job_id": JOB, "tenant_id": "acme", "type": "t", "version": 1,
                                            "status": "queued", "attempt": 0, "occurred_at": "2026-12-04T00:00:00Z"})
    assert [e.version for e in archived_job(_job(), [], None, [event], archived_at=0).events] == [1]


def test_the_glue_columns_are_the_record_fields_without_the_partition_key() -> None:
    names = [name for name, _ in glue_columns()]
    assert "day" not in names and names[:3] == ["schema_version", "job_id", "tenant"]
    assert dict(glue_columns())["runs"].startswith("array<struct<attempt:bigint,")

"""The fence reconciler's run records after issue 34 (a claim writes none), on the embedded endpoint: the
new home's running attempt is read from its row as an overlap partner and marked on a partial record its close
merges, and an old home's attempt whose late row is its only trace gets its record written from the row."""

from __future__ import annotations

from onward.domain.fence_reconciliation import LateWrite
from onward.domain.models import NewJob
from onward.domain.states import RunOutcome
from onward.pipeline.fence_reconciler.late_runs import job_runs, write_late_run
from onward.pipeline.fence_reconciler.reconciler import plain
from onward.store.dynamo.running_marks import mark_overlap
from onward.store.ports.write_plans import OverlapMark
from onward.store.service import JobStore


def test_a_running_attempt_is_an_overlap_partner_marked_on_the_record_its_close_writes(store: JobStore, settings,
                                                                                       dynamodb) -> None:
    """Without the row's attempt in job_runs the new home's running attempt would be no partner (no record yet)
    and the overlap would be lost on both runs; without the partial record the mark would fail its
    `attribute_exists(pk)` and stop the batch."""
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    lease = store.claim("w-b", 60)
    assert lease is not None
    (running,) = job_runs(dynamodb, settings.jobs_table, job_id, plain)
    assert (running["attempt"], running["worker_id"], running["claimed_at"]) == (1, "w-b", lease.job.updated_at)
    mark_overlap(dynamodb, settings.jobs_table, job_id, 1, OverlapMark((7,), lease.job.updated_at))
    assert store.runs(job_id)[0].overlapped_with == [7]
    store.complete(lease, "ok")
    (run,) = store.runs(job_id)
    assert (run.outcome, run.worker_id, run.overlapped_with) == (RunOutcome.SUCCEEDED, "w-b", [7])


def test_an_old_home_attempt_known_only_by_its_late_row_gets_its_record_once(store: JobStore, settings,
                                                                             dynamodb) -> None:
    """Before issue 34 the old home's claim put the record, which replicated as the trace that the job ran in
    both Regions; now a late running row is the only one when the attempt never ended there. Written once
    (a record that arrived first is kept)."""
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    late = LateWrite(job_id, 3, None, 1_000, claimed=("w-a", 500, 900))
    written = write_late_run(dynamodb, settings.jobs_table, late, 1_000)
    assert written is not None
    assert write_late_run(dynamodb, settings.jobs_table, late, 2_000) is None, "once"
    (run,) = store.runs(job_id)
    assert (run.attempt, run.worker_id, run.claimed_at, run.lease_expires_at, run.outcome, run.fenced_by,
            run.late_report_at) == (3, "w-a", 500, 900, RunOutcome.FENCED, "region_epoch", 1_000)
    assert write_late_run(dynamodb, settings.jobs_table, LateWrite(job_id, 4, None, 1_000), 1_000) is None, \
        "no claim on the late write: nothing to write"

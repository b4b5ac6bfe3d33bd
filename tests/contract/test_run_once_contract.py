"""A run record written once, when its attempt ends (issue 34), ONE suite on both recorders: the claim writes no
run record (the job row holds its attempt's claim); `run` / `runs` show the running attempt from the row as
before; a progress update before the close writes a partial record the close merges; every transition ending an
attempt writes the whole record, refused once it has an outcome; a record a release before the change opened
at its claim is closed by this code."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.errors import StoreInvariantViolation
from onward.domain.models import ErrorSummary, NewJob, Run
from onward.domain.states import JobState, RunOutcome
from onward.store.dynamo.keys import run_key
from onward.store.ports import CommitOutcome, TransitionWrite
from onward.store.ports.progress_log import ProgressWrite, ProgressWritten
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={"n": 1}, max_attempts=3)


def _run_items(backend: StoreBackend, job_id: str) -> list[dict[str, Any]]:
    return [item for item in backend.jobs_table() if item["pk"] == run_key(job_id, 1).pk
            and item["sk"].startswith("RUN#")]


def _progress(lease: Any, seq: int) -> ProgressWrite:
    return ProgressWrite(lease.job_id, lease.job.tenant_id, lease.attempt, lease.worker_id, lease.job.version, seq,
                         0.5, f"step {seq}", lease.job.updated_at + seq, 2_000_000_000)


def test_a_running_attempts_run_is_read_from_its_row_as_the_claim_made_it(backend, store, clock):
    """Without the row's claim (`run_claimed_at`, `run_lease_expires_at`) a running attempt would have no run
    until it ends; built from the row's `updated_at` / `lease_expires_at` it would move with a cancel request
    or a renewal, which the claim's record never did."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    claimed = Run(job_id=job_id, attempt=1, worker_id="w1", claimed_at=lease.job.updated_at,
                  lease_expires_at=lease.job.lease_expires_at)
    assert _run_items(backend, job_id) == [], "the claim writes no run record"
    clock.advance(5)
    store.renew_lease(lease, 60)
    store.cancel(job_id, "acme")  # a cancel request: a new version, same attempt
    assert store.runs(job_id) == [claimed]
    assert backend.recorder.run(job_id, 1) == claimed
    assert backend.recorder.run(job_id, 2) is None


def test_progress_on_a_running_attempt_then_its_close_leave_one_record_with_the_progress(backend, store):
    """Without dropping `attribute_exists(pk)` the update would be refused (no record while the attempt runs);
    a close that Put the record would drop the progress; a read that did not merge would show two runs or
    none."""
    store.create("acme", ECHO)
    lease = store.claim("w1", 30)
    assert backend.recorder.record_progress(_progress(lease, 1)) is ProgressWritten.WRITTEN
    (running,) = store.runs(lease.job_id)
    assert (running.worker_id, running.outcome, running.progress and running.progress.seq) == ("w1", None, 1)
    store.complete(lease, {"ok": True})
    (run,) = store.runs(lease.job_id)
    assert (run.outcome, run.worker_id, run.claimed_at, run.progress and run.progress.seq) == (
        RunOutcome.SUCCEEDED, "w1", lease.job.updated_at, 1)
    assert store.result(lease.job_id) == {"ok": True}
    assert len(_run_items(backend, lease.job_id)) == 1


CLOSERS = {
    "complete": lambda store, lease, clock: store.complete(lease, {"ok": 1}),
    "fail, retried": lambda store, lease, clock: store.fail(lease, ErrorSummary.of("Boom", "no")),
    "fail, dead": lambda store, lease, clock: store.fail(lease, ErrorSummary.of("Boom", "no"), permanent=True),
    "release": lambda store, lease, clock: store.release(lease),
    "snooze": lambda store, lease, clock: store.snooze(lease, 5, max_snoozes=3),
    "cancel acknowledged": lambda store, lease, clock: (store.cancel(lease.job_id, "acme"),
                                                        store.acknowledge_cancel(lease)),
    "reap": lambda store, lease, clock: (clock.advance(31), store.reap()),
}
OUTCOMES = {"complete": RunOutcome.SUCCEEDED, "fail, retried": RunOutcome.FAILED, "fail, dead": RunOutcome.FAILED,
            "release": RunOutcome.RELEASED, "snooze": RunOutcome.SNOOZED, "cancel acknowledged": RunOutcome.CANCELLED,
            "reap": RunOutcome.LEASE_EXPIRED}


@pytest.mark.parametrize("closer", list(CLOSERS))
@pytest.mark.parametrize("opened", ["by the row", "the old way"])
def test_every_transition_ending_an_attempt_writes_its_whole_record(backend, store, clock, closer, opened):
    """Each closer writes worker, claim, lease, outcome, finish and TTL on the record, whether the row holds the
    claim (this release) or the claim put the record (the release before: the Update merges into it). A
    closer that set only the closure would leave a record the Run model cannot read; one conditioned on the
    record existing would refuse every attempt claimed by this release."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    if opened == "the old way":
        backend.open_run_the_old_way(job_id)
    CLOSERS[closer](store, lease, clock)
    (run,) = store.runs(job_id)
    assert (run.job_id, run.attempt, run.worker_id, run.claimed_at, run.lease_expires_at, run.outcome) == (
        job_id, 1, "w1", lease.job.updated_at, lease.job.lease_expires_at, OUTCOMES[closer])
    assert run.finished_at is not None
    (item,) = _run_items(backend, job_id)
    assert item["entity"] == "run" and "expires_at" in item
    assert store.get(job_id).state is not JobState.RUNNING


def test_a_second_close_of_a_run_is_refused_and_writes_nothing(backend, store, clock):
    """The close's `attribute_not_exists(outcome)`: without it a second close (a transition decided from a row
    read before the first) would overwrite the outcome the first wrote."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    row = backend.recorder.job(job_id)
    assert row is not None and row.opened is not None
    store.complete(lease, {"ok": 1})
    change = lifecycle.fail(row.job, 1, "w1", ErrorSummary.of("Late", "x"), permanent=True, retry_delay_ms=0,
                            now=clock.now)
    write = TransitionWrite.of(change, ready_shards=row.ready_shards, retention_s=60, job_retention_s=60,
                               claimed_at=row.opened.claimed_at, opened=row.opened)
    before = backend.snapshot()
    try:
        outcome = backend.recorder.commit(write)
    except StoreInvariantViolation:
        outcome = None
    assert outcome is not CommitOutcome.COMMITTED
    assert backend.snapshot() == before
    assert store.runs(job_id)[0].outcome is RunOutcome.SUCCEEDED


def test_a_claim_costs_no_run_record_write(backend, store):
    """The claim's transaction holds no run record action (2 write units of about 40 a job before issue 34's
    change): after a claim the job's partition holds its row only."""
    job_id = store.create("acme", ECHO).job.job_id
    store.claim("w1", 30)
    assert [item["sk"] for item in backend.jobs_table() if item["pk"] == run_key(job_id, 1).pk] == ["JOB"]


def test_an_attempt_claimed_the_old_way_reads_and_closes_as_before(backend, store: JobStore, clock):
    """A record opened by the previous release's claim, progress on it, then the reaper's close: one record with
    everything (the reaper's claimed_at from the record: the row has no claim)."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    backend.open_run_the_old_way(job_id)
    assert backend.recorder.job(job_id).opened is None
    assert backend.recorder.record_progress(_progress(lease, 1)) is ProgressWritten.WRITTEN
    clock.advance(31)
    assert [job.job_id for job in store.reap()] == [job_id]
    (run,) = store.runs(job_id)
    assert (run.outcome, run.worker_id, run.progress and run.progress.seq) == (RunOutcome.LEASE_EXPIRED, "w1", 1)
    assert len(_run_items(backend, job_id)) == 1

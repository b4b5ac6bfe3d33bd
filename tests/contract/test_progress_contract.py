"""Progress updates (issue 38), ONE suite on both recorders (in memory, and DynamoDB on the embedded endpoint),
through the `store_backend` fixture, as tests/contract/test_recorder_contract.py.

What a recorder must honour: an update is written on the attempt's run record and as a progress event in the
outbox, both or neither, only while the job runs under that attempt (at that version, by that worker); the
job row is never written (its version, which orders every status, stays where it was); an update already
written (a retry) or an older one is answered ALREADY and writes nothing. And what JobStore makes of it:
a cancel request (a new version while the attempt runs) is followed, a stale attempt is refused for good.
"""

from __future__ import annotations

from onward.domain.models import NewJob
from onward.domain.progress import PROGRESS_KIND
from onward.store.ports.progress_log import ProgressWrite, ProgressWritten
from onward.store.service import JobStore

DEMO = NewJob(type="demo.echo", params={"n": 1})


def _write(lease, *, seq: int, version: int | None = None, worker: str | None = None,
           attempt: int | None = None, fraction: float = 0.5) -> ProgressWrite:
    return ProgressWrite(lease.job_id, lease.job.tenant_id, attempt or lease.attempt, worker or lease.worker_id,
                         version or lease.job.version, seq, fraction, f"step {seq}", 1_000 * seq, 2_000_000_000)


def test_an_update_lands_on_the_run_record_and_in_the_outbox_and_leaves_the_job_row_alone(backend, store):
    """Without the progress role's write the run record shows no progress and no event reaches the outbox;
    a write that touched the job row would raise its version (and reorder a final status in the view)."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 30)
    before = store.get(lease.job_id)

    assert backend.recorder.record_progress(_write(lease, seq=1, fraction=0.25)) is ProgressWritten.WRITTEN

    assert store.get(lease.job_id) == before
    run = store.runs(lease.job_id)[0]
    assert run.progress is not None and (run.progress.fraction, run.progress.message, run.progress.seq) == (
        0.25, "step 1", 1)
    [event] = backend.recorder.progress_events(lease.job_id)
    assert (event.kind, event.version, event.attempt, event.seq, event.fraction) == (
        PROGRESS_KIND, lease.job.version, lease.attempt, 1, 0.25)
    assert [event.version for event in store.events(lease.job_id)] == [1, 2]  # transitions only


def test_a_retried_or_older_update_writes_nothing(backend, store):
    """The run record's condition on its sequence number: without it a retry of a landed write (its answer
    lost) or an older update arriving late would put an older value back."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 30)
    assert backend.recorder.record_progress(_write(lease, seq=2, fraction=0.5)) is ProgressWritten.WRITTEN
    snapshot = backend.snapshot()

    assert backend.recorder.record_progress(_write(lease, seq=2, fraction=0.5)) is ProgressWritten.ALREADY
    assert backend.recorder.record_progress(_write(lease, seq=1, fraction=0.1)) is ProgressWritten.ALREADY

    assert backend.snapshot() == snapshot
    assert store.runs(lease.job_id)[0].progress.seq == 2


def test_an_update_from_a_stale_attempt_or_another_worker_or_version_writes_nothing(backend, store, clock):
    """The job row's condition (running, version, attempt, worker): without it a zombie attempt, reaped and
    succeeded by another, could show its progress on the job and its successor's run."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 30)
    snapshot = backend.snapshot()

    for write in (_write(lease, seq=1, worker="w2"), _write(lease, seq=1, version=lease.job.version + 1),
                  _write(lease, seq=1, attempt=lease.attempt + 1)):
        assert backend.recorder.record_progress(write) is ProgressWritten.JOB_MOVED
    store.complete(lease, {"ok": True})
    after_completion = backend.snapshot()
    assert backend.recorder.record_progress(_write(lease, seq=1)) is ProgressWritten.JOB_MOVED

    assert backend.snapshot() == after_completion
    assert snapshot[1] != after_completion[1]  # (the completion itself did write)
    assert backend.recorder.progress_events(lease.job_id) == []


def test_the_store_follows_a_cancel_request_and_refuses_an_attempt_that_lost_the_job(backend, store: JobStore,
                                                                                     clock):
    """A cancel request raises the version while the attempt runs: without reading the row again the update
    would be refused until the attempt ended; after the reaper took the job, the attempt is told to stop."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 30)
    store.cancel(lease.job_id, "acme")
    moved = store.get(lease.job_id).version

    answer = store.report_progress(lease, version=lease.job.version, seq=1, fraction=0.5, message="half")

    assert (answer.held, answer.written, answer.version) == (True, True, moved)
    [event] = backend.recorder.progress_events(lease.job_id)
    assert event.version == moved

    clock.advance(31)
    store.reap()
    refused = store.report_progress(lease, version=moved, seq=2, fraction=0.75, message=None)
    assert (refused.held, refused.written) == (False, False)
    assert len(backend.recorder.progress_events(lease.job_id)) == 1

"""A job's result on both store backends (tests/contract/backends.py): the completing transaction writes it on
the run record it closes (issue 34: one transactional item fewer per job than a result item of its own), every
reader reads it from there (the store's scoped read, the API's path; the history the archiver archives), and a
result item written before (`RESULT`, as a deployed stack still holds for the jobs it completed then) is still
read when the run record carries none."""

from __future__ import annotations

import json

import pytest

from onward.domain.errors import JobNotFound
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

FLAKY = NewJob(type="demo.echo", params={"n": 1}, max_attempts=2)


def _partition(backend: StoreBackend, job_id: str) -> dict[str, dict]:
    """The job's items of the jobs table by sort key, read behind the store's back."""
    return {item["sk"]: item for item in backend.jobs_table() if item["pk"] == f"JOB#{job_id}"}


def _completed_on_a_retry(store: JobStore, clock, result: object) -> str:
    job_id = store.create("acme", FLAKY).job.job_id
    first = store.claim("w1", 30)
    assert first is not None and first.job_id == job_id
    store.fail(first, ErrorSummary.of("Flaky", "once"))
    clock.advance(2)  # past the retry's backoff
    second = store.claim("w1", 30)
    assert second is not None and second.attempt == 2
    assert store.complete(second, result).job.state is JobState.SUCCEEDED
    return job_id


def test_the_result_is_on_the_run_record_the_completion_closed_and_read_from_there(backend, store, clock):
    """Without the result on the closing run's update, the job would have no result at all (no item holds it
    any more); without the readers reading that run, the store's read, the API's scoped read and the history
    the archiver archives would answer None for every job completed since."""
    result = {"rows": 3, "names": ["a", "b"]}
    job_id = _completed_on_a_retry(store, clock, result)

    items = _partition(backend, job_id)
    assert set(items) == {"JOB", "RUN#000001", "RUN#000002"}, "no result item of its own"
    completing = items["RUN#000002"]
    assert completing["result"] == result
    assert completing["result_size_bytes"] == len(json.dumps(result, separators=(",", ":")))
    assert completing["expires_at"] == items["JOB"]["expires_at"], "the result is kept as long as the row"
    assert "result" not in items["RUN#000001"], "only the attempt that completed the job holds it"

    assert store.result(job_id) == result
    assert store.result(job_id, "acme") == result  # the API's path: scoped to the caller's tenant
    with pytest.raises(JobNotFound):
        store.result(job_id, "globex")
    history = store.history(job_id)
    assert history is not None and history.result == result
    assert [run.attempt for run in history.runs] == [1, 2]


def test_none_is_a_result_and_a_job_that_did_not_complete_has_none(backend, store, clock):
    """A completion with no value still stores one (None: the run record carries it), and a job that ended
    otherwise carries no result on any run record; without the outcome check a failed job's last run would
    be taken for a completed one and send a reader to the old result item for nothing."""
    done = _completed_on_a_retry(store, clock, None)
    assert _partition(backend, done)["RUN#000002"].get("result", "absent") is None
    assert store.result(done) is None
    dead = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    lease = store.claim("w1", 30)
    assert lease is not None and lease.job_id == dead
    assert store.fail(lease, ErrorSummary.of("Broken", "no"), permanent=True).job.state is JobState.DEAD
    assert all("result" not in item for item in _partition(backend, dead).values())
    assert store.result(dead) is None
    history = store.history(dead)
    assert history is not None and history.result is None


def test_a_result_item_written_before_issue_34_is_still_read(backend, store, clock):
    """A deployed stack holds a result item (`RESULT`) for every job it completed before results moved onto
    the run record: without the fallback, those jobs would answer None from the store, the API and the
    archive until they expire."""
    result = {"written": "the old way"}
    job_id = _completed_on_a_retry(store, clock, result)
    backend.keep_result_the_old_way(job_id)

    items = _partition(backend, job_id)
    assert set(items) == {"JOB", "RUN#000001", "RUN#000002", "RESULT"}
    assert "result" not in items["RUN#000002"] and items["RESULT"]["value"] == result
    assert store.result(job_id) == result
    assert store.result(job_id, "acme") == result
    history = store.history(job_id)
    assert history is not None and history.result == result

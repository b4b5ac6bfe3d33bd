"""The local platform's workers in a process of their own (infra/onward_infra/worker_process.py), as the ECS service
runs them: `onward worker` started with the deployment's environment, stopped with SIGTERM."""

from __future__ import annotations

import time

import pytest

from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.worker_process import WorkerProcess, WorkerProcessFailed
from onward_infra_tests.processes import gone


def test_the_worker_process_runs_the_jobs_and_ends_at_stop(stack_environment: dict[str, str], settings: Settings,
                                                           dynamodb, capfd: pytest.CaptureFixture[str]) -> None:
    """Jobs created before the process starts all succeed, run by it (attempts by workers w-00 and w-01 of
    that process's pool), and the process is gone once stop() returns. A mutant starting it without the
    deployment's environment would run nothing here (no table); one whose stop did not wait for the process
    would leave it running; one forwarding its lines to stdout would break `bench/peer.py --json`."""
    store = JobStore(settings, client=dynamodb)
    job_ids = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(6)]
    process = WorkerProcess("onward.runtime.demo_jobs", concurrency=2, lease_s=10.0).start()
    pid = process.pid
    assert pid is not None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(store.get(job_id).state is JobState.SUCCEEDED for job_id in job_ids):
                break
            time.sleep(0.1)
        jobs = [store.get(job_id) for job_id in job_ids]
        assert [job.state for job in jobs] == [JobState.SUCCEEDED] * 6
        workers = {run.worker_id for job_id in job_ids for run in store.runs(job_id)}
        assert workers <= {"w-00", "w-01"}
    finally:
        process.stop()
    assert gone(pid)
    assert capfd.readouterr().out == ""


def test_a_worker_process_that_cannot_start_says_why(stack_environment: dict[str, str]) -> None:
    """A module without handlers: start() raises with the process's own message instead of waiting, or
    leaving a platform without workers."""
    with pytest.raises(WorkerProcessFailed, match=r"no module 'onward\.nothing_here'"):
        WorkerProcess("onward.nothing_here", concurrency=1, lease_s=5.0).start()

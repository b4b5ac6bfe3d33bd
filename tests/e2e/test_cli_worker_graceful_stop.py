"""`onward worker` stops gracefully on SIGTERM, as ECS stops a task (SIGTERM, then SIGKILL its StopTimeout
later): it claims nothing more at once, lets the running jobs end within its stop timeout (set here by
ONWARD_WORKER_STOP_TIMEOUT_S, as the task definition sets it), then releases those still running, cooperative
or deaf to the stop, without charging them an attempt, and exits with status 0. A real `onward worker` process
against the embedded endpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from onward.domain.models import Job, NewJob
from onward.domain.states import JobState, RunOutcome
from onward.settings import Settings
from onward.store.service import JobStore
from tests.e2e.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # its jobs write the outbox (a stream)

ONWARD = [sys.executable, "-m", "onward.cli"]
ROOT = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 14.0
SHORT_S = 8  # ends inside the stop timeout, yet outlives a loaded machine's delay before the SIGTERM lands
STOP_GRACE_S = 5.0  # onward.runtime.pool.WorkerPool's default: a deaf handler's process is ended this long after


def test_sigterm_lets_running_jobs_end_within_the_stop_timeout_then_releases_the_rest_uncharged(
        environment: dict[str, str], settings: Settings, dynamodb: Any) -> None:
    """Breaks if the worker stops claiming late (the job created after SIGTERM would run), asks the running
    jobs to stop at once (the 8 s job would be released, not succeed), waits past its stop timeout for the
    long ones (the exit would come 60 s later), charges a released job an attempt (with max_attempts 1, the
    next claim would end it instead of running attempt 2), or exits with another status."""
    store = JobStore(settings, client=dynamodb)
    short = store.create("acme", NewJob(type="demo.sleep", params={"seconds": SHORT_S})).job.job_id
    long = store.create("acme", NewJob(type="demo.sleep", params={"seconds": 60}, max_attempts=1)).job.job_id
    deaf = store.create("globex", NewJob(type="demo.hang", params={"seconds": 60}, max_attempts=1)).job.job_id
    worker = subprocess.Popen(
        [*ONWARD, "worker", "--module", "onward.runtime.demo_jobs", "--concurrency", "3", "--lease-s", "10"],
        env={**os.environ, **environment, "ONWARD_WORKER_STOP_TIMEOUT_S": str(STOP_TIMEOUT_S)},
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: all(store.get(job).state is JobState.RUNNING for job in (short, long, deaf)), 60,
                   "the three jobs to run")
        assert store.get(short).state is JobState.RUNNING  # still running when the stop comes
        worker.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        after = store.create("initech", NewJob(type="demo.echo")).job.job_id  # due at once, a slot frees soon
        stdout, stderr = worker.communicate(timeout=STOP_TIMEOUT_S + STOP_GRACE_S + 30)
        stopped_s = time.monotonic() - signalled
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, stdout[-2000:] + stderr[-3000:]
    assert STOP_TIMEOUT_S <= stopped_s < STOP_TIMEOUT_S + STOP_GRACE_S + 15, stopped_s
    assert "stopped: 1 of 3 running jobs ended, 2 released (not charged an attempt)" in stdout

    assert store.get(short).state is JobState.SUCCEEDED
    never_claimed = store.get(after)
    assert (never_claimed.state, never_claimed.attempt) == (JobState.QUEUED, 0)
    for job_id in (long, deaf):
        released = store.get(job_id)
        assert (released.state, released.attempt, released.attempts_used) == (JobState.QUEUED, 1, 0)
        assert released.last_outcome is RunOutcome.RELEASED
        assert [run.outcome for run in store.recorder.runs(job_id)] == [RunOutcome.RELEASED]

    # Re-claimable, attempt 2 of a budget of 1: the release was not charged
    claimed: dict[str, Job] = {}
    for _ in range(3):
        lease = store.claim("w-next", 30)
        assert lease is not None
        claimed[lease.job_id] = lease.job
    assert set(claimed) == {long, deaf, after}
    for job_id in (long, deaf):
        assert (claimed[job_id].state, claimed[job_id].attempt, claimed[job_id].attempts_used) == \
            (JobState.RUNNING, 2, 1)

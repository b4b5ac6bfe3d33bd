"""Execution timeouts (issue 17 item 2) with real Worker threads on the embedded stack and the real clock: an
attempt past its timeout ends failed with error type Timeout and frees its slot, retries follow the usual
policy, and what handlers in their child process did before keeps working (results, errors, cancellation,
fencing, release on shutdown)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import epoch_ms, system_clock
from onward.domain.models import MAX_TIMEOUT_S, Job, NewJob
from onward.domain.states import TERMINAL_STATES, JobState, RunOutcome
from onward.maintenance.reaper import reap_once
from onward.runtime.demo_jobs import hang
from onward.runtime.demo_jobs import registry as demo_registry
from onward.runtime.worker import JobContext, Registry, Worker
from onward.store.service import JobStore
from tests.integration.api_support import http_call, serve_api
from tests.integration.documented_client import Client
from tests.integration.runtime.test_worker import Pool

pytestmark = pytest.mark.integration

SLACK_MS = 5_000  # the bound: a timed-out attempt has ended within timeout + 5 s


@pytest.fixture
def live_store(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb, backoff=BackoffPolicy(base_s=0.05, cap_s=0.2))


def wait_for(store: JobStore, job_ids: list[str], done: Any, timeout_s: float = 60) -> dict[str, Job]:
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = {job_id: store.get(job_id) for job_id in job_ids}
        if all(done(job) for job in jobs.values()):
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"not there in time: {[(j.job_id, j.state, j.attempt) for j in jobs.values()]}")
        time.sleep(0.05)


def terminal(job: Job) -> bool:
    return job.state in TERMINAL_STATES


def running(job: Job) -> bool:
    return job.state is JobState.RUNNING


def assert_timed_out(store: JobStore, job_id: str, timeout_s: float) -> None:
    """Every attempt of the job failed with Timeout, each ended at least its timeout and at most 5 s past it
    after its claim."""
    runs = store.runs(job_id)
    assert runs
    for run in runs:
        assert run.outcome is RunOutcome.FAILED and run.error is not None
        assert run.error.error_type == "Timeout" and f"timeout of {timeout_s:g} s" in run.error.message
        assert run.finished_at is not None
        assert timeout_s * 1000 <= run.finished_at - run.claimed_at <= timeout_s * 1000 + SLACK_MS


def test_a_hanging_job_times_out_is_retried_by_the_policy_and_its_slot_serves_another_tenant(live_store):
    """Catches a runaway handler pinning its worker (the other tenant's job would wait the hang's 300 s),
    an attempt past its timeout that is not failed as Timeout, or a Timeout that is not retried as any
    failure is (two attempts, then dead with the last error)."""
    hanging = live_store.create("acme", NewJob(type="demo.hang", params={"seconds": 300}, timeout_s=1,
                                               max_attempts=2)).job.job_id
    with Pool(live_store, demo_registry, size=1):
        wait_for(live_store, [hanging], running, timeout_s=10)
        behind = live_store.create("globex", NewJob(type="demo.echo", params={"n": 7})).job.job_id
        jobs = wait_for(live_store, [hanging, behind], terminal, timeout_s=30)
    job = jobs[hanging]
    assert (job.state, job.attempt) == (JobState.DEAD, 2)
    assert job.last_error is not None and job.last_error.error_type == "Timeout"
    assert_timed_out(live_store, hanging, 1)
    assert jobs[behind].state is JobState.SUCCEEDED and live_store.result(behind) == {"n": 7}


def test_the_types_default_applies_when_the_job_sets_none_and_the_jobs_own_wins(live_store):
    """Catches a registry default that is never read (the attempt would run the platform's 15 minutes) and a
    job's own timeout_s overridden by its type's."""
    registry = Registry()
    registry.register("t.hang_short", timeout_s=1)(hang)
    registry.register("t.hang_long", timeout_s=600)(hang)
    by_type = live_store.create("acme", NewJob(type="t.hang_short", params={"seconds": 300},
                                               max_attempts=1)).job.job_id
    by_job = live_store.create("acme", NewJob(type="t.hang_long", params={"seconds": 300}, timeout_s=1.5,
                                              max_attempts=1)).job.job_id
    with Pool(live_store, registry, size=2):
        jobs = wait_for(live_store, [by_type, by_job], terminal, timeout_s=30)
    assert all(job.state is JobState.DEAD for job in jobs.values())
    assert_timed_out(live_store, by_type, 1)
    assert_timed_out(live_store, by_job, 1.5)


def test_a_timeout_above_the_maximum_is_refused_by_the_api_and_one_within_is_stored(
        live_store, stack_environment, monkeypatch):
    """Catches a timeout_s the API would accept beyond the platform's cap (or not at all), and one lost
    between the request and the job row."""
    with serve_api(monkeypatch, {"acme": "acme-secret"}, "operator-secret") as url:
        def post(body: dict[str, Any]):
            return http_call(url, "POST", "/jobs", token="acme-secret", body=body)

        refused = post({"type": "demo.echo", "timeout_s": MAX_TIMEOUT_S + 1})
        assert refused.status == 422
        assert [error["loc"] for error in refused.body["errors"]] == [["timeout_s"]]
        assert str(MAX_TIMEOUT_S) in refused.body["detail"]
        assert post({"type": "demo.echo", "timeout_s": "30"}).status == 422
        accepted = post({"type": "demo.echo", "timeout_s": 2.5})
    assert accepted.status == 202, accepted.body
    assert live_store.get(accepted.body["job_id"]).timeout_s == 2.5


def test_cancelling_a_running_sleep_is_still_acknowledged(live_store):
    """Catches the cancel request no longer reaching a handler in its child process: demo.sleep would run
    its 30 s and succeed."""
    job_id = live_store.create("acme", NewJob(type="demo.sleep", params={"seconds": 30})).job.job_id
    with Pool(live_store, demo_registry, size=1, lease_s=0.6):
        wait_for(live_store, [job_id], running, timeout_s=10)
        started = time.monotonic()
        assert live_store.cancel(job_id, "acme").status.value == "cancel_requested"
        job = wait_for(live_store, [job_id], terminal, timeout_s=20)[job_id]
    assert job.state is JobState.CANCELLED and time.monotonic() - started < 5
    assert [run.outcome for run in live_store.runs(job_id)] == [RunOutcome.CANCELLED]


def test_a_cancelled_handler_that_ignores_the_stop_is_ended_and_the_cancel_acknowledged(live_store):
    """Catches a cancel that waits for a deaf handler's timeout (here the platform's 15 minutes): the
    worker ends it stop_grace_s after asking, and the job ends cancelled."""
    job_id = live_store.create("acme", NewJob(type="demo.hang", params={"seconds": 300})).job.job_id
    with Pool(live_store, demo_registry, size=1, lease_s=0.6, stop_grace_s=0.5):
        wait_for(live_store, [job_id], running, timeout_s=10)
        started = time.monotonic()
        live_store.cancel(job_id, "acme")
        job = wait_for(live_store, [job_id], terminal, timeout_s=20)[job_id]
    assert job.state is JobState.CANCELLED and time.monotonic() - started < 5
    assert [run.outcome for run in live_store.runs(job_id)] == [RunOutcome.CANCELLED]


def test_a_worker_that_lost_its_lease_ends_a_deaf_handler_and_its_report_is_fenced(live_store):
    """Catches a zombie attempt: the reaper has taken the job back, yet a handler that ignores every stop
    would work on for its whole timeout. The worker's clock lags a minute, so only the store's answer to a
    renewal tells it (as in test_worker's cooperative case)."""
    told: list[float] = []
    registry = Registry()
    registry.register("t.hang")(hang)
    job_id = live_store.create("acme", NewJob(type="t.hang", params={"seconds": 300}, max_attempts=1)).job.job_id
    worker = Worker(live_store, registry, lease_s=0.3, heartbeat_s=1.0, stop_grace_s=0.5,
                    clock=lambda: system_clock() - 60_000)
    thread = threading.Thread(target=lambda: (worker.run_once(), told.append(time.monotonic())))
    thread.start()
    time.sleep(0.6)
    reap_once(live_store)
    reaped = time.monotonic()
    assert live_store.get(job_id).state is JobState.QUARANTINED
    thread.join(timeout=10)
    assert told and told[0] - reaped < 1.0 + 0.5 + 3, "ended after the next renewal and the grace"
    (run,) = live_store.runs(job_id)
    assert run.outcome is RunOutcome.FENCED and run.late_report is RunOutcome.RELEASED


def test_shutdown_releases_the_job_of_a_handler_that_ignores_the_stop(live_store):
    """Catches a shutdown (Ctrl-C, a deploy) that hangs on a deaf handler, or kills it without handing its
    job back (it would wait for the lease to lapse and be charged an attempt)."""
    job_id = live_store.create("acme", NewJob(type="demo.hang", params={"seconds": 300})).job.job_id
    worker = Worker(live_store, demo_registry, lease_s=5, stop_grace_s=0.5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_for(live_store, [job_id], running, timeout_s=10)
    worker.shutdown()
    thread.join(timeout=10)
    assert not thread.is_alive()
    job = live_store.get(job_id)
    assert (job.state, job.attempt, job.attempt_floor) == (JobState.QUEUED, 1, 1)
    assert [run.outcome for run in live_store.runs(job_id)] == [RunOutcome.RELEASED]


class LedgerMismatch(Exception):
    pass


def test_a_handler_that_raises_still_fails_with_its_own_error_type_and_is_retried(live_store):
    """Catches the handler's exception lost on its way out of the child (reported as something else, or as
    a vanished process), and its failure not retried by the policy."""
    registry = Registry()

    @registry.register("t.ledger")
    def ledger(context: JobContext) -> None:
        raise LedgerMismatch(f"attempt {context.attempt}: off by 3 cents")

    job_id = live_store.create("acme", NewJob(type="t.ledger", max_attempts=2)).job.job_id
    with Pool(live_store, registry, size=1):
        job = wait_for(live_store, [job_id], terminal, timeout_s=20)[job_id]
    assert (job.state, job.attempt) == (JobState.DEAD, 2)
    errors = [(run.outcome, run.error.error_type, run.error.message) for run in live_store.runs(job_id)]
    assert errors == [(RunOutcome.FAILED, "LedgerMismatch", f"attempt {n}: off by 3 cents") for n in (1, 2)]


def test_a_handlers_result_still_comes_back_from_its_process(live_store):
    """Catches a result lost or changed on its way back from the child, and a handler run in the worker's own
    process (which the worker could not stop)."""
    registry = Registry()

    @registry.register("t.answer")
    def answer(context: JobContext) -> dict[str, Any]:
        return {"params": context.params, "token": context.fencing_token, "pid": os.getpid(),
                "timeout_s": context.timeout_s}

    job_id = live_store.create("acme", NewJob(type="t.answer", params={"x": [1, 2.5, "é"]},
                                              timeout_s=90)).job.job_id
    assert Worker(live_store, registry).run_once()
    result = live_store.result(job_id)
    assert live_store.get(job_id).state is JobState.SUCCEEDED
    assert result == {"params": {"x": [1, 2.5, "é"]}, "token": f"{job_id}:1", "pid": result["pid"],
                      "timeout_s": 90}
    assert result["pid"] != os.getpid()


def test_over_http_a_hanging_job_times_out_at_each_attempt_and_its_status_and_runs_say_so(
        live_store, stack_environment, monkeypatch, pipeline):
    """The whole path a user sees: `demo.hang` with `timeout_s: 1` submitted by POST /jobs, one worker, then
    GET /jobs/{id} (the status view, after the pipeline) shows it dead after its 2 attempts with the Timeout
    error, and GET /jobs/{id}/runs each attempt failed as Timeout, ended within timeout + 5 s of its claim.
    Catches a timeout_s lost between the API and the worker (the hang's 300 s would hold the slot and the
    wait would fail), an attempt ended but not reported as Timeout, or a status that never shows the end."""
    with serve_api(monkeypatch, {"acme": "acme-timeout-secret"}, "operator-timeout-secret") as url:
        client = Client(url)
        created = client.call("POST", "/jobs", "acme-timeout-secret", body={
            "type": "demo.hang", "params": {"seconds": 300}, "timeout_s": 1, "max_attempts": 2})
        assert created.status == 202, created.body
        job_id = created.body["job_id"]
        with Pool(live_store, demo_registry, size=1):
            wait_for(live_store, [job_id], terminal, timeout_s=30)
        pipeline.drain()
        status = client.get(f"/jobs/{job_id}", "acme-timeout-secret").body
        runs = client.get(f"/jobs/{job_id}/runs", "acme-timeout-secret").body["runs"]
    assert (status["visible"], status["status"], status["terminal"], status["attempt"]) == (True, "dead", True, 2)
    assert status["error"]["error_type"] == "Timeout"
    assert [run["attempt"] for run in runs] == [1, 2]
    for run in runs:
        assert (run["outcome"], run["error"]["error_type"]) == ("failed", "Timeout")
        ran_ms = epoch_ms(run["finished_at"]) - epoch_ms(run["claimed_at"])
        assert 1_000 <= ran_ms <= 1_000 + SLACK_MS, run

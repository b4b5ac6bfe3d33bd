"""Races with real threads over real HTTP: 16 workers on 300 jobs, random crashes, zombies and a reaper.

Without the attempt (fencing token) in every worker commit, a zombie that wakes up after its lease was
reclaimed would overwrite the new attempt's outcome; without the version condition, two claimers could
both take the job; without the transaction, a crash between writes would leave a job row without its
outbox event. Each of those shows up below as a failed audit.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest

from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import TERMINAL_STATES, JobState, RunOutcome
from onward.store.service import JobStore, ReportStatus

pytestmark = pytest.mark.integration  # real threads and the real clock on the embedded endpoint

JOBS = 300
WORKERS = 16
LEASE_S = 0.6


def stall_until_taken_back(store: JobStore, job_id: str, attempt: int) -> None:
    """A worker stalled (a GC pause, a partition) past its lease until the reaper or another claim took the job
    from its attempt, or 20 leases at most: a fixed sleep raced the reaper on a loaded machine, and a zombie
    whose lease was not yet taken back reports like any late worker (nothing fenced to check)."""
    deadline = time.monotonic() + 20 * LEASE_S
    time.sleep(LEASE_S)
    while time.monotonic() < deadline:
        job = store.get(job_id)
        if job.state is not JobState.RUNNING or job.attempt != attempt:
            return
        time.sleep(0.05)


def test_sixteen_workers_three_hundred_jobs_crashes_and_a_reaper(settings, dynamodb):
    store = JobStore(settings, client=dynamodb)  # the real clock: leases really lapse
    job_ids = [
        store.create(f"tenant-{n % 3}", NewJob(type="demo.echo", params={"n": n}, max_attempts=6)).job.job_id
        for n in range(JOBS)
    ]
    applied: dict[str, list[int]] = defaultdict(list)  # job -> attempts whose completion was applied
    zombie_reports: list[tuple[str, int, ReportStatus]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(number: int) -> None:
        rng = random.Random(number)
        while not stop.is_set():
            lease = store.claim(f"w{number}", LEASE_S)
            if lease is None:
                time.sleep(0.05)
                continue
            roll = rng.random()
            if roll < 0.10:
                continue  # crash: never heartbeats nor reports; the reaper must recover the job
            if roll < 0.18:
                stall_until_taken_back(store, lease.job_id, lease.attempt)  # then report as a zombie
                report = store.complete(lease, {"by": number})
                with lock:
                    zombie_reports.append((lease.job_id, lease.attempt, report.status))
                    if report.applied:
                        applied[lease.job_id].append(lease.attempt)
                continue
            time.sleep(rng.uniform(0, 0.02))
            if not store.renew_lease(lease, LEASE_S).held:
                continue
            if roll < 0.30:
                report = store.fail(lease, ErrorSummary.of("Flaky", "transient"))
            else:
                report = store.complete(lease, {"by": number})
                if report.applied:
                    with lock:
                        applied[lease.job_id].append(lease.attempt)

    def reaper() -> None:
        while not stop.wait(0.2):
            store.reap()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
    threads.append(threading.Thread(target=reaper))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            pending = [j for j in job_ids if store.get(j).state not in TERMINAL_STATES]
            if not pending:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()

    jobs = {job_id: store.get(job_id) for job_id in job_ids}
    assert all(job.state in TERMINAL_STATES for job in jobs.values()), "every job ends terminal"
    assert any(status is ReportStatus.FENCED for _, _, status in zombie_reports), "the drill produced zombies"

    for job_id, job in jobs.items():
        runs = store.runs(job_id)
        assert [run.attempt for run in runs] == list(range(1, job.attempt + 1)), "one run record per attempt"
        versions = [event.version for event in store.events(job_id)]
        assert versions == list(range(1, job.version + 1)), "outbox versions 1..N, no gap, no duplicate"
        assert len(applied[job_id]) <= 1, "no job completed twice"
        if job.state is JobState.SUCCEEDED:
            (winner,) = applied[job_id]
            assert winner == job.attempt, "only the attempt holding the job may complete it"
            assert runs[winner - 1].outcome is RunOutcome.SUCCEEDED
        for run in runs[:-1]:
            assert run.outcome is not None and run.outcome is not RunOutcome.SUCCEEDED, (
                "no attempt's completion is applied after its lease was reclaimed")

    for job_id, attempt, status in zombie_reports:
        run = store.runs(job_id)[attempt - 1]
        if status is ReportStatus.FENCED:
            assert run.outcome is RunOutcome.FENCED and run.late_report is RunOutcome.SUCCEEDED
            assert run.reclaimed_as is RunOutcome.LEASE_EXPIRED

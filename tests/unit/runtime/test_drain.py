"""onward.runtime.drain, what one invocation of the Lambda worker does, on scripted workers (no store, no Lambda):
when it stops claiming, how its idle workers behave while a sibling runs a job, and what it calls a failure.
The same Drain over real Workers, fed real Kinesis events, is tests/integration/runtime/test_lambda_worker.py."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from onward.bootstrap import MAX_WORKER_CONCURRENCY, Deployment
from onward.runtime.drain import IDLE_POLL, Drain
from onward.runtime.execution import SimulatedCrash
from onward.settings import InvalidSetting, Settings


class Scripted:
    """A worker whose `run_once` answers from a script: True (ran a job), False (nothing due), or a callable
    (called, its answer returned or its exception raised). Past the script: nothing due."""

    def __init__(self, script: list[bool | Callable[[], bool]]) -> None:
        self._script = list(script)
        self.calls = 0

    def run_once(self) -> bool:
        self.calls += 1
        step = self._script.pop(0) if self._script else False
        return step() if callable(step) else step


class VirtualTime:
    """Time left for the caller, moved by the scripted jobs (each job takes `job_s`)."""

    def __init__(self, budget_s: float) -> None:
        self.left_s = budget_s
        self.seen: list[float] = []

    def time_left_s(self) -> float:
        self.seen.append(self.left_s)
        return self.left_s

    def job(self, job_s: float) -> Callable[[], bool]:
        def run() -> bool:
            self.left_s -= job_s
            return True
        return run


def test_claiming_stops_once_no_more_than_a_lease_is_left() -> None:
    """10 s left, 1 s jobs, a 2.5 s lease: 8 jobs are claimed (at 10, 9, ... 3 s left), none at 2 s, though
    more are due. Without the check the invocation would claim a job it cannot finish and Lambda would cut it
    off mid-run (its lease then lapses and the attempt is charged)."""
    clock = VirtualTime(10)
    worker = Scripted([clock.job(1)] * 20)
    report = Drain([worker], time_left_s=clock.time_left_s, reserve_s=2.5).run()
    assert report.ran == 8 and report.out_of_time
    assert worker.calls == 8 and clock.seen[-1] == 2


def test_nothing_due_ends_the_drain_without_waiting() -> None:
    """An invocation woken for a delayed job (not yet due) or a job another worker took returns after one
    claim per worker: it must not sit waiting for work and bill the time."""
    sleeps: list[float] = []
    workers = [Scripted([]) for _ in range(4)]
    report = Drain(workers, time_left_s=lambda: 900, reserve_s=60, sleep=sleeps.append).run()
    assert report.ran == 0 and not report.out_of_time and report.answered
    assert all(w.calls >= 1 for w in workers)
    # A worker claims again only when a sibling entered its claim earlier and is still in it: rarely, after a
    # wait no longer than the idle cap. (Waiting for every sibling still claiming, they would wait on each
    # other: thousands of claims here.)
    assert report.empty_claims <= 2 * len(workers)
    assert all(s <= IDLE_POLL.cap_s for s in sleeps)


def test_an_idle_worker_claims_again_while_a_sibling_runs_a_job() -> None:
    """Worker A runs a long job; B's first claims find nothing, then a job becomes due (created meanwhile: its
    wake-up waits behind this invocation on its stream slot). B claims it while A is still busy. If idle
    workers ended at once, that job would wait for A's job to end."""
    a_may_end = threading.Event()
    b_ran_while_a_busy = threading.Event()

    def long_job() -> bool:
        assert a_may_end.wait(10), "B never ran the new job while A was busy"
        return True

    def new_job() -> bool:
        b_ran_while_a_busy.set()
        a_may_end.set()
        return True

    a, b = Scripted([long_job]), Scripted([False, False, False, new_job])
    report = Drain([a, b], time_left_s=lambda: 900, reserve_s=60, sleep=lambda _: None).run()
    assert b_ran_while_a_busy.is_set()
    assert report.ran == 2 and b.calls >= 5  # and B claimed once more after, finding nothing


def test_a_job_failure_is_not_a_drain_failure_only_every_claim_raising_is() -> None:
    """The job's own outcome (failed, retried: run_once returns True) is the job's business; the invocation
    failed only when the store never answered. Reporting wake-ups failed on a job's failure would have Lambda
    retry the batch and hold back the shard for nothing."""
    def unreachable() -> bool:
        raise ConnectionError("the jobs table is unreachable")

    failing = Drain([Scripted([unreachable] * 100), Scripted([unreachable] * 100)], time_left_s=lambda: 900,
                    reserve_s=60, sleep=lambda _: None).run()
    assert failing.failures >= 2 and not failing.answered
    partly = Drain([Scripted([unreachable]), Scripted([True])], time_left_s=lambda: 900, reserve_s=60,
                   sleep=lambda _: None).run()
    assert partly.answered and partly.ran == 1


def test_a_simulated_crash_counts_as_a_run_and_the_drain_goes_on() -> None:
    """demo.crash kills its worker mid-job (the lease is left to lapse): the drain's thread must survive it,
    or the other due jobs would wait for the next invocation."""
    def crash() -> bool:
        raise SimulatedCrash()

    worker = Scripted([crash, True])
    report = Drain([worker], time_left_s=lambda: 900, reserve_s=60).run()
    assert report.ran == 2 and report.failures == 0


def test_a_drain_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        Drain([], time_left_s=lambda: 900, reserve_s=60)


def test_the_worker_function_builds_as_many_workers_as_configured() -> None:
    """ONWARD_WORKER_CONCURRENCY (the LambdaWorkerConcurrencyPerInvocation parameter) is the drain's width; a
    value that cannot work is refused with its reason when the workers are first built, not run as 1."""
    settings = Settings.from_environment({"JOBS_TABLE": "jobs", "OUTBOX_TABLE": "outbox",
                                          "AWS_DEFAULT_REGION": "us-east-1"})
    assert len(Deployment(settings).workers) == 1
    three = Deployment(settings, environ={"ONWARD_WORKER_CONCURRENCY": "3"}).workers
    assert len(three) == 3 and len({w.worker_id for w in three}) == 3
    for wrong in ("0", "2.5", "many", str(MAX_WORKER_CONCURRENCY + 1)):
        with pytest.raises(InvalidSetting, match="ONWARD_WORKER_CONCURRENCY"):
            _ = Deployment(settings, environ={"ONWARD_WORKER_CONCURRENCY": wrong}).workers

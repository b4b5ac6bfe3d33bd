"""The drill's audit checks fail on the histories they exist to catch: each test builds a good history, shows
every row passes, then breaks it the one way a failover could and shows that row (and only it) fail. Without
these, `AUDIT PASSED` would say nothing: an audit that cannot fail passes every drill."""

from __future__ import annotations

import dataclasses

import pytest

from onward.domain.models import Job, Run
from onward.domain.states import JobState, RunOutcome
from tests.drill.checks import EPOCH_VERSION_BASE, audit_drill, rpo_of
from tests.drill.history import Ack, DrillHistory, Execution, Missing, PageRead, Read

pytestmark = pytest.mark.fast

T = 1_000_000  # the partition, ms
E1 = EPOCH_VERSION_BASE + 1  # the first version of epoch 1
J1, J2, J3, J9 = (digit * 32 for digit in "1239")  # job ids


def job(job_id: str, state: JobState, version: int, attempt: int = 1) -> Job:
    return Job(job_id=job_id, tenant_id="acme", type="drill.work", params={}, state=state, version=version,
               attempt=attempt, max_attempts=5, not_before=0, created_at=0, updated_at=0)


def run(job_id: str, attempt: int, outcome: RunOutcome | str | None, **extra: object) -> Run:
    return Run.model_validate({"job_id": job_id, "attempt": attempt, "worker_id": "w", "claimed_at": 0,
                               "lease_expires_at": 1, "outcome": outcome, **extra})


def good() -> DrillHistory:
    """j1 done in A before T; j2 running in A at T, adopted in B, run again there (attempt 2); j3 created in B."""
    return DrillHistory(
        partitioned_at_ms=T, rpo_s=0.5,
        acks=(Ack(J1, "A", T - 5000), Ack(J2, "A", T - 2000), Ack(J3, "B", T + 4000)),
        reads=(Read("B", "row", J1, "succeeded", 4, 1, T - 1000),
               Read("B", "row", J2, "running", 3, 2, T - 1000),
               Read("B", "row", J2, "queued", E1, 3, T + 3000),
               Read("B", "row", J2, "succeeded", E1 + 3, 4, T + 5000),
               Read("A", "view", J2, "running", 3, 5, T - 1000),
               Read("B", "view", J2, "running", 3, 6, T - 500),
               Read("B", "view", J2, "succeeded", E1 + 3, 7, T + 6000)),
        executions=(Execution("A", J1, 1, T - 4000, T - 3900), Execution("A", J2, 1, T - 1000, T + 9000),
                    Execution("B", J2, 2, T + 4000, T + 4100), Execution("B", J3, 1, T + 4500, T + 4600)),
        pages=(PageRead(T + 3000, True, {"home_lost": "eu-west-3", "may_miss_after": "2026-12-04T21:00:00Z"},
                        False),
               PageRead(T + 20000, False, None, True)),
        jobs_b={J1: job(J1, JobState.SUCCEEDED, 4), J2: job(J2, JobState.SUCCEEDED, E1 + 3, 2),
                J3: job(J3, JobState.SUCCEEDED, E1 + 2)},
        epochs_b={J1: 0, J2: 1, J3: 1},
        runs_b={J1: [run(J1, 1, "succeeded")],
                J2: [run(J2, 1, RunOutcome.FENCED, late_report="succeeded", overlapped_with=[2]),
                       run(J2, 2, "succeeded", overlapped_with=[1])],
                J3: [run(J3, 1, "succeeded")]},
        versions_a={J1: 4, J2: 5},
        overlap_jobs=frozenset({J2}), first_claim_b_ms=T + 4000, reconciled=1, submitted=3,
        healed_at_ms=T + 4100, fence_ends_ms=T + 3000)


def failed(history: DrillHistory) -> list[str]:
    return [line.check for line in audit_drill(history).failed()]


def test_the_good_history_passes_every_row() -> None:
    """The baseline each test below breaks: without it a test could pass on a history failing for another
    reason."""
    assert failed(good()) == []
    figures = dict(audit_drill(good()).figures)
    assert figures["ran twice"] == 1 and figures["RTO measured (T to B's first claim)"] == "4.0 s"


def test_a_lost_acknowledged_job_fails() -> None:
    """A job answered 201 well before T that B never got (replication lost it) is a loss beyond the RPO."""
    history = good()
    jobs = {j: v for j, v in history.jobs_b.items() if j != J1}
    assert failed(dataclasses.replace(history, jobs_b=jobs, epochs_b={J2: 1, J3: 1})) == [
        "no job lost that was acknowledged before T - RPO",
        "every acknowledged job is in B after the heal (a partition loses nothing)"]


def test_a_job_acknowledged_within_the_rpo_is_not_counted_lost_before_it() -> None:
    """The RPO row counts only what was acknowledged before T - RPO; a job inside the window is the figure."""
    history = dataclasses.replace(good(), acks=(*good().acks, Ack(J9, "A", T - 100)))
    assert failed(history) == ["every acknowledged job is in B after the heal (a partition loses nothing)"]
    assert dict(audit_drill(history).figures)["lost within RPO"] == 1


def test_a_reopened_terminal_fails() -> None:
    """j1 succeeded before T (replicated), then B's adoption queued it again: a terminal state reopened."""
    reads = (*good().reads, Read("B", "row", J1, "queued", E1, 9, T + 3000))
    assert failed(dataclasses.replace(good(), reads=reads)) == ["no terminal state reopened in B"]


def test_a_late_old_epoch_terminal_undone_by_the_reconciler_is_not_a_reopening() -> None:
    """After T, an epoch-0 terminal image in B is the old home's late write; the reconciler putting B's adopted
    image back (a higher epoch) is the fence working, not a terminal state reopened."""
    reads = (*good().reads, Read("B", "row", J2, "succeeded", 6, 8, T + 4200),
             Read("B", "row", J2, "running", E1 + 1, 9, T + 4300))
    reads = tuple(r for r in reads if not (r.job_id == J2 and r.seq == 4))
    assert failed(dataclasses.replace(good(), reads=reads)) == []


def test_an_old_epoch_terminal_read_before_the_heal_then_requeued_is_a_reopening() -> None:
    """Between T and the heal nothing of the old home arrives: a terminal row read then was replicated before
    T, and the adoption queuing it again reopens it, whatever the epochs say."""
    reads = (*good().reads, Read("B", "row", J1, "succeeded", 4, 8, T + 2000),
             Read("B", "row", J1, "queued", E1, 9, T + 3000))
    assert failed(dataclasses.replace(good(), reads=reads)) == ["no terminal state reopened in B"]


def test_an_old_home_attempt_started_after_the_fence_window_fails() -> None:
    """Without the authority lease the old home's workers go on claiming after the window."""
    executions = (*good().executions, Execution("A", J3, 2, T + 3500, T + 3600))
    assert "the old home started no attempt after the fence window (authority lease)" in failed(
        dataclasses.replace(good(), executions=executions))


def test_a_status_going_backwards_in_a_view_fails() -> None:
    """B's view shows j2 succeeded at an epoch-1 version, then the old home's version: backwards."""
    reads = (*good().reads, Read("B", "view", J2, "running", 3, 10, T + 7000))
    assert failed(dataclasses.replace(good(), reads=reads)) == ["no status going backwards in either Region's view"]


def test_an_unrecorded_double_run_fails() -> None:
    """j2 ran in A and in B, but its run records say nothing of it: attempt 1 closed as if it had succeeded."""
    runs = {**good().runs_b, J2: [run(J2, 1, "succeeded"), run(J2, 2, "succeeded")]}
    assert failed(dataclasses.replace(good(), runs_b=runs)) == ["every job that ran twice says so on its run records"]


def test_one_attempt_number_run_in_both_regions_fails() -> None:
    """A and B both ran attempt 1 of j3 (B never saw A's claim): one run record cannot tell the two runs apart."""
    executions = (*good().executions, Execution("A", J3, 1, T + 100, T + 200))
    runs = {**good().runs_b, J3: [run(J3, 1, "region_failover")]}
    assert "every job that ran twice says so on its run records" in failed(
        dataclasses.replace(good(), executions=executions, runs_b=runs))


def test_attempts_that_ran_at_once_missing_from_the_overlap_report_fail() -> None:
    assert failed(dataclasses.replace(good(), overlap_jobs=frozenset())) == [
        "every job whose attempts ran at once is in the overlap report"]


@pytest.mark.parametrize("page", [PageRead(T + 3000, True, None, False),
                                  PageRead(T + 3000, False, {"may_miss_after": "x"}, False),
                                  PageRead(T + 3000, True, {"may_miss_after": None}, False)])
def test_a_page_not_honest_before_the_reconciliation_fails(page: PageRead) -> None:
    """Before the reconciliation B's page must say stale and when it may miss updates from."""
    assert failed(dataclasses.replace(good(), pages=(page,))) == [
        "B's page honest until reconciled (stale, replication.may_miss_after)"]


def test_no_page_read_before_the_reconciliation_fails() -> None:
    assert failed(dataclasses.replace(good(), pages=(PageRead(T + 20000, False, None, True),))) == [
        "B's page honest until reconciled (stale, replication.may_miss_after)"]


def test_a_job_left_unfinished_in_b_fails() -> None:
    jobs = {**good().jobs_b, J3: job(J3, JobState.QUEUED, E1)}
    assert failed(dataclasses.replace(good(), jobs_b=jobs)) == ["every job in B finally terminal"]


@pytest.mark.parametrize(("version", "epochs"), [(7, {J1: 0, J2: 1, J3: 1}),  # epoch 1 but an epoch-0 version
                                                 (E1 + 3, {J1: 0, J2: 0, J3: 0})])  # nothing adopted
def test_versions_not_above_epoch_zero_or_nothing_adopted_fails(version: int, epochs: dict[str, int]) -> None:
    jobs = {**good().jobs_b, J2: job(J2, JobState.SUCCEEDED, version, 2)}
    assert failed(dataclasses.replace(good(), jobs_b=jobs, epochs_b=epochs)) == [
        "versions in B above every epoch-0 version for adopted jobs"]


def test_a_missing_part_is_a_failed_row_with_its_reason() -> None:
    history = dataclasses.replace(good(), missing=(Missing("onward failover", "invalid choice"),))
    lines = audit_drill(history).failed()
    assert [(line.check, line.detail) for line in lines] == [("issue 39 part present: onward failover",
                                                              "invalid choice")]


def test_the_rpo_is_the_larger_of_the_lag_and_the_measured_latency() -> None:
    assert rpo_of(0.2, 0.05) == 0.2 and rpo_of(0.2, 0.43) == 0.43



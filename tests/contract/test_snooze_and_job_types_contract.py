"""Snooze and the declared job types (issue 37), ONE suite on both recorders (in memory, and DynamoDB on the
embedded endpoint), through the `store_backend` fixture.

What a recorder must honour: a snooze is one transition like a release (the job row back to `queued`, due
later, its attempt not charged, its run record closed `snoozed`, one outbox event), fenced by the attempt; past
its bound it is a failed attempt. A job type's declaration is kept per type, the last one winning, and read
back whole by any store over the same tables; a create without max_attempts takes its type's.
"""

from __future__ import annotations

from onward.domain.backoff import BackoffPolicy
from onward.domain.lifecycle import SNOOZE_LIMIT_ERROR
from onward.domain.models import NewJob
from onward.domain.retry_policy import RetryPolicy
from onward.domain.states import JobState, RunOutcome
from onward.store.answers import ReportStatus

DEMO = NewJob(type="demo.echo", params={"n": 1})


def test_a_snooze_requeues_the_job_due_later_without_charging_the_attempt(backend, store):
    """Without the snooze transition the attempt would be charged (attempt_floor unchanged: a job of one
    attempt would end dead at its next claim) or the job due at once; its run record must say `snoozed`."""
    store.create("acme", DEMO.model_copy(update={"max_attempts": 1}))
    lease = store.claim("w1", 30)

    report = store.snooze(lease, 30, max_snoozes=5)

    job = store.get(lease.job_id)
    assert report.status is ReportStatus.APPLIED
    assert (job.state, job.snoozes, job.attempts_used, job.last_outcome) == (
        JobState.QUEUED, 1, 0, RunOutcome.SNOOZED)
    assert job.not_before == backend.clock() + 30_000
    assert [run.outcome for run in store.runs(lease.job_id)] == [RunOutcome.SNOOZED]
    assert [event.status for event in store.events(lease.job_id)] == [JobState.QUEUED, JobState.RUNNING,
                                                                      JobState.QUEUED]
    assert store.claim("w1", 30) is None  # not due yet
    backend.clock.advance(30)
    again = store.claim("w1", 30)
    assert again is not None and again.attempt == 2  # the fencing token still rises; the budget of 1 is intact


def test_a_snooze_past_its_bound_is_a_failed_attempt(backend, store):
    """Without the bound a handler could snooze forever; past it the attempt is charged (failed, SnoozeLimit)
    and retried as any failure."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 30)
    store.snooze(lease, 1, max_snoozes=1)
    backend.clock.advance(1)
    lease = store.claim("w1", 30)

    store.snooze(lease, 1, max_snoozes=1, backoff=BackoffPolicy(base_s=60, cap_s=60, jitter="none"))

    job = store.get(lease.job_id)
    assert (job.state, job.snoozes, job.attempts_used) == (JobState.RETRY_WAIT, 1, 1)
    assert job.last_error is not None and job.last_error.error_type == SNOOZE_LIMIT_ERROR
    assert job.not_before == backend.clock() + 60_000  # the policy's backoff, not the snooze's length
    assert [run.outcome for run in store.runs(lease.job_id)] == [RunOutcome.SNOOZED, RunOutcome.FAILED]


def test_a_fenced_snooze_writes_nothing(backend, store):
    """A snooze from an attempt the reaper closed must be refused like any late report (fenced by the
    attempt), or a zombie could re-queue a job another worker runs."""
    store.create("acme", DEMO)
    lease = store.claim("w1", 1)
    backend.clock.advance(2)
    store.reap()
    store.claim("w2", 30)
    before = store.get(lease.job_id)

    assert store.snooze(lease, 30, max_snoozes=5).status is ReportStatus.FENCED
    assert store.get(lease.job_id).version == before.version


def test_declared_types_are_kept_per_type_and_the_last_declaration_wins(backend, store):
    """Without the per-type item (or with a put that keeps the first), a worker of a newer version could not
    change a policy, and another store (the API's) would not see it."""
    store.type_catalog.declare([("reports.fetch", RetryPolicy(max_attempts=5, permanent=("ValueError",))),
                                ("mail.send", RetryPolicy())], "host-a:1")
    store.type_catalog.declare([("reports.fetch", RetryPolicy(max_attempts=7, jitter="full"))], "host-b:2")

    other = backend.store()  # the API's store: another process over the same tables
    declared = other.type_catalog.declared_types()
    assert sorted(declared) == ["mail.send", "reports.fetch"]
    fetch = declared["reports.fetch"]
    assert (fetch.policy, fetch.declared_by) == (RetryPolicy(max_attempts=7, jitter="full"), "host-b:2")
    assert declared["mail.send"].declared_by == "host-a:1"


def test_a_create_without_max_attempts_takes_its_types(backend, store):
    """Without the type's default, a job created without max_attempts gets the platform's 3; one that gives
    its own keeps it, and a retry with the same Idempotency-Key still finds its job (the digest is the
    request's, not the filled one's)."""
    store.type_catalog.declare([("reports.fetch", RetryPolicy(max_attempts=6))], "host-a:1")
    creating = backend.store()

    plain = creating.create("acme", NewJob(type="reports.fetch"), "key-1").job
    own = creating.create("acme", NewJob(type="reports.fetch", max_attempts=2)).job
    other_type = creating.create("acme", NewJob(type="mail.send")).job

    assert (plain.max_attempts, own.max_attempts, other_type.max_attempts) == (6, 2, 3)
    assert creating.create("acme", NewJob(type="reports.fetch"), "key-1").job.job_id == plain.job_id

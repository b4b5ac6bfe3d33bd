"""The backlog age the reaper publishes (onward.operator.due_age, metric OldestDueAgeSeconds), on the in-memory store:
the age of the oldest job DUE NOW among the queue entries at the head of the claim order."""

from __future__ import annotations

from onward.domain.models import NewJob
from onward.operator.due_age import oldest_due_age_s, oldest_due_at
from onward.store.reads import StoreReads
from onward.store.service import JobStore
from tests.support import ManualClock


def age(store: JobStore, clock: ManualClock) -> float:
    return oldest_due_age_s(StoreReads(store), clock())


def test_nothing_waiting_reads_zero(memory_store: JobStore, clock: ManualClock) -> None:
    """Without the None case the reaper would publish no datapoint, and the dashboard a gap, while idle."""
    assert oldest_due_at(StoreReads(memory_store), clock()) is None
    assert age(memory_store, clock) == 0.0


def test_the_age_is_the_oldest_due_job_across_tenants_and_grows_while_nobody_claims(
        memory_store: JobStore, clock: ManualClock) -> None:
    """Two tenants' jobs created 40 s apart: the age is the older one's, and it grows with the clock while no
    worker claims (what the alarm catches). Reading only the first tenant's queue, or the newest job, would
    say 5 s here instead of 45 s."""
    memory_store.create("acme", NewJob(type="demo.echo"))
    clock.advance(40)
    memory_store.create("globex", NewJob(type="demo.echo"))
    clock.advance(5)
    assert age(memory_store, clock) == 45.0
    clock.advance(60)
    assert age(memory_store, clock) == 105.0


def test_a_job_not_due_yet_does_not_count_and_claimed_jobs_leave(memory_store: JobStore, clock: ManualClock) -> None:
    """A delayed job is not waiting for a worker until it is due: counting it would fire the alarm for every
    job scheduled an hour ahead. Once the due job is claimed nothing due remains: 0."""
    memory_store.create("acme", NewJob(type="demo.echo", delay_s=3600.0))
    clock.advance(30)
    assert age(memory_store, clock) == 0.0
    memory_store.create("acme", NewJob(type="demo.echo"))
    clock.advance(12)
    assert age(memory_store, clock) == 12.0
    lease = memory_store.claim("w-1", 60)
    assert lease is not None
    assert age(memory_store, clock) == 0.0

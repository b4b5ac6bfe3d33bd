"""Jobs held aside (onward.store.held_jobs) on both store backends: a paused type's jobs met by a claim leave their
ready queue (its waiting count down) for a held index, and come back with their due times when the type is
resumed; they never hide the tenant's other jobs; a cancel of a held job puts it back first; a hold that races a
resume loses no job; a paused type's entries spread over shards, and one held before the shards is released."""

from __future__ import annotations

import pytest

from onward.domain.models import NewJob
from onward.domain.pauses import Pause
from onward.domain.states import JobState
from onward.store.claims import CANDIDATES_PER_QUERY
from onward.store.dynamo import held_jobs as dynamo_held_jobs
from onward.store.held_jobs import Released, held_jobs_of
from onward.store.held_partitions import partitions
from onward.store.memory import held_jobs as memory_held_jobs
from onward.store.pauses import FLOW_CACHE_MS
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

MAIL = NewJob(type="demo.mail", params={})
ECHO = NewJob(type="demo.echo", params={})
PAUSED_MAIL = Pause(job_type="demo.mail")


def waiting(store: JobStore, tenant: str = "acme") -> int:
    return sum(entry.waiting for entry in store.tenant_states()[tenant].queues.values())


def create(store: JobStore, clock, request: NewJob, count: int) -> list[str]:
    made = []
    for _ in range(count):
        made.append(store.create("acme", request).job.job_id)
        clock.advance(0.001)  # (distinct due times)
    return made


def test_a_paused_types_jobs_are_held_aside_and_never_hide_the_tenants_other_jobs(store: JobStore, clock) -> None:
    """Without the hold, the claims would pass the paused jobs where they are: with more than
    CANDIDATES_PER_QUERY of them at the head of the queue, the echo jobs behind them would never be read, and
    the tenant's queue entry would count jobs it cannot run."""
    store.flow.pause(PAUSED_MAIL)
    mails = create(store, clock, MAIL, CANDIDATES_PER_QUERY * 3)
    echoes = create(store, clock, ECHO, 3)
    started = []
    while (lease := store.claim("w", 300)) is not None:
        started.append(lease.job.job_id)
    assert started == echoes
    assert waiting(store) == 0  # the held ones are not waiting in the queue
    assert {store.row(job_id).held_by for job_id in mails} == {"paused#demo.mail"}
    assert {store.get(job_id).state for job_id in mails} == {JobState.QUEUED}


def test_a_resume_puts_every_held_job_back_in_its_due_order(store: JobStore, clock) -> None:
    """Catches a release that loses a job, gives it a new due time (it would go behind jobs created after
    it) or leaves its queue entry's count behind."""
    store.flow.pause(PAUSED_MAIL)
    mails = create(store, clock, MAIL, 12)
    assert store.claim("w", 300) is None  # every one held
    later = create(store, clock, ECHO, 2)
    lifted, released = store.flow.resume_and_release(PAUSED_MAIL)
    assert lifted and released.released == 12 and not released.more
    assert waiting(store) == 14
    started = []
    while (lease := store.claim("w", 300)) is not None:
        started.append(lease.job.job_id)
    assert started == mails + later


def test_a_tenants_resume_of_its_type_releases_only_its_jobs(store: JobStore, clock) -> None:
    """Catches a tenant's resume that releases another tenant's held jobs (their pause is still in force)."""
    store.flow.pause(Pause("acme", "demo.mail"))
    store.flow.pause(Pause("globex", "demo.mail"))
    acme = store.create("acme", MAIL).job.job_id
    globex = store.create("globex", MAIL).job.job_id
    assert store.claim("w", 300) is None
    assert store.flow.resume_and_release(Pause("acme", "demo.mail"))[1].released == 1
    assert store.row(globex).held_by == "paused#demo.mail" and store.row(acme).held_by is None


def test_a_held_job_is_cancelled_through_its_queue(store: JobStore, clock) -> None:
    """Catches a cancel of a held job that double-counts its queue entry (its waiting would go below zero) or
    leaves its held entry behind (a resume would find it)."""
    store.flow.pause(PAUSED_MAIL)
    job_id = store.create("acme", MAIL).job.job_id
    assert store.claim("w", 300) is None
    store.cancel(job_id, "acme")
    assert store.get(job_id).state is JobState.CANCELLED
    assert waiting(store) == 0
    assert store.flow.resume_and_release(PAUSED_MAIL)[1].released == 0


def test_a_hold_racing_a_resume_loses_no_job(backend: StoreBackend, store: JobStore, clock) -> None:
    """A worker process still sees the pause (its cache) after the operator resumed: its claim's hold must fail
    (the pause is gone), or the job would be held with no resume left to release it."""
    worker = backend.store()
    store.flow.pause(PAUSED_MAIL)
    assert worker.claim("w", 300) is None  # the worker has read the switches: paused
    job_id = store.create("acme", MAIL).job.job_id
    store.flow.resume(PAUSED_MAIL)
    assert worker.claim("w", 300) is None  # still paused for the worker: it passes the job, but cannot hold it
    assert store.row(job_id).held_by is None
    clock.advance(FLOW_CACHE_MS / 1000)
    lease = worker.claim("w", 300)
    assert lease is not None and lease.job.job_id == job_id


def held_by_partition(backend: StoreBackend, hold_key: str) -> dict[str, list[str]]:
    """The job ids in each partition of `hold_key` that holds any (read through the recorder's HeldJobs)."""
    book = held_jobs_of(backend.recorder)
    found = {partition: [job.job_id for job in book.held_in(partition, None, 1_000)]
             for partition in partitions(hold_key)}
    return {partition: jobs for partition, jobs in found.items() if jobs}


def test_a_type_paused_over_many_tenants_is_held_over_many_partitions_and_resumed_in_due_order(
        backend: StoreBackend, store: JobStore, clock) -> None:
    """Catches every tenant's jobs of a paused type held in one partition (its writes would throttle past about
    500 holds a second), a resume that reads one shard only (the others' jobs stranded), or one that puts a
    tenant's jobs back out of their due order."""
    store.flow.pause(PAUSED_MAIL)
    tenants = [f"t{n:02d}" for n in range(12)]
    made: dict[str, list[str]] = {tenant: [] for tenant in tenants}
    for _ in range(3):
        for tenant in tenants:
            made[tenant].append(store.create(tenant, MAIL).job.job_id)
            clock.advance(0.001)
    assert store.claim("w", 300) is None  # every one held
    spread = held_by_partition(backend, "paused#demo.mail")
    assert len(spread) > 8 and "paused#demo.mail" not in spread  # (36 jobs over 32 shards; none unsharded)
    every_job = [job for jobs in made.values() for job in jobs]
    assert sorted(job for jobs in spread.values() for job in jobs) == sorted(every_job)
    lifted, released = store.flow.resume_and_release(PAUSED_MAIL)
    assert lifted and released == Released(36, more=False)
    assert held_by_partition(backend, "paused#demo.mail") == {}
    started: dict[str, list[str]] = {tenant: [] for tenant in tenants}
    while (lease := store.claim("w", 300)) is not None:
        started[lease.job.tenant_id].append(lease.job.job_id)
    assert started == made


def test_a_job_held_before_the_shards_is_released_by_the_sweep(backend: StoreBackend, store: JobStore, clock,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack deployed before the shards held entries under the unsharded key `paused#<type>`: a sweep that
    read only the shards would leave those jobs out of their queues for good, and a cancel's put back that
    deleted only the shard's entry would leave the old one behind."""
    store.flow.pause(PAUSED_MAIL)
    with monkeypatch.context() as before_the_shards:  # the hold as the release before wrote it
        for module in (dynamo_held_jobs, memory_held_jobs):
            before_the_shards.setattr(module, "entry_partition", lambda hold_key, job_id: hold_key)
        old = create(store, clock, MAIL, 3)
        assert store.claim("w", 300) is None
    new = create(store, clock, MAIL, 2)
    assert store.claim("w", 300) is None
    spread = held_by_partition(backend, "paused#demo.mail")
    assert sorted(spread.pop("paused#demo.mail")) == sorted(old)
    assert sorted(job for jobs in spread.values() for job in jobs) == sorted(new)
    store.cancel(old[1], "acme")  # (put back first: its entry deleted wherever it may be)
    assert sorted(held_by_partition(backend, "paused#demo.mail").get("paused#demo.mail", [])) == sorted(
        [old[0], old[2]])
    assert store.flow.resume_and_release(PAUSED_MAIL)[1] == Released(4, more=False)
    assert held_by_partition(backend, "paused#demo.mail") == {}
    started = []
    while (lease := store.claim("w", 300)) is not None:
        started.append(lease.job.job_id)
    assert started == [old[0], old[2], *new]

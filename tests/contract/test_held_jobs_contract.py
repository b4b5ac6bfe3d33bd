"""Jobs held aside (onward.store.held_jobs) on both store backends: a paused type's jobs met by a claim leave their
ready queue (its waiting count down) for a held index, and come back with their due times when the type is
resumed; they never hide the tenant's other jobs; a cancel of a held job puts it back first; a hold that races a
resume loses no job."""

from __future__ import annotations

from onward.domain.models import NewJob
from onward.domain.pauses import Pause
from onward.domain.states import JobState
from onward.store.claims import CANDIDATES_PER_QUERY
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

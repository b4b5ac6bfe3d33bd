"""Pauses and the drain switch on both store backends (onward.store.pauses; the `store_backend` fixture): what
the book keeps, and what the claim does with it: a paused tenant or type starts nothing while its jobs keep
their state and place, its other types and other tenants go on, the drain switch starts nothing anywhere, a
pause reaches another process's claims within FLOW_CACHE_MS, and a resumed tenant neither banks credit for the
pause nor owes for it."""

from __future__ import annotations

from onward.domain.models import NewJob
from onward.domain.pauses import FlowSwitches, Pause
from onward.domain.states import JobState
from onward.maintenance.reaper import reap_once
from onward.store.pauses import FLOW_CACHE_MS
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={})
MAIL = NewJob(type="demo.mail", params={})


def drain_claims(store: JobStore, worker: str = "w") -> list[tuple[str, str]]:
    """Claim until nothing is due: (tenant, type) of each job started, in claim order."""
    started = []
    while (lease := store.claim(worker, 300)) is not None:
        started.append((lease.job.tenant_id, lease.job.type))
    return started


def test_the_book_keeps_each_kind_of_pause_and_the_drain_switch(store: JobStore) -> None:
    """Catches a pause stored under the wrong key (a type-for-everyone read back as a tenant pause), a second
    pause or resume answered as a change, or a drain switch that does not round-trip."""
    flow = store.flow
    tenant, every, one = Pause("acme"), Pause(job_type="demo.mail"), Pause("globex", "demo.echo")
    assert flow.pause(tenant) and flow.pause(every) and flow.pause(one)
    assert not flow.pause(tenant)  # already in force
    assert flow.current() == FlowSwitches(frozenset({tenant, every, one}), draining=False)
    assert flow.resume(every) and not flow.resume(every)
    assert not flow.set_draining(False)  # it was off
    assert flow.set_draining(True) and not flow.set_draining(True)
    assert flow.current() == FlowSwitches(frozenset({tenant, one}), draining=True)
    assert flow.set_draining(False)
    assert not flow.current().draining


def test_a_paused_tenant_starts_nothing_and_keeps_its_jobs_queued_while_others_run(store: JobStore) -> None:
    """Catches a claim that serves a paused tenant (the claim's fair order must leave it out), or a pause that
    moves its jobs out of `queued`."""
    waiting = [store.create("acme", ECHO).job.job_id for _ in range(3)]
    store.create("globex", ECHO)
    store.flow.pause(Pause("acme"))
    assert drain_claims(store) == [("globex", "demo.echo")]
    assert {store.get(job_id).state for job_id in waiting} == {JobState.QUEUED}
    assert store.flow.resume(Pause("acme"))
    assert drain_claims(store) == [("acme", "demo.echo")] * 3


def test_a_paused_type_waits_while_its_tenants_other_types_run(store: JobStore) -> None:
    """Catches a type pause that holds the tenant's other types (or another tenant's type), or one that lets
    the paused type start."""
    for _ in range(2):
        store.create("acme", MAIL)
        store.create("acme", ECHO)
        store.create("globex", MAIL)
    store.flow.pause(Pause("acme", "demo.mail"))
    assert sorted(drain_claims(store)) == sorted([("acme", "demo.echo")] * 2 + [("globex", "demo.mail")] * 2)
    store.flow.pause(Pause(job_type="demo.mail"))  # every tenant's: only acme's are left, they stay
    store.flow.resume(Pause("acme", "demo.mail"))
    assert drain_claims(store) == []
    store.flow.resume(Pause(job_type="demo.mail"))
    assert drain_claims(store) == [("acme", "demo.mail")] * 2


def test_a_resume_cut_short_is_finished_by_the_reapers_pass(store: JobStore) -> None:
    """A resume that lifted its pause and stopped before putting every held job back (an HTTP resume answered
    `more` and never called again, or its process died) leaves a mark the reaper's pass finishes. Catches held
    jobs stranded for good once no one resumes again (without the mark nothing names their hold key), and a
    re-paused type's jobs let go by a mark left from before."""
    for _ in range(3):
        store.create("acme", MAIL)
    store.flow.pause(Pause(job_type="demo.mail"))
    assert drain_claims(store) == []  # the claims held the three aside
    book = store.recorder.flow_book  # a resume that died right after lifting the pause:
    book.mark_unswept(Pause(job_type="demo.mail"), 0)
    book.resume(Pause(job_type="demo.mail"))
    assert drain_claims(store) == []  # held aside: no claim finds them
    assert store.flow.current().unswept == frozenset({Pause(job_type="demo.mail")})
    assert reap_once(store) == 0 and store.flow.current().unswept == frozenset()
    assert drain_claims(store) == [("acme", "demo.mail")] * 3
    store.create("acme", MAIL)
    store.flow.pause(Pause(job_type="demo.mail"))
    assert drain_claims(store) == []
    book.mark_unswept(Pause(job_type="demo.mail"), 0)  # a mark from before, the type paused again since
    assert store.flow.sweep_unswept(budget_s=5).released == 0
    assert store.flow.current().unswept == frozenset() and drain_claims(store) == []
    store.flow.resume(Pause(job_type="demo.mail"))
    assert drain_claims(store) == [("acme", "demo.mail")]


def test_the_drain_switch_starts_nothing_and_lets_running_attempts_finish(store: JobStore) -> None:
    """Catches a drain that starts jobs, or one that refuses the report of an attempt already running."""
    store.create("acme", ECHO)
    store.create("acme", ECHO)
    running = store.claim("w", 300)
    assert running is not None
    store.flow.set_draining(True)
    assert store.claim("w", 300) is None
    store.complete(running)
    assert store.get(running.job.job_id).state is JobState.SUCCEEDED
    store.flow.set_draining(False)
    assert store.claim("w", 300) is not None


def test_a_pause_reaches_another_process_within_the_cache_period(backend: StoreBackend, store: JobStore,
                                                                 clock) -> None:
    """Catches a claim that never reads the switches again (a pause that never takes effect in a process that
    read them before), or one that reads them at every claim (the cost the cache saves)."""
    other = backend.store()
    for _ in range(3):
        store.create("acme", ECHO)
    assert other.claim("w", 300) is not None  # `other` has read the switches: nothing paused
    store.flow.pause(Pause("acme"))
    assert other.claim("w", 300) is not None  # within FLOW_CACHE_MS it may still start one (documented)
    clock.advance(FLOW_CACHE_MS / 1000)
    assert other.claim("w", 300) is None
    assert store.claim("w", 300) is None  # the process that paused knows at once


def test_a_resumed_tenant_neither_banks_credit_nor_owes_for_the_pause(store: JobStore, clock) -> None:
    """Without the lift at resume, `acme` (paused with a backlog while `globex` ran 20 attempts of 10 s) would
    come back 200 s of virtual time behind and take the next 20 claims in a row; charged for the pause, it
    would not be served before globex's 20 were done. Resumed, it alternates with globex."""
    for _ in range(30):
        store.create("acme", ECHO)
        store.create("globex", ECHO)
    first = store.claim("w", 300)  # both have run one attempt of 10 s
    second = store.claim("w", 300)
    assert first is not None and second is not None
    clock.advance(10)
    store.complete(first)
    store.complete(second)
    store.flow.pause(Pause("acme"))
    for _ in range(20):
        lease = store.claim("w", 300)
        assert lease is not None and lease.job.tenant_id == "globex"
        clock.advance(10)
        store.complete(lease)
    store.flow.resume(Pause("acme"))
    served = []
    for _ in range(10):
        lease = store.claim("w", 300)
        assert lease is not None
        served.append(lease.job.tenant_id)
        clock.advance(10)
        store.complete(lease)
    assert 3 <= served.count("acme") <= 7, served

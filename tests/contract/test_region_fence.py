"""The region fence in the store (issue 39, onward.store.region_fence) on both store backends: the epoch item
raised only from the epoch below; a store of an old epoch refused every write once the rows are adopted, with
nothing written; a store of the new epoch refused rows it has not adopted; adoption per state (queued, running,
retry_wait, held aside), its versions above every earlier one, the attempt it closes not charged; the
counters rebuilt so that fair claims go on.

Two stores over one backend play the two Regions' writers after replication has delivered the rows (the
partition itself, and last writer wins, are the drill's: tests/e2e)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from onward.domain.errors import EpochRaceLost, RegionFenced, RowNotAdopted
from onward.domain.models import ConcurrencyRule, ErrorSummary, NewJob
from onward.domain.pauses import Pause
from onward.domain.regions import first_attempt_of, first_version_of
from onward.domain.states import JobState, RunOutcome
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={})


def create(store: JobStore, clock: Any, request: NewJob = ECHO, count: int = 1, tenant: str = "acme") -> list[str]:
    made = []
    for _ in range(count):
        made.append(store.create(tenant, request).job.job_id)
        clock.advance(0.001)  # (distinct due times)
    return made


def fail_over(backend: StoreBackend, epoch: int = 1) -> JobStore:
    """The new home: the epoch raised, a store writing under it, every row adopted, the counters rebuilt."""
    home = backend.store(region_epoch=epoch)
    home.raise_region_epoch(epoch, home="us-west-2", previous_home="us-east-1", reason="drill", decided_by="test")
    adopt_all(home, epoch)
    home.rebuild_counters(epoch)
    return home


def adopt_all(store: JobStore, epoch: int, limit: int = 100) -> list[Any]:
    pages = [store.adopt_page(epoch, limit=limit)]
    while pages[-1].cursor is not None:
        pages.append(store.adopt_page(epoch, cursor=pages[-1].cursor, limit=limit))
    return pages


def waiting(store: JobStore, tenant: str = "acme") -> int:
    return sum(entry.waiting for entry in store.tenant_states()[tenant].queues.values())


def max_version_before(store: JobStore, job_id: str) -> int:
    return max(event.version for event in store.events(job_id))


# --- the epoch item -------------------------------------------------------------------------------------------


def test_the_epoch_is_raised_only_from_the_epoch_below(store: JobStore, clock) -> None:
    """Without the condition `epoch = to - 1` a second operator's failover would overwrite the first's home,
    or skip an epoch (and the versions of the skipped one would be the new floor nobody wrote under)."""
    assert store.region_epoch().epoch == 0 and store.region_epoch().home is None
    raised = store.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1", reason="drill",
                                      decided_by="ops")
    assert store.region_epoch() == raised
    assert raised.fenced_at == clock()
    with pytest.raises(EpochRaceLost):
        store.raise_region_epoch(1, home="eu-west-1", previous_home="us-east-1", reason="again", decided_by="ops2")
    with pytest.raises(EpochRaceLost):
        store.raise_region_epoch(3, home="eu-west-1", previous_home="us-west-2", reason="skip", decided_by="ops2")
    assert store.region_epoch().home == "us-west-2"
    assert store.raise_region_epoch(2, home="us-east-1", previous_home="us-west-2", reason="back",
                                    decided_by="ops").epoch == 2


def test_the_adoption_is_recorded_once_on_its_own_epoch_and_a_raise_clears_it(store: JobStore, clock) -> None:
    """`adopted_at` is what lets the new home's API accept writes again (onward.domain.regions.writes_refused).
    Without the condition on the epoch, a failover resumed late could mark a newer epoch adopted before its own
    adoption ran; without the whole item being replaced by a raise, the next failover's new home would accept
    writes from its first second; without `if_not_exists`, a resumed failover would move the time recorded."""
    raised = store.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1", reason="drill",
                                      decided_by="ops")
    assert raised.adopted_at is None and store.region_epoch().adopted_at is None
    clock.advance(2)
    first = store.mark_adopted(1).adopted_at
    assert first == clock()
    clock.advance(3)
    assert store.mark_adopted(1).adopted_at == first  # a resumed failover keeps the first time
    with pytest.raises(EpochRaceLost):
        store.mark_adopted(2)
    assert store.raise_region_epoch(2, home="us-east-1", previous_home="us-west-2", reason="back",
                                    decided_by="ops").adopted_at is None
    assert store.region_epoch().adopted_at is None
    with pytest.raises(EpochRaceLost):
        store.mark_adopted(1)
    assert store.region_epoch().adopted_at is None


def test_of_two_raises_to_one_epoch_at_once_exactly_one_wins(backend: StoreBackend) -> None:
    """The two operators' failovers race: a raise that read the item and wrote unconditionally would let both
    win, each believing its Region home."""
    stores = [backend.store(), backend.store()]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def raise_to_one(store: JobStore, home: str) -> None:
        barrier.wait()
        try:
            store.raise_region_epoch(1, home=home, previous_home="us-east-1", reason="race", decided_by=home)
            outcomes.append(home)
        except EpochRaceLost:
            outcomes.append("lost")

    threads = [threading.Thread(target=raise_to_one, args=(store, home))
               for store, home in zip(stores, ("us-west-2", "eu-west-1"), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("lost") == 1
    winner = next(outcome for outcome in outcomes if outcome != "lost")
    assert stores[0].region_epoch().home == winner


# --- the stale writer and the unadopted row -------------------------------------------------------------------


def test_a_stale_epochs_writes_are_refused_after_adoption_and_write_nothing(backend: StoreBackend, store: JobStore,
                                                                            clock) -> None:
    """The old home kept running through the partition: without the epoch in every transition's condition its
    worker's complete, fail or renewal, its claim and its tenant's cancel would all commit on rows the new home
    adopted (the attempt reported twice, a status going backwards)."""
    running, failing, queued = create(store, clock, count=3)
    leases = {lease.job_id: lease for lease in (store.claim("old-w", 300), store.claim("old-w", 300))}
    assert set(leases) == {running, failing}
    fail_over(backend)
    before = backend.snapshot()
    with pytest.raises(RegionFenced):
        store.complete(leases[running], {"ok": True})
    with pytest.raises(RegionFenced):
        store.fail(leases[failing], ErrorSummary.of("Boom", "late"))
    with pytest.raises(RegionFenced):
        store.renew_lease(leases[running], 300)
    with pytest.raises(RegionFenced):
        store.cancel(queued)
    with pytest.raises(RegionFenced):
        store.claim("old-w", 300)
    assert backend.snapshot() == before


def test_the_new_epoch_refuses_a_row_it_has_not_adopted_until_it_adopts_it(backend: StoreBackend, store: JobStore,
                                                                          clock) -> None:
    """A row of the old epoch holds what the old home last wrote, which replication may not have finished
    delivering: without the condition the new home would decide from it (a cancel of a job that in fact ran)."""
    (job_id,) = create(store, clock)
    home = backend.store(region_epoch=1)
    home.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1", reason="drill", decided_by="test")
    lease = store.claim("old-w", 300)
    assert lease is not None
    clock.advance(600)
    before = backend.snapshot()
    with pytest.raises(RowNotAdopted):
        home.cancel(job_id)
    assert home.reap() == []  # (its lease lapsed: but the row is the old home's until adopted)
    assert home.claim("new-w", 300) is None
    assert backend.snapshot() == before
    adopted = home.adopt(job_id, 1)
    assert adopted is not None and adopted.version == first_version_of(1)
    assert home.adopt(job_id, 1) is None  # adopted once
    assert adopted.state is JobState.QUEUED and adopted.attempts_used == 0
    assert adopted.attempt == first_attempt_of(1) - 1  # numbered apart: its next claim is epoch 1's first
    assert home.cancel(job_id).job.state is JobState.CANCELLED


def test_a_claim_of_the_new_home_passes_an_unadopted_row_to_the_jobs_behind_it(backend: StoreBackend,
                                                                              store: JobStore, clock) -> None:
    """A row the old home created late (replicated in after the adoption) sits at the head of its queue until
    the reconciler adopts it: a claim that stopped at it would starve the tenant's adopted jobs meanwhile."""
    home = fail_over(backend)
    (late,) = create(store, clock)  # the old home's create (a create conditions nothing on the epoch)
    (adopted,) = create(home, clock)
    assert home.row(late).region_epoch == 0
    lease = home.claim("new-w", 300)
    assert lease is not None and lease.job_id == adopted
    assert home.claim("new-w", 300) is None
    assert home.adopt(late, 1) is not None
    lease = home.claim("new-w", 300)
    assert lease is not None and lease.job_id == late


# --- adoption per state ---------------------------------------------------------------------------------------


def test_a_running_job_is_queued_again_its_attempt_closed_region_failover_and_not_charged(
        backend: StoreBackend, store: JobStore, clock) -> None:
    """Without the closure the run record would stay open forever (a run with no end); charged, a job with
    max_attempts=1 whose Region was lost mid-attempt would be exhausted by the platform's failure, not its own."""
    (job_id,) = create(store, clock, NewJob(type="demo.echo", params={}, max_attempts=1))
    lease = store.claim("old-w", 300)
    assert lease is not None
    home = fail_over(backend)
    job = home.get(job_id)
    assert job.state is JobState.QUEUED and job.last_outcome is RunOutcome.REGION_FAILOVER
    assert job.attempts_used == 0 and job.lease_owner is None
    (run,) = home.runs(job_id)
    assert run.outcome is RunOutcome.REGION_FAILOVER and run.attempt == 1
    again = home.claim("new-w", 300)
    assert again is not None and again.job_id == job_id and again.attempt == first_attempt_of(1)
    assert again.job.attempts_used == 1
    assert home.complete(again, {"ran": "twice"}).job.state is JobState.SUCCEEDED
    with pytest.raises(RegionFenced):
        store.complete(lease, {"ran": "in the old home"})
    assert home.result(job_id) == {"ran": "twice"}


def test_queued_and_retry_waiting_jobs_keep_their_state_and_due_time_at_the_new_versions(
        backend: StoreBackend, store: JobStore, clock) -> None:
    """A restamp that moved a retry's due time would run it early; one that wrote no event would leave the
    view at a version the old home may have gone past (it would take the old home's late event as newer)."""
    queued, retrying = create(store, clock, count=2)
    lease = store.claim("old-w", 300)
    assert lease is not None and lease.job_id == queued
    store.fail(lease, ErrorSummary.of("Boom", "try again"))
    retry = store.get(queued)
    assert retry.state is JobState.RETRY_WAIT
    before = {job_id: max_version_before(store, job_id) for job_id in (queued, retrying)}
    pages = adopt_all(_raised(backend), 1)
    assert [sum(counts) for counts in zip(*[page[:4] for page in pages], strict=True)] == [2, 0, 0, 0]
    home = backend.store(region_epoch=1)
    after = home.get(queued)
    assert after.state is JobState.RETRY_WAIT and after.not_before == retry.not_before
    assert home.get(retrying).state is JobState.QUEUED
    for job_id, version in before.items():
        assert home.get(job_id).version == first_version_of(1) > version
        assert home.events(job_id)[-1].version == first_version_of(1)


def _raised(backend: StoreBackend, epoch: int = 1) -> JobStore:
    home = backend.store(region_epoch=epoch)
    home.raise_region_epoch(epoch, home="us-west-2", previous_home="us-east-1", reason="drill", decided_by="test")
    return home


def test_held_jobs_of_a_paused_type_and_of_a_concurrency_key_are_adopted(backend: StoreBackend, store: JobStore,
                                                                        clock) -> None:
    """Held rows are in neither the ready nor the leases index: an adoption that read only those would leave
    them at the old epoch, refused to the new home for good (RegionFenced at their release)."""
    store.flow.pause(Pause(job_type="demo.mail"))
    mails = create(store, clock, NewJob(type="demo.mail", params={}), 2)
    keyed = create(store, clock, NewJob(type="demo.sync", params={}, concurrency=ConcurrencyRule(key="k", limit=1)), 2)
    first = store.claim("old-w", 300)
    assert first is not None and first.job_id == keyed[0]
    assert store.claim("old-w", 300) is None  # the mails held (paused), the second keyed job held (its key)
    assert {store.row(job_id).held_by for job_id in [*mails, keyed[1]]} != {None}
    home = fail_over(backend)
    for job_id in [*mails, *keyed]:
        assert home.row(job_id).region_epoch == 1
        assert home.get(job_id).version >= first_version_of(1)
    second = home.claim("new-w", 300)
    assert second is not None and second.job_id == keyed[1]
    assert second.job.attempt == first_attempt_of(1)
    home.complete(second)  # (its key's slot back: the adopted first job may run again)
    home.flow.resume_and_release(Pause(job_type="demo.mail"))
    clock.advance(60)
    started = set()
    while (lease := home.claim("new-w", 300)) is not None:
        started.add(lease.job_id)
    assert started == set(mails) | {keyed[0]}


def test_versions_after_adoption_exceed_every_version_before(backend: StoreBackend, store: JobStore, clock) -> None:
    """The view keeps the highest version it saw: an adopted job whose versions went on from the old ones
    would be shadowed by the old home's late events of the same numbers."""
    jobs = create(store, clock, count=4)
    for _ in range(2):
        lease = store.claim("old-w", 300)
        assert lease is not None
        store.release(lease)
    store.claim("old-w", 300)
    before = {job_id: max_version_before(store, job_id) for job_id in jobs}
    home = fail_over(backend)
    created = home.create("acme", ECHO).job
    assert created.version == first_version_of(1)
    for job_id in jobs:
        assert home.get(job_id).version > before[job_id]
        assert home.get(job_id).version >= first_version_of(1)
    lease = home.claim("new-w", 300)
    assert lease is not None and lease.job.version > first_version_of(1)


def test_ended_rows_are_left_alone_by_the_page_and_restamped_one_at_a_time(backend: StoreBackend, store: JobStore,
                                                                          clock) -> None:
    """The page reads only the jobs that have not ended (their count bounds the failover's time); an ended
    row, adopted alone (the reconciler's), keeps its state and result and takes the new epoch's version."""
    (done,) = create(store, clock)
    lease = store.claim("old-w", 300)
    assert lease is not None
    store.complete(lease, {"n": 1})
    home = _raised(backend)
    pages = adopt_all(home, 1)
    assert sum(page.adopted for page in pages) == 0
    restamped = home.adopt(done, 1)
    assert restamped is not None and restamped.state is JobState.SUCCEEDED
    assert restamped.version == first_version_of(1)
    assert home.result(done) == {"n": 1}


def test_adoption_reads_page_by_page_and_adopts_each_job_once(backend: StoreBackend, store: JobStore, clock) -> None:
    """A cursor that skipped or repeated rows would leave jobs of the old epoch (refused for good) or count
    them twice."""
    jobs = create(store, clock, count=7)
    for _ in range(2):
        store.claim("old-w", 300)
    home = _raised(backend)
    pages = adopt_all(home, 1, limit=3)
    assert sum(page.adopted for page in pages) == 7
    assert sum(page.requeued for page in pages) == 2
    assert all(home.row(job_id).region_epoch == 1 for job_id in jobs)
    assert sum(page.adopted for page in adopt_all(home, 1)) == 0


# --- counters -------------------------------------------------------------------------------------------------


def test_counters_are_rebuilt_from_the_adopted_rows_and_fair_claims_go_on(backend: StoreBackend, store: JobStore,
                                                                         clock) -> None:
    """The replicated counters are the old home's: a RUNNING count left at the attempts the old home was
    running would hold a capped tenant below its cap for good, a queue entry's count off would hide jobs."""
    create(store, clock, count=4, tenant="acme")
    create(store, clock, count=2, tenant="globex")
    for _ in range(3):
        store.claim("old-w", 300)
    home = fail_over(backend)
    states = home.tenant_states()
    assert sum(state.usage.running for state in states.values()) == 0
    assert waiting(home, "acme") + waiting(home, "globex") == 6
    started: dict[str, int] = {}
    while (lease := home.claim("new-w", 300)) is not None:
        started[lease.job.tenant_id] = started.get(lease.job.tenant_id, 0) + 1
    assert started == {"acme": 4, "globex": 2}
    states = home.tenant_states()
    assert sum(state.usage.running for state in states.values()) == 6
    assert waiting(home, "acme") + waiting(home, "globex") == 0


def test_a_store_follows_the_epoch_it_is_set_to(backend: StoreBackend, store: JobStore, clock) -> None:
    """The authority lease moves a running process to the new epoch: without set_region_epoch it would stay
    fenced (or, set back, a stale one would write again)."""
    (job_id,) = create(store, clock)
    fail_over(backend)
    with pytest.raises(RegionFenced):
        store.cancel(job_id)
    store.set_region_epoch(1)
    assert store.writer_epoch == 1
    assert store.cancel(job_id).job.state is JobState.CANCELLED


def test_every_item_a_write_of_the_new_epoch_puts_or_updates_carries_it(backend: StoreBackend, store: JobStore,
                                                                        clock) -> None:
    """The fence reconciler tells an old home's late write from the new home's by this stamp alone: an item
    written without it (a run record and the result it holds, an event, a counter) would read as epoch 0, a
    late write to undo. Epoch 0 writes no stamp (absent is 0), so a deployment that never failed over writes
    what it did."""
    (old,) = create(store, clock)
    assert all("region_epoch" not in item for item in backend.jobs_table())
    home = fail_over(backend)
    (job_id,) = create(home, clock)
    lease = home.claim("new-w", 300)
    assert lease is not None and lease.job_id == old
    home.complete(lease, {"n": 1})
    assert home.row(job_id).region_epoch == 1 and home.row(old).region_epoch == 1
    if backend.name == "memory":
        return  # (the in-memory recorder keeps the epoch on the row only; its raw view renders no stamps)
    written = [item for item in backend.jobs_table() if item["pk"] in (f"JOB#{old}", f"JOB#{job_id}")
               or item["pk"].startswith("TENANT#acme#")]
    assert {item["sk"] for item in written} >= {"JOB", "RUN#010001", "QUEUE"}  # (attempts apart)
    assert [item["result"] for item in written if item["sk"] == "RUN#010001"] == [{"n": 1}]  # (issue 34)
    assert {item.get("region_epoch") for item in written} == {1}
    events = [item for item in backend.outbox_table() if item["version"] >= first_version_of(1)]
    assert len(events) == 4 and {item.get("region_epoch") for item in events} == {1}


def test_an_ended_row_of_the_old_epoch_is_answered_but_replayed_only_once_adopted(backend: StoreBackend,
                                                                                  store: JobStore, clock) -> None:
    """Ended rows are not adopted by the failover's pages: a read that refused them would answer a cancel of
    a finished job with an error; a replay that committed on one would write versions the old home may have
    written too."""
    (dead,) = create(store, clock, NewJob(type="demo.echo", params={}, max_attempts=1))
    lease = store.claim("old-w", 300)
    assert lease is not None
    store.fail(lease, ErrorSummary.of("Boom", "permanent"), permanent=True)
    home = fail_over(backend)
    assert home.cancel(dead).job.state is JobState.DEAD
    before = backend.snapshot()
    with pytest.raises(RowNotAdopted):
        home.replay(dead)
    assert backend.snapshot() == before
    assert home.adopt(dead, 1) is not None
    replayed = home.replay(dead)
    assert replayed.state is JobState.QUEUED and replayed.version == first_version_of(1) + 1

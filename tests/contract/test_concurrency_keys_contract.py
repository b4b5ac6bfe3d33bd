"""Concurrency keys (issue 37, item 2) on both store backends: at most `limit` jobs of a tenant's key run at once;
a job whose claim finds its key at its limit is held aside (out of its ready queue, its tenant's waiting count
down) and put back by the end of an attempt of the key (complete, fail, reap, release, snooze, cancel
acknowledgement); a cancel of a held job takes it off the key's held count."""

from __future__ import annotations

import threading

import pytest

from onward.domain.concurrency import ConcurrencyRule, KeyCount
from onward.domain.errors import ConcurrencyLimitReached
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend


def keyed(key: str, limit: int = 1, job_type: str = "demo.sync") -> NewJob:
    return NewJob(type=job_type, params={}, concurrency=ConcurrencyRule(key=key, limit=limit))


def waiting(store: JobStore, tenant: str = "acme") -> int:
    return sum(entry.waiting for entry in store.tenant_states()[tenant].queues.values())


def create(store: JobStore, clock, request: NewJob, count: int, tenant: str = "acme") -> list[str]:
    made = []
    for _ in range(count):
        made.append(store.create(tenant, request).job.job_id)
        clock.advance(0.001)  # (distinct due times)
    return made


def claim_all(store: JobStore, worker: str = "w") -> list:
    leases = []
    while (lease := store.claim(worker, 300)) is not None:
        leases.append(lease)
    return leases


def test_a_key_runs_at_most_its_limit_and_the_others_wait_held_aside(store: JobStore, clock) -> None:
    """Without the key's condition in the claim's transaction every job of the key would start; without the
    hold, the blocked jobs would stay in the queue, counted as waiting, read by every claim."""
    blocked = create(store, clock, keyed("customer-42", limit=2), 5)
    free = create(store, clock, NewJob(type="demo.echo", params={}), 2)
    started = {lease.job.job_id for lease in claim_all(store)}
    assert started == set(blocked[:2]) | set(free)
    assert store.recorder.key_count("acme", "customer-42") == KeyCount(running=2, held=3)
    assert {store.row(job_id).held_by for job_id in blocked[2:]} == {"concurrency#customer-42"}
    assert {store.get(job_id).state for job_id in blocked[2:]} == {JobState.QUEUED}
    assert waiting(store) == 0


def test_each_end_of_an_attempt_puts_the_oldest_held_job_back(store: JobStore, clock) -> None:
    """Catches an end that gives the slot back without releasing a held job (they would wait forever: no
    claim reads them) or releases them out of due order."""
    jobs = create(store, clock, keyed("k"), 4)
    (first,) = claim_all(store)
    assert store.complete(first, {"ok": True}).job.state is JobState.SUCCEEDED
    assert store.recorder.key_count("acme", "k") == KeyCount(running=0, held=2)
    (second,) = claim_all(store)
    assert second.job.job_id == jobs[1]
    assert store.fail(second, ErrorSummary.of("Boom", "x"), permanent=True).job.state is JobState.DEAD
    (third,) = claim_all(store)
    assert third.job.job_id == jobs[2]
    store.release(third)  # a graceful release ends the attempt too; the released job waits in its queue again
    assert store.recorder.key_count("acme", "k") == KeyCount(running=0, held=0)
    assert {lease.job.job_id for lease in claim_all(store)} in ({jobs[2]}, {jobs[3]})


def test_a_dead_workers_slot_comes_back_with_its_lease_expiry(store: JobStore, clock) -> None:
    """The reaper's reap ends the vanished attempt: without the slot given back there, a worker that died
    holding it would block the key for good."""
    jobs = create(store, clock, keyed("k"), 2)
    (lease,) = claim_all(store)
    assert claim_all(store) == []
    clock.advance(301)
    assert [job.job_id for job in store.reap()] == [lease.job.job_id]
    assert store.recorder.key_count("acme", "k").running == 0
    started = claim_all(store)
    assert len(started) == 1 and started[0].job.job_id in jobs
    assert store.recorder.key_count("acme", "k").running == 1


def test_a_cancelled_held_job_leaves_the_keys_held_count(store: JobStore, clock) -> None:
    """Catches a cancel that puts the held job back without taking it off `held`: the key's ends would then
    look for held jobs that are not there."""
    jobs = create(store, clock, keyed("k"), 3)
    (running,) = claim_all(store)
    assert store.cancel(jobs[1], "acme").job.state is JobState.CANCELLED
    assert store.recorder.key_count("acme", "k") == KeyCount(running=1, held=1)
    store.complete(running, None)
    assert [lease.job.job_id for lease in claim_all(store)] == [jobs[2]]
    assert store.recorder.key_count("acme", "k") == KeyCount(running=1, held=0)


def test_keys_are_the_tenants_own_and_each_key_has_its_own_limit(store: JobStore, clock) -> None:
    """Catches a key shared across tenants, or one key's jobs holding back another key's."""
    create(store, clock, keyed("k"), 2)
    create(store, clock, keyed("k"), 2, tenant="globex")
    create(store, clock, keyed("other", limit=3), 3)
    started = claim_all(store)
    assert sorted((lease.job.tenant_id, lease.job.concurrency_key) for lease in started) == [
        ("acme", "k"), ("acme", "other"), ("acme", "other"), ("acme", "other"), ("globex", "k")]


def test_concurrent_claims_from_two_stores_never_pass_the_limit(backend: StoreBackend, clock) -> None:
    """Two processes racing: the slot is taken by the claim's transaction's condition, so no interleaving
    starts more than `limit` (a read-then-write check would let both take the last slot)."""
    stores = [backend.store(), backend.store()]
    create(stores[0], clock, keyed("k", limit=2), 12)
    leases: list = []
    lock = threading.Lock()

    def work(store: JobStore) -> None:
        for _ in range(6):
            lease = store.claim(f"w{id(store)}", 300)
            if lease is not None:
                with lock:
                    leases.append(lease)

    threads = [threading.Thread(target=work, args=(store,)) for store in stores for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(leases) == 2
    assert stores[0].recorder.key_count("acme", "k") == KeyCount(running=2, held=10)


def overflowing(key: str, on_overflow: str, limit: int = 1) -> NewJob:
    return NewJob(type="demo.sync", params={},
                  concurrency=ConcurrencyRule(key=key, limit=limit, on_overflow=on_overflow))  # type: ignore[arg-type]


def test_cancel_newest_refuses_a_create_while_the_key_is_at_its_limit(store: JobStore, clock) -> None:
    """Catches a `cancel_newest` create that queues anyway (or writes something before refusing)."""
    create(store, clock, keyed("k"), 1)
    assert store.create("acme", overflowing("k", "cancel_newest")).job.state is JobState.QUEUED  # none running yet
    (lease,) = claim_all(store)
    jobs_before = len(list(store.recorder.all_jobs()))
    with pytest.raises(ConcurrencyLimitReached, match="'k' has 1 of 1 running"):
        store.create("acme", overflowing("k", "cancel_newest"))
    assert len(list(store.recorder.all_jobs())) == jobs_before
    store.complete(lease, None)
    assert store.create("acme", overflowing("k", "cancel_newest")).job.state is JobState.QUEUED


def test_cancel_oldest_queued_cancels_the_oldest_held_job_and_queues_the_new_one(store: JobStore, clock) -> None:
    """Catches a strategy that cancels the running job, a newer held one, or leaves the key's counts behind."""
    first, older, newer = create(store, clock, keyed("k"), 3)
    claim_all(store)  # first runs, older and newer held
    made = store.create("acme", overflowing("k", "cancel_oldest_queued")).job
    assert store.get(older).state is JobState.CANCELLED
    assert store.get(first).state is JobState.RUNNING and store.get(newer).state is JobState.QUEUED
    assert made.state is JobState.QUEUED
    assert store.recorder.key_count("acme", "k") == KeyCount(running=1, held=1)


def test_a_held_job_is_explained_by_its_key(store: JobStore, clock) -> None:
    """The sentence `explain` shows for a job held on its key; nothing for a job not held."""
    waiting_job, held_job = create(store, clock, keyed("customer-42", limit=1), 2)
    assert store.concurrency.limited_by(store.row(held_job)) is None  # not claimed yet: not held
    claim_all(store)
    assert store.concurrency.limited_by(store.row(held_job)).startswith(
        "1 of 1 running for concurrency key 'customer-42'")
    assert store.concurrency.limited_by(store.row(waiting_job)) is None  # (it runs)


def test_an_end_that_raced_a_hold_puts_the_held_job_back(backend: StoreBackend, clock) -> None:
    """The race the condition on `held` is for: store A's complete reads the key (nothing held), then store B's
    claim finds the key at its limit and holds its job, then A commits. Without the condition A would give the last
    slot back with nothing released, and B's job would wait for ever (no claim reads it, no end is left); with it,
    A's commit is refused, A reads again and puts the job back."""
    ending, racing = backend.store(), backend.store()
    running_id, blocked_id = create(ending, clock, keyed("k"), 2)
    lease = ending.claim("a", 300)
    assert lease is not None and lease.job.job_id == running_id
    counts = ending.concurrency._counts
    interloped: list[object] = []

    class Interloping:
        def key_count(self, tenant_id: str, key: str) -> KeyCount:
            count = counts.key_count(tenant_id, key)
            if not interloped:
                interloped.append(racing.claim("b", 300))  # (the key is at its limit: the claim holds the job)
            return count

    ending.concurrency._counts = Interloping()  # type: ignore[assignment]
    ending.complete(lease, None)
    assert interloped == [None] and racing.concurrency.holds == 1
    assert ending.stats.lost_races().get("ConcurrencyKeyMoved", 0) >= 1
    assert ending.row(blocked_id).held_by is None
    assert [started.job.job_id for started in claim_all(racing)] == [blocked_id]

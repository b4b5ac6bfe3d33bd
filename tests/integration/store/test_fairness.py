"""Fair dispatch in the claim path: the tenant counters move in the same transaction as every transition,
caps hold under concurrency (sampled while real Worker threads run over real HTTP to the embedded endpoint,
and from the run records afterwards), caps flex for a lone tenant, a returning tenant is lifted to the
floor, and a burst from one tenant does not hold back another tenant's first job beyond one job. The
step-by-step tests (manual clock) run on each backend (tests/conftest.py's `store_backend`); those with
real Worker threads and the real clock on DynamoDB only (marked `integration`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Self

import pytest

from onward.domain.dispatch import TenantPolicy, Usage
from onward.domain.models import ErrorSummary, NewJob, Run
from onward.domain.states import CLAIMABLE_STATES, TERMINAL_STATES, JobState
from onward.runtime.worker import JobContext, Registry, Worker
from onward.store.service import JobStore, Tenant

WORK = "fair.work"
registry = Registry()


@registry.register(WORK)
def work(context: JobContext) -> None:
    context.wait(context.params["seconds"])


@pytest.fixture
def store(store_backend) -> JobStore:
    return store_backend.store()


@pytest.fixture
def live_store(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb)  # the real clock: handlers really take their time


def enqueue(store: JobStore, tenant_id: str, count: int, seconds: float) -> list[str]:
    return [store.create(tenant_id, NewJob(type=WORK, params={"seconds": seconds, "n": n})).job.job_id
            for n in range(count)]


@dataclass(frozen=True)
class Sample:
    running: dict[str, int]
    waiting: dict[str, int]


class Sampler:
    """Reads every tenant's counters (one consistent Query) every few ms while the pool runs."""

    def __init__(self, store: JobStore, every_s: float = 0.01) -> None:
        self.samples: list[Sample] = []
        self._store, self._every_s = store, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            states = self._store.tenant_states()
            self.samples.append(Sample({t: s.usage.running for t, s in states.items()},
                                       {t: s.load().waiting for t, s in states.items()}))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class Pool:
    """`size` real Worker threads."""

    def __init__(self, store: JobStore, size: int) -> None:
        self.workers = [Worker(store, registry, worker_id=f"w{n}", lease_s=10, idle_s=0.02) for n in range(size)]
        self.threads = [threading.Thread(target=worker.run) for worker in self.workers]

    def __enter__(self) -> Self:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:
            worker.shutdown()
        for thread in self.threads:
            thread.join(timeout=30)


def wait_until(predicate, timeout_s: float = 60, every_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(every_s)


def all_ended(store: JobStore, job_ids: list[str]) -> bool:
    return all(store.get(job_id).state in TERMINAL_STATES for job_id in job_ids)


def runs_by_tenant(store: JobStore, jobs: dict[str, list[str]]) -> dict[str, list[Run]]:
    return {tenant: [run for job_id in job_ids for run in store.runs(job_id)] for tenant, job_ids in jobs.items()}


def most_at_once(runs: list[Run], *, claimed_before: float = float("inf")) -> int:
    """The most of these attempts running at one instant, looking at the instants of claims made before
    `claimed_before` (ms). An attempt runs over [claimed_at, finished_at)."""
    return max((sum(1 for other in runs if other.claimed_at <= run.claimed_at < (other.finished_at or 2**62))
                for run in runs if run.claimed_at < claimed_before), default=0)


def assert_counters_settled(store: JobStore) -> None:
    """Nothing runs: every RUNNING counter is back to zero, and WAITING counts the jobs that wait."""
    jobs = list(store.all_jobs())
    for tenant_id, state in store.tenant_states().items():
        assert (state.usage.running, state.usage.started_ms_sum) == (0, 0), tenant_id
        waiting = sum(1 for job in jobs if job.tenant_id == tenant_id and job.state in CLAIMABLE_STATES)
        assert state.load().waiting == waiting, tenant_id
        assert all(count >= 0 for count in state.waiting_by_queue.values()), tenant_id


# --- with real Worker threads -----------------------------------------------------------------------------

@pytest.mark.integration
def test_caps_hold_under_concurrency_while_every_tenant_has_work(live_store):
    """Three tenants with caps 2/2/2 on six workers; `heavy` has weight 4, so fair share alone would give it
    four workers: only the cap (the claim's Admission, `running < cap`) holds it to two. Checked on the
    counters sampled every 10 ms while the pool runs, and on the run records afterwards. Without the
    condition (or with the counter changed outside the claim's transaction), `heavy` runs 3-4 at once."""
    live_store.register_tenant(Tenant("heavy", TenantPolicy(weight=4, cap=2), ready_shards=2))
    for tenant_id in ("a", "b"):
        live_store.register_tenant(Tenant(tenant_id, TenantPolicy(cap=2)))
    jobs = {tenant_id: enqueue(live_store, tenant_id, 10, 0.25) for tenant_id in ("heavy", "a", "b")}
    with Sampler(live_store) as sampler, Pool(live_store, 6):
        wait_until(lambda: all_ended(live_store, [j for ids in jobs.values() for j in ids]))

    busy = [s for s in sampler.samples if all(s.waiting.get(t, 0) > 0 for t in jobs)]
    assert len(busy) >= 10, "the sampler saw the pool while every tenant had work"
    assert max(s.running["heavy"] for s in busy) == 2  # the cap was reached, and held
    assert all(running <= 2 for s in busy for running in s.running.values()), [s.running for s in busy]

    runs = runs_by_tenant(live_store, jobs)
    # Before each tenant's last claim, it still had a waiting job: no tenant may exceed its cap before the
    # earliest of those instants (after it, the others may flex into the freed workers).
    every_tenant_waiting_until = min(max(run.claimed_at for run in tenant_runs) for tenant_runs in runs.values())
    for tenant_id, tenant_runs in runs.items():
        assert len(tenant_runs) == 10
        assert most_at_once(tenant_runs, claimed_before=every_tenant_waiting_until) <= 2, tenant_id
    assert_counters_settled(live_store)


@pytest.mark.integration
def test_a_lone_tenant_uses_the_whole_pool(live_store):
    """Caps flex when no other tenant has work: `solo` has a cap of 2 and six workers run its jobs six at a
    time. Without the flex pass in JobStore.claim, four of the six workers would idle with jobs due."""
    live_store.register_tenant(Tenant("solo", TenantPolicy(cap=2)))
    job_ids = enqueue(live_store, "solo", 12, 0.6)
    with Sampler(live_store) as sampler, Pool(live_store, 6):
        wait_until(lambda: all_ended(live_store, job_ids))
    assert max(s.running.get("solo", 0) for s in sampler.samples) == 6
    assert most_at_once(runs_by_tenant(live_store, {"solo": job_ids})["solo"]) == 6
    assert_counters_settled(live_store)


@pytest.mark.integration
def test_a_burst_does_not_hold_back_another_tenants_first_job_beyond_one_job(live_store):
    """`burst` enqueues 40 jobs of 2 s and (alone) flexes over all six workers. `late` then submits one job:
    it must start when the first of the running jobs ends, within one job duration (plus 0.5 s for the
    claim itself on a shared machine), ahead of the 34 burst jobs queued before it. With one FIFO queue
    (due time order across tenants) it would wait behind them (~12 s); without the flex pass, the burst
    would never reach six workers and this test would time out before `late` is enqueued."""
    duration_s = 2  # an int: params give back what they were given, and a whole float is refused
    live_store.register_tenant(Tenant("burst", TenantPolicy(cap=2)))
    live_store.register_tenant(Tenant("late", TenantPolicy(cap=2)))
    burst = enqueue(live_store, "burst", 40, duration_s)
    with Pool(live_store, 6):
        wait_until(lambda: live_store.tenant_states()["burst"].usage.running == 6)
        time.sleep(0.3)
        (late,) = enqueue(live_store, "late", 1, 0.1)
        wait_until(lambda: live_store.get(late).state in TERMINAL_STATES, timeout_s=30)
    job = live_store.get(late)
    (run,) = live_store.runs(late)
    assert job.state is JobState.SUCCEEDED
    assert (run.claimed_at - job.created_at) / 1000 <= duration_s + 0.5
    started_before = [r for job_id in burst for r in live_store.runs(job_id) if r.claimed_at < run.claimed_at]
    assert len(started_before) <= 12, "late went ahead of the burst's queue"
    assert_counters_settled(live_store)  # shutdown released the burst's running jobs back to the queue


# --- the store, step by step (manual clock) ---------------------------------------------------------------

def usage(store: JobStore, tenant_id: str) -> Usage:
    return store.tenant_states()[tenant_id].usage


def waiting(store: JobStore, tenant_id: str) -> int:
    return store.tenant_states()[tenant_id].load().waiting


def test_the_counters_move_in_every_transition(store, clock):
    """Each transition's counter update rides in ITS transaction (onward.store.ports.waiting_update and
    running_update): create, claim, fail into retry, reap, release, cancel acknowledgement, cancel of a
    queued job, exhaust at claim, replay. `ended_ms` adds up to the run records' durations exactly (one
    tenant: no lift). A transition that forgot its counter update shows up as a wrong number here."""
    t0 = clock.now
    a = store.create("acme", NewJob(type=WORK, params={"seconds": 0}, max_attempts=4)).job.job_id
    assert (waiting(store, "acme"), usage(store, "acme")) == (1, Usage())

    lease = store.claim("w1", 30)
    assert (waiting(store, "acme"), usage(store, "acme")) == (0, Usage(1, 0, t0))
    clock.advance(5)
    store.fail(lease, ErrorSummary.of("Flaky", "once"))  # -> retry_wait: waiting again
    assert (waiting(store, "acme"), usage(store, "acme")) == (1, Usage(0, 5000, 0, ended=1))

    clock.advance(400)  # past any backoff
    lease = store.claim("w1", 30)
    clock.advance(31)
    assert [job.job_id for job in store.reap()] == [a]  # lease lapsed -> queued
    assert (waiting(store, "acme"), usage(store, "acme").running) == (1, 0)

    lease = store.claim("w2", 30)
    clock.advance(2)
    store.release(lease)  # graceful shutdown -> queued
    assert (waiting(store, "acme"), usage(store, "acme").running) == (1, 0)

    lease = store.claim("w2", 30)
    store.cancel(a, "acme")  # a request: still running
    assert usage(store, "acme").running == 1
    clock.advance(1)
    store.acknowledge_cancel(lease)
    assert (waiting(store, "acme"), usage(store, "acme").running) == (0, 0)

    b = store.create("acme", NewJob(type=WORK, params={"seconds": 0})).job.job_id
    store.cancel(b, "acme")  # queued -> cancelled
    assert waiting(store, "acme") == 0

    c = store.create("acme", NewJob(type=WORK, params={"seconds": 0}, max_attempts=1)).job.job_id
    lease = store.claim("w1", 30)
    store.release(lease)  # back to the queue; a graceful release is not charged an attempt
    assert (waiting(store, "acme"), usage(store, "acme").running) == (1, 0)
    lease = store.claim("w1", 30)
    assert lease is not None and lease.job_id == c
    store.fail(lease, ErrorSummary.of("Boom", "no"), permanent=True)
    assert store.get(c).state is JobState.DEAD
    assert (waiting(store, "acme"), usage(store, "acme").running) == (0, 0)
    store.replay(c)
    assert waiting(store, "acme") == 1

    runs = [run for job_id in (a, b, c) for run in store.runs(job_id)]
    ended = [run for run in runs if run.finished_at is not None]
    assert usage(store, "acme") == Usage(0, sum(run.finished_at - run.claimed_at for run in ended), 0,
                                         ended=len(ended))
    assert_counters_settled(store)


def test_a_capped_tenant_waits_while_another_has_work_then_flexes(store, clock):
    """Claims in fair order: `capped` (cap 1) is passed over while `other` has due jobs, then served past
    its cap once `other` has none. Without the cap check the second claim would be capped's; without flex,
    the fourth claim would return None with two of capped's jobs due."""
    store.register_tenant(Tenant("capped", TenantPolicy(cap=1)))
    capped = enqueue(store, "capped", 3, 0)
    other = enqueue(store, "other", 2, 0)
    tenants = [store.claim(f"w{n}", 30).job.tenant_id for n in range(5)]
    assert tenants == ["capped", "other", "other", "capped", "capped"]
    assert store.claim("w9", 30) is None
    assert {t: s.usage.running for t, s in store.tenant_states().items()} == {"capped": 3, "other": 2}
    assert len(capped) + len(other) == 5


def test_two_claims_cannot_both_take_a_tenants_last_slot(store, store_backend, monkeypatch):
    """The Admission's `running < cap` condition on the claim's counter update: a second store decides from counters
    read BEFORE the first store's claim committed (so it believes `a-capped` has a free slot). The
    condition refuses it and it claims `b-other`'s job instead. Without the condition, `a-capped` would run
    two jobs with a cap of 1 while `b-other` waits."""
    store.register_tenant(Tenant("a-capped", TenantPolicy(cap=1)))
    enqueue(store, "a-capped", 2, 0)
    (other,) = enqueue(store, "b-other", 1, 0)
    second = store_backend.store()
    stale = second.tenant_states()
    monkeypatch.setattr(second, "tenant_states", lambda: stale)

    assert store.claim("w1", 30).job.tenant_id == "a-capped"
    lease = second.claim("w2", 30)
    assert lease.job_id == other
    assert usage(store, "a-capped").running == 1


def test_a_flex_does_not_pass_a_tenant_that_came_back_below_its_cap(store, store_backend, clock, monkeypatch):
    """A second store decides from counters read while both tenants were at their caps (cap 1 each, one job
    each waiting), so it would flex `a` past its cap. Meanwhile `b`'s job ended: b is below its cap with a
    job due. The flexing transaction's check (`running >= cap` on b's counter) refuses, the claim
    decides again from fresh counters and serves b. Without the check, a would run two jobs with a cap of 1
    while b, below its cap, waits."""
    for tenant_id in ("a", "b"):
        store.register_tenant(Tenant(tenant_id, TenantPolicy(cap=1)))
        enqueue(store, tenant_id, 2, 0)
    store.claim("w1", 300)
    b_lease = store.claim("w2", 300)
    assert b_lease.job.tenant_id == "b"
    clock.advance(10)
    second = store_backend.store()
    stale = second.tenant_states()
    store.complete(b_lease)
    reads = iter([stale])
    fresh = second.tenant_states
    monkeypatch.setattr(second, "tenant_states", lambda: next(reads, None) or fresh())

    assert second.claim("w3", 300).job.tenant_id == "b"
    assert {t: s.usage.running for t, s in store.tenant_states().items()} == {"a": 1, "b": 1}


def test_a_returning_tenant_is_lifted_to_the_floor(store, clock):
    """The claim writes the lift (raised so that its virtual time is the clock's, never lowered): `sleeper`
    used nothing while `bulk` ran two jobs for 100 s, so it starts level with bulk (200 s) instead of 200 s
    ahead. It is served first on the tie (fewer running). Without the lift,
    sleeper's counter would stay at 0 and it would take every free worker until it had used 200 s."""
    enqueue(store, "bulk", 5, 0)
    store.claim("w1", 300)
    store.claim("w2", 300)
    clock.advance(100)
    enqueue(store, "sleeper", 2, 0)
    lease = store.claim("w3", 300)
    assert lease.job.tenant_id == "sleeper"
    assert usage(store, "sleeper") == Usage(1, 0, clock.now, lift_vt=200_000)
    clock.advance(10)
    # Now sleeper has used 200 + 10 s, bulk 200 + 20 s: sleeper is still first, by 10 s of worker time.
    assert store.claim("w4", 300).job.tenant_id == "sleeper"
    assert store.tenant_states()["sleeper"].load().virtual_time(clock.now) == 210_000


def test_a_reaped_attempt_is_charged_from_its_run_record(store, clock):
    """The reaper has no lease: onward.store.commit_inputs.claimed_at_of reads the claim time from its run record, so
    the tenant is charged for the time until the reap (here 31 s) and its running count goes back down."""
    enqueue(store, "acme", 1, 0)
    store.claim("w1", 30)
    clock.advance(31)
    assert len(store.reap()) == 1
    assert usage(store, "acme") == Usage(0, 31_000, 0, ended=1)

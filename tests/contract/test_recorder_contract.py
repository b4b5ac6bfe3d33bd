"""The job store's contract, ONE suite run against every recorder (onward.store.ports): in memory and on
DynamoDB (the embedded endpoint, the shared stack emptied for each test), through the `store_backend` fixture.

What a recorder must honour for JobStore to be correct over it: creates with idempotency; every condition
of a write (the job row's state / version / attempt, a lapsed lease for a reap, one outbox event per
version, a run opened and closed once, a result put once, the claim's Admission on the RUNNING counter, a
flexing claim's checks on the others), each one making the WHOLE write do nothing; the cap under claims
from many threads; the ready index's order (priority band, then due time) and the lease index's; lease
renewal and the marking of a fenced report; the reaper. A recorder that passes here can carry the store
(tests/integration/store/test_store_model.py then drives the store over both at random).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.dispatch import TenantPolicy, Usage
from onward.domain.errors import IdempotencyConflict, StoreInvariantViolation
from onward.domain.lifecycle import Change, RunClosure
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState, RunOutcome, Transition
from onward.store.dynamo.keys import Entity, lease_partition, lease_shard_partition, run_key
from onward.store.ports import (
    ActiveEntry,
    Admission,
    CommitOutcome,
    CreateOutcome,
    JobRow,
    NewJobWrite,
    Tenant,
    TransitionWrite,
)
from onward.store.ports.index_shards import LEASE_SHARDS
from onward.store.ports.ready_queues import ReadyQueue, ready_shard
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={"n": 1})
RETENTION_S = 7 * 86_400
JOB_RETENTION_S = 30 * 86_400


def row(backend: StoreBackend, job_id: str) -> JobRow:
    found = backend.recorder.job(job_id)
    assert found is not None
    return found


def write_of(change: Change, shards: int = 1, **options: Any) -> TransitionWrite:
    return TransitionWrite.of(change, ready_shards=shards, retention_s=RETENTION_S, job_retention_s=JOB_RETENTION_S,
                              **options)


def decided(backend: StoreBackend, job_id: str, decision: Any, **options: Any) -> TransitionWrite:
    assert isinstance(decision, Change), decision
    read = row(backend, job_id)
    return write_of(decision, read.ready_shards, **{"opened": read.opened, **options})


def claim_write(
    backend: StoreBackend, job_id: str, now: int, admission: Admission | None = None
) -> TransitionWrite:
    job = row(backend, job_id).job
    return decided(backend, job_id, lifecycle.claim(job, "w9", 30_000, now), admission=admission)


# --- create and idempotency ---------------------------------------------------------------------------------

def test_a_create_writes_the_job_row_its_first_event_and_its_waiting_counter(backend, store):
    job = store.create("acme", ECHO).job
    assert row(backend, job.job_id) == JobRow(job, 1)
    events = backend.recorder.events(job.job_id)
    assert [(event.version, event.status) for event in events] == [(1, JobState.QUEUED)]
    assert store.tenant_states()["acme"].waiting_by_queue == {ReadyQueue(0, 0): 1}
    kinds = sorted(str(item.get("entity")) for item in backend.jobs_table())
    assert kinds == sorted([Entity.JOB, Entity.TENANT, Entity.TENANT, Entity.TENANT_QUEUE]), "settings + registry"
    assert backend.recorder.active_head(4) == [ActiveEntry("acme", 0, 0.0)], "the entry joined the index"
    assert backend.recorder.runs(job.job_id) == [] and backend.recorder.result(job.job_id) is None


def test_the_same_key_and_request_is_the_same_job_and_writes_nothing(backend, store):
    first = store.create("acme", ECHO, idempotency_key="order-7")
    before = backend.snapshot()
    again = backend.store().create("acme", ECHO, idempotency_key="order-7")
    assert (first.created, again.created, again.job) == (True, False, first.job)
    assert backend.snapshot() == before


def test_the_same_key_with_another_request_is_a_conflict_and_writes_nothing(backend, store):
    first = store.create("acme", ECHO, idempotency_key="order-7").job
    before = backend.snapshot()
    with pytest.raises(IdempotencyConflict) as raised:
        store.create("acme", NewJob(type="demo.echo", params={"n": 2}), idempotency_key="order-7")
    assert raised.value.job_id == first.job_id
    assert backend.snapshot() == before


def test_a_taken_key_refuses_the_whole_create(backend, store, clock):
    """The recorder's own condition, for two creates racing with one key: the second writes nothing at all
    (no job row, event or counter), whatever the store checked before."""
    store.create("acme", ECHO, idempotency_key="k")
    before = backend.snapshot()
    change = lifecycle.create("f" * 32, "acme", ECHO, clock.now)
    write = NewJobWrite.of(change, ready_shards=1, retention_s=RETENTION_S, job_retention_s=JOB_RETENTION_S,
                           idempotency=("k", "digest"))
    assert backend.recorder.create(write) is CreateOutcome.KEY_USED
    assert backend.snapshot() == before
    assert backend.recorder.job("f" * 32) is None


def test_idempotency_keys_are_per_tenant(backend, store):
    a = store.create("acme", ECHO, idempotency_key="k").job
    b = store.create("globex", ECHO, idempotency_key="k").job
    assert a.job_id != b.job_id
    assert backend.recorder.idempotency("acme", "k").job_id == a.job_id
    assert backend.recorder.idempotency("globex", "k").job_id == b.job_id
    assert backend.recorder.idempotency("initech", "k") is None


def test_a_tenants_read_of_another_tenants_job_finds_nothing_as_for_a_missing_one(backend, store):
    """Catches a scoped read that hands back another tenant's row (for the caller to compare and drop: a read
    that costs what a found row costs), or that misses the tenant's own."""
    job = store.create("acme", ECHO).job
    assert backend.recorder.tenant_job(job.job_id, "acme") == backend.recorder.job(job.job_id)
    assert backend.recorder.tenant_job(job.job_id, "globex") is None
    assert backend.recorder.tenant_job("f" * 32, "acme") is None


# --- conditions: a failed one writes nothing at all ---------------------------------------------------------

@pytest.mark.parametrize("first", ["complete", "request_cancel"])
def test_a_commit_decided_from_a_stale_row_writes_nothing(backend, store, clock, first):
    """Two writers decide from the same row (v2, running): one commits, the other's write names a version
    that is gone and is refused whole, however little it would change. After a cancel request the row
    keeps its state and attempt: only the version tells the complete decided from v2 that it is stale."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    current = row(backend, job_id).job
    writes = {
        "request_cancel": decided(backend, job_id, lifecycle.cancel(current, clock.now)),
        "complete": decided(backend, job_id,
                            lifecycle.complete(current, lease.attempt, "w1", {"ok": 1}, clock.now),
                            claimed_at=lease.job.updated_at),
    }
    winner = writes.pop(first)
    (loser,) = writes.values()
    assert backend.recorder.commit(winner) is CommitOutcome.COMMITTED
    before = backend.snapshot()
    assert backend.recorder.commit(loser) is CommitOutcome.JOB_MOVED
    assert backend.recorder.commit(winner) is CommitOutcome.JOB_MOVED, "the same write twice"
    assert backend.snapshot() == before


def _stale_version(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    job_id = store.create("acme", ECHO).job.job_id
    write = claim_write(backend, job_id, clock.now)
    store.cancel(job_id, "acme")
    return write


def _cap_reached(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    store.register_tenant(Tenant("acme", TenantPolicy(cap=1)))
    store.create("acme", ECHO)
    second = store.create("acme", ECHO).job.job_id
    store.claim("w1", 30)
    if row(backend, second).job.state is not JobState.QUEUED:  # the claim took the other one
        second = next(job.job_id for job in store.all_jobs() if job.state is JobState.QUEUED)
    return claim_write(backend, second, clock.now, Admission(cap=1))


def _other_below_cap(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    for tenant_id in ("a", "b"):
        store.register_tenant(Tenant(tenant_id, TenantPolicy(cap=1)))
    store.create("b", ECHO)
    store.complete(store.claim("w1", 30))  # b's counter exists and is back to 0
    store.create("b", ECHO)
    waiting = store.create("a", ECHO).job.job_id
    return claim_write(backend, waiting, clock.now, Admission(cap=None, others_at_cap=(("b", 0, 1),)))


def _lifted_meanwhile(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    """Two claims serving a returning tenant with the same lift (issue 34: raised in the claim's transaction):
    the second meets the first's lift on the counter it charges."""
    first, second = (store.create("acme", ECHO).job.job_id for _ in range(2))
    assert backend.recorder.commit(claim_write(backend, first, clock.now, Admission(lift_vt=5_000))) \
        is CommitOutcome.COMMITTED
    assert store.tenant_states()["acme"].usage.lift_vt == 5_000
    return claim_write(backend, second, clock.now, Admission(lift_vt=5_000))


def _second_event_for_a_version(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    job_id = store.create("acme", ECHO).job.job_id
    store.claim("w1", 30)
    current = row(backend, job_id).job
    same_version = current.model_copy(update={"cancel_requested": True})  # a writer that invented v2 again
    return write_of(Change(Transition.REQUEST_CANCEL, current, same_version))


def _run_closed_twice(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    job_id = store.create("acme", ECHO).job.job_id
    first = store.claim("w1", 30)
    clock.advance(31)
    store.reap()
    second = store.claim("w1", 30)
    change = lifecycle.complete(row(backend, job_id).job, second.attempt, "w1", None, clock.now)
    assert isinstance(change, Change)
    reaped_run = RunClosure(first.attempt, RunOutcome.SUCCEEDED, clock.now)
    closes_the_reaped_one = dataclasses.replace(change, close_run=reaped_run)
    return write_of(closes_the_reaped_one, claimed_at=second.job.updated_at)


def _result_put_twice(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    """A second result on the run record the first completion closed (the result is on it: issue 34)."""
    job_id = store.create("acme", ECHO).job.job_id
    store.complete(store.claim("w1", 30), {"first": True})
    current = row(backend, job_id).job
    after = current.model_copy(update={"version": current.version + 1, "updated_at": clock.now})
    closes_it_again = RunClosure(current.attempt, RunOutcome.SUCCEEDED, clock.now)
    return write_of(Change(Transition.COMPLETE, current, after, close_run=closes_it_again, result={"second": True},
                           has_result=True))


def _result_without_its_run(backend: StoreBackend, store: JobStore, clock: Any) -> TransitionWrite:
    """A result and no run record to hold it: refused before anything is written, not dropped."""
    job_id = store.create("acme", ECHO).job.job_id
    current = row(backend, job_id).job
    after = current.model_copy(update={"version": current.version + 1, "updated_at": clock.now})
    return write_of(Change(Transition.COMPLETE, current, after, result={"lost": True}, has_result=True))


FAILING = {
    "the job row moved": (_stale_version, CommitOutcome.JOB_MOVED),
    "the cap was reached": (_cap_reached, CommitOutcome.CAP_REACHED),
    "a capped tenant came back below its cap": (_other_below_cap, CommitOutcome.OTHER_BELOW_CAP),
    "another claim lifted the tenant as high meanwhile": (_lifted_meanwhile, CommitOutcome.LIFTED),
    "a second event for a version": (_second_event_for_a_version, StoreInvariantViolation),
    "a run record closed twice": (_run_closed_twice, StoreInvariantViolation),
    "a result put twice": (_result_put_twice, StoreInvariantViolation),
    "a result with no run record to hold it": (_result_without_its_run, StoreInvariantViolation),
}


@pytest.mark.parametrize("failing", list(FAILING))
def test_any_failed_condition_writes_nothing_at_all(backend, store, clock, failing):
    """Job row, run record, result, RUNNING and WAITING counters, outbox: a write whose one condition fails
    changes none of them (invariant 5), and the recorder says which kind of failure it was (onward.store.ports
    .judge): a lost race, a refused Admission or flex, or a broken invariant."""
    build, expected = FAILING[failing]
    write = build(backend, store, clock)
    before = backend.snapshot()
    if isinstance(expected, CommitOutcome):
        assert backend.recorder.commit(write) is expected
    else:
        with pytest.raises(expected):
            backend.recorder.commit(write)
    assert backend.snapshot() == before


def test_a_reap_loses_to_a_lease_renewed_after_it_read_the_row(backend, store, clock):
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    clock.advance(31)
    reap = decided(backend, job_id, lifecycle.reap(row(backend, job_id).job, clock.now),
                   claimed_at=lease.job.updated_at)
    assert store.renew_lease(lease, 30).held
    before = backend.snapshot()
    assert backend.recorder.commit(reap) is CommitOutcome.JOB_MOVED
    assert backend.snapshot() == before


def test_a_flexing_claim_commits_while_the_others_are_at_their_caps(backend, store, clock):
    for tenant_id in ("a", "b"):
        store.register_tenant(Tenant(tenant_id, TenantPolicy(cap=1)))
        store.create(tenant_id, ECHO)
        store.create(tenant_id, ECHO)
    store.claim("w1", 30)
    store.claim("w2", 30)
    assert {t: s.usage.running for t, s in store.tenant_states().items()} == {"a": 1, "b": 1}
    waiting = next(job.job_id for job in store.all_jobs()
                   if job.tenant_id == "a" and job.state is JobState.QUEUED)
    write = claim_write(backend, waiting, clock.now, Admission(cap=None, others_at_cap=(("b", 0, 1),)))
    assert backend.recorder.commit(write) is CommitOutcome.COMMITTED
    assert store.tenant_states()["a"].usage.running == 2


def test_a_cap_holds_under_concurrent_claims(backend, store):
    """Eight workers (each its own JobStore, as separate processes) claim at once, all deciding from
    counters read before any of them claimed: `capped` (cap 2, weight 10) has nothing running there, so
    each one tries it first. The Admission's condition lets exactly two through, the others go on to
    `other`; every worker gets a job, and the counters match the rows. Without the condition `capped`
    would run eight."""
    store.register_tenant(Tenant("capped", TenantPolicy(weight=10, cap=2)))
    for _ in range(8):
        store.create("capped", ECHO)
    for _ in range(8):
        store.create("other", ECHO)
    stale = store.tenant_states()
    workers = [backend.store() for _ in range(8)]
    for worker in workers:
        # this worker's first read of the counters is the stale one (then its own): a scripted race
        worker._claimer._tenants = StaleFirstRead(backend.recorder, stale)  # type: ignore[attr-defined]
    start = threading.Barrier(len(workers))
    leases: list[Any] = []
    lock = threading.Lock()

    def claim(worker: JobStore, number: int) -> None:
        start.wait()
        lease = worker.claim(f"w{number}", 30)
        with lock:
            leases.append(lease)

    threads = [threading.Thread(target=claim, args=(worker, n)) for n, worker in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(leases) == 8 and all(lease is not None for lease in leases)
    running: dict[str, int] = {}
    for job in store.all_jobs():
        if job.state is JobState.RUNNING:
            running[job.tenant_id] = running.get(job.tenant_id, 0) + 1
    assert running == {"capped": 2, "other": 6}
    states = store.tenant_states()
    assert {t: s.usage.running for t, s in states.items()} == running
    assert {t: s.load().waiting for t, s in states.items()} == {"capped": 6, "other": 2}


class StaleFirstRead:
    """A recorder whose first `tenant_counters` answers from `stale` (read before anyone claimed)."""

    def __init__(self, recorder: Any, stale: dict[str, Any]) -> None:
        self._recorder, self._stale = recorder, stale

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)

    def tenant_counters(self, wanted: Any) -> dict[str, Any]:
        stale, self._stale = self._stale, None
        if stale is None:
            return self._recorder.tenant_counters(wanted)
        return {tenant.tenant_id: stale[tenant.tenant_id] for tenant in wanted}


# --- the dispatch items: active index, lifts, the clock -----------------------------------------------------

def test_the_active_index_orders_entries_by_key_and_a_claim_rekeys_the_served_one(backend, store):
    """Entries join at the key they are given (the system clock), the head is in key order, a claim moves
    the entry it served to the tenant's virtual time (never lower), and an entry with nothing waiting
    leaves the index only when it is really empty."""
    store.register_tenant(Tenant("acme", ready_shards=2))
    shards = {ready_shard(store.create("acme", ECHO).job.job_id, 2) for _ in range(4)}
    store.create("globex", ECHO)
    assert [(e.tenant_id, e.shard, e.active_vt) for e in backend.recorder.active_head(4)] == [
        *(("acme", shard, 0.0) for shard in sorted(shards)), ("globex", 0, 0.0)]
    assert backend.recorder.rekey("globex", 0, 5.0) and not backend.recorder.rekey("globex", 0, 4.0)
    assert backend.recorder.active_head(4)[-1] == ActiveEntry("globex", 0, 5.0)
    assert not backend.recorder.deactivate("globex", 0), "it holds a waiting job"
    store.cancel(next(job.job_id for job in store.all_jobs() if job.tenant_id == "globex"))
    assert backend.recorder.deactivate("globex", 0) and not backend.recorder.deactivate("globex", 0)
    assert {e.tenant_id for e in backend.recorder.active_head(4)} == {"acme"}
    assert not backend.recorder.rekey("globex", 0, 9.0), "not in the index: no key to raise"


def test_a_parked_entry_wakes_when_due_or_when_a_job_enters(backend, store, clock):
    store.create("acme", ECHO)
    entry = store.tenant_states()["acme"].queues[0]
    assert not backend.recorder.park("acme", 0, clock.now + 60_000, entry.entered - 1), "a job entered since"
    assert backend.recorder.park("acme", 0, clock.now + 60_000, entry.entered)
    assert backend.recorder.active_head(4) == []
    assert backend.recorder.parked_due(clock.now, 8) == []
    assert backend.recorder.parked_due(clock.now + 60_000, 8) == [("acme", 0)]
    assert backend.recorder.wake("acme", 0, 0) and not backend.recorder.wake("acme", 0, 0)
    assert [e.tenant_id for e in backend.recorder.active_head(4)] == ["acme"]
    assert backend.recorder.park("acme", 0, clock.now + 60_000, entry.entered)
    store.create("acme", ECHO)
    assert [e.tenant_id for e in backend.recorder.active_head(4)] == ["acme"], "a job entering wakes it"
    assert backend.recorder.parked_due(clock.now + 60_000, 8) == []


def test_lifts_and_the_clock_only_go_up(backend, store):
    store.create("acme", ECHO)
    assert backend.recorder.lift("acme", 5_000) and not backend.recorder.lift("acme", 4_000)
    assert store.tenant_states()["acme"].usage.lift_vt == 5_000
    assert backend.recorder.clock() == 0.0
    assert backend.recorder.advance_clock(1, 10.5) and backend.recorder.advance_clock(2, 7.0)
    assert not backend.recorder.advance_clock(1, 3.0)
    assert backend.recorder.clock() == 10.5


def test_tenant_counters_read_running_shards_and_the_named_queue_entries(backend, store):
    acme = Tenant("acme", TenantPolicy(cap=3), ready_shards=4)
    store.register_tenant(acme)
    for _ in range(12):
        store.create("acme", ECHO)
    leases = [store.claim(f"w{n}", 30) for n in range(3)]
    assert all(leases)
    state = backend.recorder.tenant_counters({acme: {0, 1}})["acme"]
    assert [u.running for u in state.running_by_shard] == [1, 1, 1, 0], "cap 3 over 4 running shards: 1/1/1/0"
    assert set(state.queues) <= {0, 1}
    assert backend.recorder.tenants(["acme", "nobody"]) == {"acme": acme}


# --- the indexes --------------------------------------------------------------------------------------------

def test_due_jobs_come_earliest_first_only_when_due_and_at_most_the_limit(backend, store, clock):
    start = clock.now
    created = []
    for _ in range(10):
        created.append(store.create("acme", ECHO).job.job_id)
        clock.advance(1)
    queue = ReadyQueue(0, 0)
    assert backend.recorder.due_jobs("acme", queue, start + 5_000, 100) == created[:6], "due at `now` is due"
    assert backend.recorder.due_jobs("acme", queue, start + 60_000, 8) == created[:8]
    assert backend.recorder.due_jobs("acme", queue, start - 1, 8) == []
    assert backend.recorder.due_jobs("globex", queue, start + 60_000, 8) == []


def test_jobs_due_in_the_same_millisecond_come_in_job_id_order(backend, store, clock):
    """The claim's due order (DueJob.rank) and explain's count of the jobs ahead rest on it: jobs due at the
    same time in the order of their rows' keys, however they were created, in every read of a page."""
    created = [store.create("acme", ECHO).job.job_id for _ in range(12)]
    queue = ReadyQueue(0, 0)
    assert backend.recorder.due_jobs("acme", queue, clock.now, 100) == sorted(created)
    assert backend.recorder.due_jobs("acme", queue, clock.now, 5) == sorted(created)[:5]


def test_a_job_leaves_the_ready_index_when_claimed_and_returns_at_its_retry_time(backend, store, clock):
    job_id = store.create("acme", ECHO).job.job_id
    report = store.fail(store.claim("w1", 30), ErrorSummary.of("E", "transient"))
    queue = ReadyQueue(0, 0)
    assert backend.recorder.due_jobs("acme", queue, clock.now, 8) == []
    assert backend.recorder.due_jobs("acme", queue, report.job.not_before, 8) == [job_id]


def test_ready_queues_are_per_priority_band_and_shard(backend, store, clock):
    """A claim reads the bands from the highest priority down; within a band, due time order."""
    store.register_tenant(Tenant("acme", ready_shards=3))
    low = store.create("acme", NewJob(type="demo.echo", priority=0)).job.job_id
    clock.advance(1)
    high = [store.create("acme", NewJob(type="demo.echo", priority=7)).job.job_id for _ in range(6)]
    state = store.tenant_states()["acme"]
    assert state.queues_with_work()[-1] == ReadyQueue(ready_shard(low, 3), 0)
    assert {queue.priority for queue in state.queues_with_work()[:-1]} == {7}
    listed = {queue: backend.recorder.due_jobs("acme", queue, clock.now, 100)
              for queue in state.queues_with_work()}
    assert sorted(job_id for ids in listed.values() for job_id in ids) == sorted([low, *high])
    for queue, job_ids in listed.items():
        assert all(ready_shard(job_id, 3) == queue.shard for job_id in job_ids)
        assert state.waiting_by_queue[queue] == len(job_ids)
    first, second = store.claim("w1", 30), store.claim("w2", 30)
    assert {first.job_id, second.job_id} <= set(high)


def test_expired_leases_are_listed_per_shard_earliest_first(backend, store, clock):
    for _ in range(8):
        store.create("acme", ECHO)
    start = clock.now
    leases = [store.claim(f"w{n}", 5 * (n + 1)) for n in range(8)]  # expiring at 5, 10, ... 40 s
    now = start + 20_000  # the leases of 5, 10 and 15 s have lapsed; 20 s lapses only after `now`
    by_shard = {shard: backend.recorder.expired_leases(shard, now, 100) for shard in range(LEASE_SHARDS)}
    assert sorted(job_id for ids in by_shard.values() for job_id in ids) == sorted(
        lease.job_id for lease in leases[:3])
    expiry = {lease.job_id: lease.lease_expires_at for lease in leases}
    for shard, job_ids in by_shard.items():
        assert [expiry[job_id] for job_id in job_ids] == sorted(expiry[job_id] for job_id in job_ids)
        assert all(lease_partition(job_id) == lease_shard_partition(shard) for job_id in job_ids)
    assert all(len(backend.recorder.expired_leases(shard, now, 1)) <= 1 for shard in range(LEASE_SHARDS))


# --- renewal and fencing ------------------------------------------------------------------------------------

def test_a_lease_is_renewed_only_for_its_attempt_and_owner(backend, store, clock):
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", 30)
    recorder = backend.recorder
    renewed = recorder.renew_lease(job_id, 1, "w1", clock.now + 60_000)
    assert (renewed.held, renewed.cancel_requested) == (True, False)
    assert renewed.lease_expires_at == clock.now + 60_000
    assert row(backend, job_id).job.lease_expires_at == clock.now + 60_000
    for attempt, worker in ((1, "w2"), (2, "w1"), (0, "w1")):
        assert not recorder.renew_lease(job_id, attempt, worker, clock.now + 90_000).held
    assert row(backend, job_id).job.lease_expires_at == clock.now + 60_000
    assert recorder.expired_leases(int(job_id[-8:], 16) % LEASE_SHARDS, clock.now + 59_000, 10) == []
    store.cancel(job_id, "acme")
    assert recorder.renew_lease(job_id, 1, "w1", clock.now + 30_000).cancel_requested
    store.acknowledge_cancel(lease)
    assert not recorder.renew_lease(job_id, 1, "w1", clock.now + 30_000).held


def run_expiry(backend: StoreBackend, job_id: str, attempt: int) -> int | None:
    """The stored `expires_at` of a run record (not part of the Run the recorder reads back)."""
    (item,) = [item for item in backend.jobs_table() if (item["pk"], item["sk"]) == run_key(job_id, attempt)]
    return item.get("expires_at")


def test_a_late_report_is_marked_only_on_a_run_left_open_or_closed_by_the_reaper(backend, store, clock):
    """The mark also gives a run left open its TTL; a run the reaper closed keeps the one stamped then (it
    must not outlive its ended job's row)."""
    recorder = backend.recorder
    ttl = clock.now // 1000 + JOB_RETENTION_S
    job_id = store.create("acme", ECHO).job.job_id
    store.claim("w1", 300)  # held on past the reap below
    assert not recorder.mark_fenced(job_id, 1, "w1", RunOutcome.SUCCEEDED, clock.now, expires_at=ttl), \
        "a running attempt's run is its row's (issue 34): no record to mark, and no zombie's report meets one"
    backend.open_run_the_old_way(job_id)  # a record left open: the release before issue 34's claim put it
    assert not recorder.mark_fenced(job_id, 1, "w2", RunOutcome.SUCCEEDED, clock.now, expires_at=ttl), \
        "another worker's run"
    assert not recorder.mark_fenced(job_id, 2, "w1", RunOutcome.SUCCEEDED, clock.now, expires_at=ttl), "no such run"
    assert run_expiry(backend, job_id, 1) is None, "a running attempt never expires"
    assert recorder.mark_fenced(job_id, 1, "w1", RunOutcome.FAILED, clock.now + 1, expires_at=ttl)
    (run,) = recorder.runs(job_id)
    assert (run.outcome, run.reclaimed_as, run.late_report, run.late_report_at) == (
        RunOutcome.FENCED, None, RunOutcome.FAILED, clock.now + 1)
    assert run_expiry(backend, job_id, 1) == ttl
    assert not recorder.mark_fenced(job_id, 1, "w1", RunOutcome.SUCCEEDED, clock.now, expires_at=ttl), \
        "already fenced"

    other = store.create("acme", ECHO).job.job_id
    zombie = store.claim("w3", 30)
    assert zombie.job_id == other
    clock.advance(31)
    store.reap()
    reaped_ttl = clock.now // 1000 + JOB_RETENTION_S
    assert run_expiry(backend, other, 1) == reaped_ttl
    assert recorder.mark_fenced(other, 1, "w3", RunOutcome.SUCCEEDED, clock.now + 5_000, expires_at=reaped_ttl + 5)
    assert recorder.run(other, 1).reclaimed_as is RunOutcome.LEASE_EXPIRED
    assert run_expiry(backend, other, 1) == reaped_ttl, "the reap's TTL stays"
    store.cancel(other, "acme")

    third = store.create("acme", ECHO).job.job_id
    store.complete(store.claim("w4", 30), "done")
    before = recorder.run(third, 1)
    assert not recorder.mark_fenced(third, 1, "w4", RunOutcome.FAILED, clock.now, expires_at=ttl), \
        "its own outcome stays"
    assert recorder.run(third, 1) == before


# --- the reaper ---------------------------------------------------------------------------------------------

def test_the_reaper_takes_back_only_lapsed_leases(backend, store, clock):
    lapsing = store.create("acme", ECHO).job.job_id
    store.claim("w1", 5)
    renewed = store.create("acme", ECHO).job.job_id
    kept = store.claim("w2", 5)
    clock.advance(4)
    store.renew_lease(kept, 30)
    clock.advance(2)
    (moved,) = store.reap()
    assert (moved.job_id, moved.state, moved.version) == (lapsing, JobState.QUEUED, 3)
    assert [run.outcome for run in backend.recorder.runs(lapsing)] == [RunOutcome.LEASE_EXPIRED]
    assert row(backend, renewed).job.state is JobState.RUNNING
    assert store.tenant_states()["acme"].usage == Usage(1, 6_000, kept.job.updated_at, ended=1)
    assert store.reap() == []


# --- tenants ------------------------------------------------------------------------------------------------

def test_a_tenant_is_put_only_if_new_when_asked(backend):
    recorder = backend.recorder
    acme = Tenant("acme", TenantPolicy(weight=2, cap=3), ready_shards=2)
    assert recorder.put_tenant(acme, only_if_new=True)
    assert not recorder.put_tenant(Tenant("acme"), only_if_new=True)
    assert recorder.tenant_states()["acme"].tenant == acme
    assert recorder.put_tenant(Tenant("acme", TenantPolicy(weight=0.5)))
    assert recorder.tenant_states()["acme"].tenant == Tenant("acme", TenantPolicy(weight=0.5, cap=None))

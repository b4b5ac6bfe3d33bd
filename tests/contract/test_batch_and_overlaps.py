"""Batch creates and overlap marks, ONE suite on both recorders (in memory, and DynamoDB on the embedded
endpoint) through the `store_backend` fixture, as tests/contract/test_recorder_contract.py.

What a recorder must honour: `create_many` writes every job of one transaction or none, its jobs' counts
summed into one update per queue entry (DynamoDB refuses two actions on one item: the DynamoDB run proves the
sum is one action), KEY_USED naming each write whose key is taken; the marks of a run (a late report with
its overlaps, a refused renewal, an overlap) on their conditions, attempts added as a set, the `overlaps`
index keyed by the first. And what JobStore makes of them: `create_batch` answering each entry as `create`
alone would, in order, in few transactions; a zombie's evidence marking both runs of an overlap, listed by
`onward overlaps`' reader, and nothing marked when the records show no overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.errors import (
    IdempotencyConflict,
    InvalidRequest,
    PayloadTooLarge,
    StoreContention,
    StoreInvariantViolation,
)
from onward.domain.models import NewJob
from onward.domain.states import JobState, RunOutcome
from onward.operator.overlaps import OverlapReader
from onward.store.dynamo.keys import Entity, overlap_partition, run_key
from onward.store.dynamo.transaction_limits import transaction_cuts
from onward.store.ports import CreateOutcome, ManyCreated, NewJobWrite, OverlapMark, Tenant
from onward.store.ports.ready_queues import ReadyQueue, ready_shard
from onward.store.reads import StoreReads
from onward.store.service import MAX_PARAMS_BYTES, Created, JobStore, ReportStatus
from tests.contract.backends import StoreBackend
from tests.contract.test_recorder_contract import ECHO, JOB_RETENTION_S, RETENTION_S

LEASE_S = 30


def new_job(job_id: str, clock: Any, *, tenant: str = "acme", shards: int = 1, priority: int = 0,
            key: str | None = None) -> NewJobWrite:
    change = lifecycle.create(job_id, tenant, NewJob(type="demo.echo", priority=priority), clock.now)
    return NewJobWrite.of(change, ready_shards=shards, retention_s=RETENTION_S, job_retention_s=JOB_RETENTION_S,
                          idempotency=None if key is None else (key, f"digest-{key}"), clock=0.0)


def queue_entries(backend: StoreBackend) -> dict[int, dict[str, Any]]:
    return {item["shard"]: item for item in backend.jobs_table() if item.get("entity") == Entity.TENANT_QUEUE}


class CountingCreates:
    """A recorder whose create_many calls are counted (and, with `conflicts`, answered CONFLICT that many
    times first, nothing written: what DynamoDB answers when a transaction meets another on an item)."""

    def __init__(self, recorder: Any, conflicts: int = 0) -> None:
        self._recorder = recorder
        self.conflicts = conflicts
        self.transactions: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)

    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        self.transactions.append(len(writes))
        if self.conflicts:
            self.conflicts -= 1
            return ManyCreated(CreateOutcome.CONFLICT)
        return self._recorder.create_many(writes)


# --- the recorder's create_many -----------------------------------------------------------------------------

def test_create_many_writes_every_job_and_one_summed_update_per_queue_entry(backend, clock):
    """Twelve jobs over two ready shards and two priority bands, in one transaction: every row and first
    event, each entry's band counts, total and `entered` summed, both entries in the `active` index. On
    DynamoDB the transaction names each entry once (two updates of one item are refused), so a sum that
    came out per job would fail there; a sum that lost a band or a job would fail on both."""
    backend.recorder.put_tenant(Tenant("acme", ready_shards=2))
    writes = [new_job(f"{n:02d}" + "a" * 30, clock, shards=2, priority=n % 2 * 5) for n in range(12)]
    assert backend.recorder.create_many(writes) == ManyCreated(CreateOutcome.CREATED)
    for write in writes:
        job_id = write.change.after.job_id
        assert backend.recorder.job(job_id).job == write.change.after
        assert [event.version for event in backend.recorder.events(job_id)] == [1]
    expected: dict[ReadyQueue, int] = {}
    for write in writes:
        queue = ReadyQueue(ready_shard(write.change.after.job_id, 2), write.change.after.priority)
        expected[queue] = expected.get(queue, 0) + 1
    state = backend.recorder.tenant_counters({Tenant("acme", ready_shards=2): None})["acme"]
    assert state.waiting_by_queue == expected
    entries = queue_entries(backend)
    for shard, entry in entries.items():
        jobs_there = sum(count for queue, count in expected.items() if queue.shard == shard)
        assert (entry["waiting"], entry["entered"]) == (jobs_there, jobs_there)
    assert {(e.tenant_id, e.shard) for e in backend.recorder.active_head(8)} == {("acme", s) for s in entries}


def test_create_many_with_keys_in_use_writes_nothing_and_names_each_one(backend, store, clock):
    """Two of three keys are taken: nothing at all is written (not even the third job) and both are named by
    their position, so the store can answer them and write the rest. Would catch a recorder reporting only
    the first failed key (the store would need a transaction per taken key) or one writing the free one."""
    store.create("acme", ECHO, idempotency_key="k1")
    store.create("acme", ECHO, idempotency_key="k2")
    before = backend.snapshot()
    writes = [new_job("b" * 32, clock, key="k0"), new_job("c" * 32, clock, key="k1"),
              new_job("d" * 32, clock, key="k2")]
    assert backend.recorder.create_many(writes) == ManyCreated(CreateOutcome.KEY_USED, frozenset({1, 2}))
    assert backend.snapshot() == before


def test_create_many_refuses_what_one_transaction_cannot_hold(backend, clock):
    """34 jobs with keys are 103 actions: refused before anything is sent (DynamoDB would refuse it whole),
    and transaction_cuts cuts them 33 + 1; one key twice (two puts of one item) is refused too. Would catch
    cuts that overflow a transaction (every batch of 34 would fail on AWS) or a recorder that lets memory
    accept what DynamoDB refuses."""
    writes = [new_job(f"{n:02d}" + "e" * 30, clock, key=f"k{n}") for n in range(34)]
    before = backend.snapshot()
    with pytest.raises(StoreInvariantViolation):
        backend.recorder.create_many(writes)
    with pytest.raises(StoreInvariantViolation):
        backend.recorder.create_many([new_job("f" * 32, clock, key="same"), new_job("0" * 32, clock, key="same")])
    assert backend.snapshot() == before
    assert [len(cut) for cut in transaction_cuts(writes)] == [33, 1]
    assert [len(cut) for cut in transaction_cuts([new_job(f"{n:03d}" + "1" * 29, clock) for n in range(100)])] == [
        49, 49, 2]
    big = NewJob(type="demo.echo", params={"blob": "x" * 290_000})
    heavy = [NewJobWrite.of(lifecycle.create(f"{n:02d}" + "2" * 30, "acme", big, clock.now), ready_shards=1,
                            retention_s=RETENTION_S, job_retention_s=JOB_RETENTION_S) for n in range(30)]
    assert [len(cut) for cut in transaction_cuts(heavy)] == [13, 13, 4], "4 MB of items per transaction"
    with pytest.raises(StoreInvariantViolation):  # 30 jobs of 290 KB: over 4 MB on either backend
        backend.recorder.create_many(heavy)
    assert backend.snapshot() == before


# --- JobStore.create_batch ----------------------------------------------------------------------------------

def test_a_batch_answers_each_entry_as_create_alone_would_in_order(backend, store):
    """Valid entries, malformed ones, keys used before the batch (same and other request) and keys repeated
    inside it (same and other request): each entry gets, in its place, what `create` alone would have given
    it in that order, and a refused entry refuses nothing else. Would catch answers out of order, a refusal
    failing the batch, a key repeated in the batch putting one item twice (refused whole on DynamoDB), or a
    repeat answered created instead of the first entry's job."""
    earlier = store.create("acme", ECHO, idempotency_key="old").job
    other = NewJob(type="demo.echo", params={"n": 2})
    entries: list[tuple[NewJob, str | None]] = [
        (ECHO, None),
        (ECHO, "a"),
        (NewJob(type="demo.echo", params={"blob": "x" * (MAX_PARAMS_BYTES + 1)}), "big"),
        (ECHO, ""),
        (ECHO, "old"),
        (other, "old"),
        (ECHO, "a"),
        (other, "a"),
        (NewJob(type="demo.echo", priority=9), "p9"),
    ]
    answers = store.create_batch("acme", entries)
    assert len(answers) == len(entries)
    created, keyed, too_big, bad_key, same_old, other_old, same_a, other_a, high = answers
    assert isinstance(created, Created) and created.created and created.job.state is JobState.QUEUED
    assert isinstance(keyed, Created) and keyed.created
    assert isinstance(too_big, PayloadTooLarge)
    assert isinstance(bad_key, InvalidRequest)
    assert same_old == Created(earlier, created=False)
    assert isinstance(other_old, IdempotencyConflict) and other_old.job_id == earlier.job_id
    assert same_a == Created(keyed.job, created=False)
    assert isinstance(other_a, IdempotencyConflict) and other_a.job_id == keyed.job.job_id
    assert isinstance(high, Created) and high.job.priority == 9
    for answer in (created, keyed, high):
        assert store.get(answer.job.job_id) == answer.job
    assert backend.recorder.idempotency("acme", "a").job_id == keyed.job.job_id
    assert store.tenant_states()["acme"].load().waiting == 4, "the earlier job and the three created"


def test_a_batch_of_100_takes_four_transactions_and_its_repeat_writes_nothing(backend, clock):
    """100 jobs with keys: 4 transactions (33 + 33 + 33 + 1: three puts each and their queue entry's one
    update), every job created, queued and counted once; the same batch again (a client retrying a lost
    answer) answers every job created False, in order, and writes nothing, each transaction refused once
    with every key it holds named. Would catch a transaction per job, a queue entry counted once per
    transaction instead of once per job, or a retry creating twins."""
    counting = CountingCreates(backend.recorder)
    store = backend.store(recorder=counting)
    entries: list[tuple[NewJob, str | None]] = [(NewJob(type="demo.echo", params={"n": n}), f"order-{n}")
                                                for n in range(100)]
    answers = store.create_batch("acme", entries)
    assert counting.transactions == [33, 33, 33, 1]
    assert all(isinstance(answer, Created) and answer.created for answer in answers)
    jobs = [answer.job for answer in answers if isinstance(answer, Created)]
    assert [job.params["n"] for job in jobs] == list(range(100))
    assert len({job.job_id for job in jobs}) == 100
    entry = queue_entries(backend)[0]
    assert (entry["waiting"], entry["entered"], entry["w0"]) == (100, 100, 100)
    assert len(backend.outbox_table()) == 100

    before = backend.snapshot()
    counting.transactions.clear()
    again = store.create_batch("acme", entries)
    assert again == [Created(job, created=False) for job in jobs]
    assert backend.snapshot() == before
    assert counting.transactions == [33, 33, 33, 1], "each refusal names every key in use at once"


def test_a_key_in_use_refuses_only_its_own_entry_and_the_rest_are_written_again(backend, store):
    """One entry's key was used before: its transaction is refused (nothing written), that entry is
    answered as `create` answers it, and the transaction is sent again without it: 2 transactions for the
    chunk, every other job created. Would catch the other jobs of the refused transaction being answered
    with the key's refusal (or never written)."""
    earlier = store.create("acme", ECHO, idempotency_key="k5").job
    counting = CountingCreates(backend.recorder)
    batch_store = backend.store(recorder=counting)
    entries: list[tuple[NewJob, str | None]] = [(ECHO, f"k{n}") for n in range(10)]
    answers = batch_store.create_batch("acme", entries)
    assert counting.transactions == [10, 9]
    assert answers[5] == Created(earlier, created=False)
    assert all(isinstance(a, Created) and a.created for n, a in enumerate(answers) if n != 5)
    assert store.tenant_states()["acme"].load().waiting == 10


def test_a_transaction_that_keeps_conflicting_answers_store_contention_for_its_entries_only(backend, clock):
    """A transaction meeting a concurrent one is sent again as it is; once past the store's tries its
    entries (and no others) are answered StoreContention, nothing of them written. Would catch a conflict
    failing the whole batch or being given up at once."""
    counting = CountingCreates(backend.recorder, conflicts=2)
    answers = backend.store(recorder=counting).create_batch("acme", [(ECHO, None), (ECHO, "")])
    assert counting.transactions == [1, 1, 1] and isinstance(answers[0], Created)
    assert isinstance(answers[1], InvalidRequest)

    counting = CountingCreates(backend.recorder, conflicts=1000)
    before = backend.snapshot()
    answers = backend.store(recorder=counting).create_batch("acme", [(ECHO, None), (ECHO, ""), (ECHO, "k")])
    assert [type(answer) for answer in answers] == [StoreContention, InvalidRequest, StoreContention]
    assert backend.snapshot() == before


def test_a_batch_is_refused_whole_only_for_what_is_wrong_with_all_of_it(backend, store):
    """More than 100 entries, or a tenant id that is none: InvalidRequest, nothing written; an empty batch
    answers nothing. Would catch a batch past DynamoDB's request sizes being half written."""
    before = backend.snapshot()
    with pytest.raises(InvalidRequest):
        store.create_batch("acme", [(ECHO, None)] * 101)
    with pytest.raises(InvalidRequest):
        store.create_batch("not a tenant", [(ECHO, None)])
    assert store.create_batch("acme", []) == []
    assert backend.snapshot() == before


# --- overlaps -------------------------------------------------------------------------------------------------

def reaped_zombie(store: JobStore, clock: Any) -> tuple[Any, str]:
    """A job whose attempt 1 (worker w1) lost its lease and was reaped: (its lease, the job id)."""
    job_id = store.create("acme", ECHO).job.job_id
    zombie = store.claim("w1", LEASE_S)
    assert zombie is not None and zombie.job_id == job_id
    clock.advance(LEASE_S + 1)
    assert [job.job_id for job in store.reap()] == [job_id]
    return zombie, job_id


def test_a_zombie_reporting_after_its_successor_claimed_is_marked_on_both_runs_and_listed(backend, store, clock):
    """Attempt 1 is reaped, attempt 2 claimed, and attempt 1's worker completes 5 s later: fenced, and both
    runs say they overlapped (1 with 2, 2 with 1), the pair is counted once, and the `overlaps` index lists
    the job from when attempt 2 began, with its tenant, type and both runs. Would catch the overlap not being
    decided at the late report, only the zombie's run being marked, or the index not being written."""
    zombie, job_id = reaped_zombie(store, clock)
    successor = store.claim("w2", LEASE_S)
    assert successor is not None and successor.attempt == 2
    began = clock.now
    clock.advance(5)
    assert store.complete(zombie, {"late": True}).status is ReportStatus.FENCED
    first, second = store.runs(job_id)
    assert (first.outcome, first.late_report_at, first.overlapped_with) == (RunOutcome.FENCED, clock.now, [2])
    assert (second.outcome, second.overlapped_with) == (None, [1])
    assert store.stats.overlaps_found() == 1
    assert store.complete(successor, {"ok": True}).status is ReportStatus.APPLIED
    assert store.runs(job_id)[1].overlapped_with == [1], "the successor's own end keeps the mark"

    index = backend.overlap_index()
    assert index.overlapping_jobs(began, clock.now) == [job_id]
    assert index.overlapping_jobs(began + 1, clock.now) == [], "keyed by when the overlap began"
    (listed,) = OverlapReader(index, store, StoreReads(store), clock).since(began - 86_400_000)
    assert (listed.job_id, listed.tenant_id, listed.type) == (job_id, "acme", "demo.echo")
    assert [run.attempt for run in listed.runs] == [1, 2]
    (item,) = [i for i in backend.jobs_table() if (i["pk"], i["sk"]) == run_key(job_id, 1)]
    assert (item["overlap_pk"], item["overlap_at"]) == (overlap_partition(began), began)


def test_a_zombie_reporting_before_its_successor_claimed_overlapped_nothing(backend, store, clock):
    """Reaped, then its worker reports (fenced), and only after that does attempt 2 start: no run says it
    overlapped, nothing is counted or indexed, not even once attempt 2 has ended. Would catch an overlap
    decided from the reap (every reaped job would be listed) or from the zombie's run alone."""
    zombie, job_id = reaped_zombie(store, clock)
    clock.advance(1)
    assert store.release(zombie).status is ReportStatus.FENCED
    clock.advance(1)
    successor = store.claim("w2", LEASE_S)
    assert successor is not None and successor.attempt == 2
    clock.advance(1)
    store.complete(successor, None)
    assert [run.overlapped_with for run in store.runs(job_id)] == [[], []]
    assert store.runs(job_id)[0].outcome is RunOutcome.FENCED
    assert store.stats.overlaps_found() == 0
    assert backend.overlap_index().overlapping_jobs(0, clock.now) == []
    assert not any("overlap_pk" in item for item in backend.jobs_table())


def test_a_refused_renewal_after_the_successor_claimed_marks_the_overlap_once(backend, store, clock):
    """The zombie's heartbeat is refused 3 s into attempt 2: its run records when (`lease_lost_at`) and the
    overlap with 2, on both runs; its release afterwards is fenced and finds the same pair, counted once.
    Would catch a refused renewal being ignored (a zombie that dies before reporting would show nothing) or
    the pair counted at each piece of evidence."""
    zombie, job_id = reaped_zombie(store, clock)
    assert store.claim("w2", LEASE_S) is not None
    clock.advance(3)
    assert not store.renew_lease(zombie, LEASE_S).held
    first, second = store.runs(job_id)
    assert (first.outcome, first.lease_lost_at, first.overlapped_with) == (
        RunOutcome.LEASE_EXPIRED, clock.now, [2])
    assert second.overlapped_with == [1]
    clock.advance(1)
    assert store.release(zombie).status is ReportStatus.FENCED
    assert store.runs(job_id)[0].overlapped_with == [2]
    assert store.stats.overlaps_found() == 1
    assert not store.renew_lease(zombie, LEASE_S).held, "a second refusal marks nothing more"
    assert store.runs(job_id)[0].lease_lost_at == first.lease_lost_at


def test_a_renewal_refused_after_the_workers_own_report_marks_nothing(backend, store, clock):
    """A renewal racing its own attempt's completion is refused (the attempt ended), but the run is the
    worker's own outcome, not a zombie's: nothing is marked. Would catch every such race counted as lost."""
    job_id = store.create("acme", ECHO).job.job_id
    lease = store.claim("w1", LEASE_S)
    store.complete(lease, None)
    before = store.runs(job_id)
    assert not store.renew_lease(lease, LEASE_S).held
    assert store.runs(job_id) == before and before[0].lease_lost_at is None


def test_run_marks_hold_their_conditions_and_add_attempts_as_a_set(backend, store, clock):
    """mark_overlap needs the run to exist; attempts are added once each, whatever the order of the marks;
    the index keeps the first mark's key. mark_lease_lost needs the worker's run closed by the reaper (or
    fenced) and marks it once. Would catch a mark creating a phantom run, a list with duplicates, or a
    later mark moving the run in the index."""
    recorder = backend.recorder
    _, job_id = reaped_zombie(store, clock)
    at = clock.now
    assert not recorder.mark_overlap(job_id, 7, OverlapMark((1,), at))
    assert recorder.mark_overlap(job_id, 1, OverlapMark((3, 2), at))
    assert recorder.mark_overlap(job_id, 1, OverlapMark((2, 4), at + 5_000))
    assert recorder.run(job_id, 1).overlapped_with == [2, 3, 4]
    assert backend.overlap_index().overlapping_jobs(at, at) == [job_id]
    assert backend.overlap_index().overlapping_jobs(at + 1, at + 10_000) == []
    assert not recorder.mark_lease_lost(job_id, 1, "w9", at), "another worker's run"
    assert recorder.mark_lease_lost(job_id, 1, "w1", at + 1)
    assert not recorder.mark_lease_lost(job_id, 1, "w1", at + 2), "once"
    assert recorder.run(job_id, 1).lease_lost_at == at + 1
    running = store.claim("w2", LEASE_S)
    assert not recorder.mark_lease_lost(job_id, running.attempt, "w2", at), "an open run is no zombie's"
    assert recorder.mark_fenced(job_id, 1, "w1", RunOutcome.SUCCEEDED, at + 3, expires_at=1,
                                overlap=OverlapMark((running.attempt,), at + 2))
    assert recorder.run(job_id, 1).overlapped_with == [2, 3, 4]

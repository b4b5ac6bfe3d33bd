"""The claims of one process share what they read (onward.store.claims: `_SharedDueHeads`, `_SharedCounters`).

- A ready queue's head read by one claim serves the process's other claims for DUE_HEAD_SHARE_MS, each of
  its jobs handed to one claim at a time; a job another process took fails the transaction's condition and
  the claim goes on to the next; a head that ran out is read again, by one claim while the others wait.
- Tenant counters read by one claim serve the others for COUNTERS_SHARE_MS with the process's own writes
  counted in (`counted_write`), so its claims spread over tenants and shards as fresh counters would have.
- What is shared only chooses what to try: no claim says "nothing due" or parks from a shared read, a flex
  is decided from counters the claim read itself, and a refusal drops the counters that showed room.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

import pytest

from onward.domain.clock import EpochMs
from onward.domain.dispatch import TenantPolicy
from onward.domain.models import ErrorSummary, Lease, NewJob
from onward.domain.states import JobState
from onward.store.claim_order import CONTENDED_MS, SPREAD_MS, ClaimOrder
from onward.store.claims import HEAD_CACHE_MS, WAKE_PER_SHARD
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import ActiveEntry, CommitOutcome, DueJob, Tenant, TenantState, TransitionWrite
from onward.store.ports.index_shards import PARKED_SHARDS
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.service import JobStore
from onward.store.shared_claim_reads import COUNTERS_SHARE_MS, DUE_HEAD_SHARE_MS, counted_write
from tests.support import ManualClock

ECHO = NewJob(type="demo.echo")
T = TypeVar("T")


class CountingRecorder(MemoryRecorder):
    """The memory recorder, counting the reads claims make and the transactions they try (per job and by
    outcome); `slow_s` delays chosen reads' answers that long (real time) after they were served, as a
    request's answer comes back."""

    def __init__(self, slow_s: Mapping[str, float] | None = None) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.outcomes: Counter[CommitOutcome] = Counter()
        self.tried: Counter[str] = Counter()
        self.slow_s = dict(slow_s or {})
        self._counting = threading.Lock()

    def _count(self, name: str) -> None:
        with self._counting:
            self.calls[name] += 1

    def _answer(self, name: str, answer: T) -> T:
        self._count(name)
        time.sleep(self.slow_s.get(name, 0.0))
        return answer

    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        return self._answer("active_head", super().active_head(limit_per_shard))

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        return self._answer("due", super().due(tenant_id, queue, now, limit))

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        return self._answer("tenant_counters", super().tenant_counters(wanted, consistent=consistent))

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        self._count("park")
        return super().park(tenant_id, shard, until, entered)

    def lift(self, tenant_id: str, lift_vt: int) -> bool:
        self._count("lift")
        return super().lift(tenant_id, lift_vt)

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        self._count("deactivate")
        return super().deactivate(tenant_id, shard)

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        outcome = super().commit(write)
        with self._counting:
            self.outcomes[outcome] += 1
            self.tried[write.change.after.job_id] += 1
            if write.running is not None and write.running.lift_vt is not None:
                self.calls["claim with a lift"] += 1
        return outcome


def _store(recorder: MemoryRecorder, clock: ManualClock, seed: int = 7) -> JobStore:
    return JobStore.in_memory(clock=clock, recorder=recorder, rng=random.Random(seed))


def _claims(store: JobStore, count: int) -> list[Lease]:
    leases = [store.claim(f"w{number}", 30) for number in range(count)]
    assert all(lease is not None for lease in leases)
    return [lease for lease in leases if lease is not None]


def _answer_next_counters_read_from(recorder: MemoryRecorder, stale: dict[str, TenantState]) -> None:
    """The recorder's next read of tenant counters answers from `stale` (read before other writes), as a read
    that crossed them would; the later reads as usual."""
    counters = recorder.tenant_counters
    reads = iter([stale])

    def stale_first(wanted: Mapping[Tenant, Collection[int] | None]) -> dict[str, TenantState]:
        read = next(reads, None)
        return {tenant.tenant_id: read[tenant.tenant_id] for tenant in wanted} if read else counters(wanted)

    recorder.tenant_counters = stale_first  # type: ignore[method-assign]


def _sleeper_returns(api: JobStore, worker: JobStore, clock: ManualClock) -> None:
    """`bulk` runs two jobs on `worker` for 100 s, then `sleeper` returns with 3 jobs (lifted to the clock,
    200,000 virtual ms, by the claim that serves it)."""
    for _ in range(5):
        api.create("bulk", ECHO)
    _claims(worker, 2)
    clock.advance(100)
    for _ in range(3):
        api.create("sleeper", ECHO)

def _at_once(claim: Callable[[int], None], threads: int) -> None:
    """`claim(n)` in `threads` threads started together."""
    start = threading.Barrier(threads)

    def run(number: int) -> None:
        start.wait()
        claim(number)

    running = [threading.Thread(target=run, args=(number,)) for number in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=30)


# --- a queue's head, shared ---------------------------------------------------------------------------------

def test_a_queues_head_read_by_one_claim_serves_the_next_claims_each_job_once() -> None:
    """Eight claims within DUE_HEAD_SHARE_MS of one read of the queue's head (eight jobs): one Query of the
    ready index and one counters read for all of them, eight different jobs, no refused transaction. Without
    the shared head each claim reads the queue (8 reads); without the hand-out taking a job out of the head,
    a claim would try a job an earlier one took (a refused transaction and a row read)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    created = {store.create("acme", ECHO).job.job_id for _ in range(8)}
    leases = _claims(store, 8)
    assert {lease.job_id for lease in leases} == created
    assert (recorder.calls["due"], recorder.calls["tenant_counters"]) == (1, 1)
    assert set(recorder.outcomes) == {CommitOutcome.COMMITTED}


def test_a_shared_head_older_than_its_share_time_is_read_again() -> None:
    """A claim DUE_HEAD_SHARE_MS after the read does not trust the shared head (other processes' claims,
    a higher band's new jobs): it reads the queue again. Without the age limit it would take its job from
    the old read (1 Query, not 2)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    for _ in range(4):
        store.create("acme", ECHO)
    _claims(store, 1)
    clock.now += max(DUE_HEAD_SHARE_MS, COUNTERS_SHARE_MS, HEAD_CACHE_MS)
    _claims(store, 1)
    assert recorder.calls["due"] == 2


def test_a_job_another_process_took_is_refused_and_the_claim_goes_on_to_a_fresh_read() -> None:
    """Process A's shared head shows seven jobs process B took since; a later job (more than SPREAD_MS
    younger, so B takes it last) is due but was beyond A's read. A's claim tries the seven (each refused by
    its transaction's condition on the row), finds its shared head run out, reads the queue once and takes
    the later job: no counters read, one Query. Without the read after the shared head ran out, the claim
    would first say nothing is due in that queue and read the counters again to find out."""
    clock, recorder = ManualClock(), CountingRecorder()
    first, other = _store(recorder, clock, seed=1), _store(recorder, clock, seed=2)
    burst = {first.create("acme", ECHO).job.job_id for _ in range(8)}
    clock.advance(SPREAD_MS / 1000 + 0.5)
    later = first.create("acme", ECHO).job.job_id
    (taken,) = _claims(first, 1)  # reads the burst (8: the ready index's page), takes one
    assert taken.job_id in burst
    assert {lease.job_id for lease in _claims(other, 7)} == burst - {taken.job_id}
    recorder.calls.clear()
    recorder.outcomes.clear()
    (lease,) = _claims(first, 1)
    assert lease.job_id == later
    assert recorder.outcomes == {CommitOutcome.JOB_MOVED: 7, CommitOutcome.COMMITTED: 1}
    assert (recorder.calls["due"], recorder.calls["tenant_counters"]) == (1, 0)


@pytest.mark.parametrize("answer_s", [0.0, 0.03])
def test_threads_of_a_process_never_try_the_same_job(answer_s: float) -> None:
    """Eight threads of one process claim four times each, together, from a queue of 32 jobs: every job is
    tried once. Transactions (and the ready index's answers, `answer_s`) are held up a little (real time),
    as requests are, so heads run out and are read again while other threads hold jobs or take them:
    without the hand-out, threads would try the same jobs of one head; without a new read hiding the jobs
    other threads hold (answer_s 0), or took while it was under way (0.03 s), they would be handed out
    again (tried twice, refused)."""
    clock, recorder = ManualClock(), CountingRecorder(slow_s={"due": answer_s})
    store = _store(recorder, clock)
    for _ in range(32):
        store.create("acme", ECHO)
    commit = recorder.commit

    def slow_commit(write: TransitionWrite) -> CommitOutcome:
        time.sleep(random.Random(write.change.after.job_id).uniform(0.005, 0.04))  # (threads out of step)
        return commit(write)

    recorder.commit = slow_commit  # type: ignore[method-assign]
    leases: list[Lease | None] = []
    _at_once(lambda number: leases.extend(store.claim(f"w{number}", 30) for _ in range(4)), 8)
    assert len(leases) == 32 and all(lease is not None for lease in leases)
    assert recorder.calls["due"] >= 3  # (heads were read again while jobs were held)
    assert set(recorder.tried.values()) == {1}, recorder.tried
    assert set(recorder.outcomes) == {CommitOutcome.COMMITTED}


def test_a_head_run_out_is_read_by_one_claim_while_the_others_wait_for_that_read() -> None:
    """Four threads claim together while each read of the ready index takes 0.2 s: one reads the queue's
    head, the others wait for that read and take its jobs. Without the wait each one sends the same read
    (4 Queries, not 1)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    for _ in range(8):
        store.create("acme", ECHO)
    assert store.claim("w", 30) is not None  # the head of `active` and the counters, shared
    clock.now += DUE_HEAD_SHARE_MS  # the queue's shared head too old: read it again
    recorder.calls.clear()
    recorder.slow_s = {"due": 0.2}
    leases: list[Lease | None] = []
    _at_once(lambda number: leases.append(store.claim(f"w{number}", 30)), 4)
    assert all(lease is not None for lease in leases)
    assert recorder.calls["due"] == 1


def test_the_active_head_and_counters_past_their_time_are_read_by_one_claim_while_the_others_use_them() -> None:
    """Four threads claim together after the cached `active` head and the shared counters aged past their
    time, each read taking 0.2 s: one claim reads each again, the others use them as they were meanwhile.
    Without that, each thread sends the head's Queries (a Query per partition) and the counters' read."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    for _ in range(16):
        store.create("acme", ECHO)
    assert store.claim("w", 30) is not None
    clock.now += max(HEAD_CACHE_MS, COUNTERS_SHARE_MS)
    recorder.calls.clear()
    recorder.slow_s = {"active_head": 0.2, "tenant_counters": 0.2}
    leases: list[Lease | None] = []
    _at_once(lambda number: leases.append(store.claim(f"w{number}", 30)), 4)
    assert all(lease is not None for lease in leases)
    assert (recorder.calls["active_head"], recorder.calls["tenant_counters"]) == (1, 1)


def test_one_process_claims_a_burst_in_due_order() -> None:
    """Sixteen jobs created within 0.2 s, some in the same millisecond, claimed one by one by one process:
    in due order, those due in the same millisecond by job id. The claim used to shuffle the jobs due within
    1 s of the queue's oldest (one process too), so a burst ran in random order."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    created = []
    for number in range(16):
        created.append(store.create("acme", ECHO).job)
        clock.now += 0 if number % 3 else 13
    claimed = [lease.job_id for lease in _claims(store, 16)]
    assert claimed == [job.job_id for job in sorted(created, key=lambda job: (job.not_before, job.job_id))]
    assert set(recorder.outcomes) == {CommitOutcome.COMMITTED}


def test_processes_racing_for_a_queue_spread_over_its_jobs() -> None:
    """Four processes take turns claiming from one queue (32 jobs 5 ms apart, 6 rounds; each process's
    shared head misses what the others took since its read). A process that found a job taken by another
    spreads its claims over the jobs due within SPREAD_MS of the oldest (onward.store.claim_order), so the
    processes seldom try the same one: at most 45 refused transactions for the 24 claims, where keeping to
    due order (every process tries each job the others took first) costs 60 (and the spread applied to
    every claim, as before, 34 to 39)."""
    for seed in range(3):
        clock, recorder = ManualClock(), CountingRecorder()
        stores = [_store(recorder, clock, seed=seed * 10 + number) for number in range(4)]
        for _ in range(32):
            stores[0].create("acme", ECHO)
            clock.now += 5
        for _ in range(6):
            for store in stores:
                assert store.claim("w", 30) is not None
            clock.now += 50
        assert recorder.outcomes[CommitOutcome.JOB_MOVED] <= 45, (seed, recorder.outcomes)


def test_a_contended_queue_is_spread_within_the_window_and_back_in_due_order_after_it() -> None:
    """`ClaimOrder`: a queue in due order until a claim finds one of its jobs taken by another process; then
    its jobs due within SPREAD_MS of the oldest in random order, those due later after them in due order,
    for CONTENDED_MS; then due order again. Without the end a race seen once would shuffle the queue for
    the process's life; without the window, a job could start before one due long before it."""
    key = ("acme", ReadyQueue(0, 0))
    now = 1_800_000_000_000
    due = [DueJob(f"{number:032x}", now - 3 * SPREAD_MS + number * 100) for number in range(30)]
    window = [job for job in due if job.due_at - due[0].due_at <= SPREAD_MS]
    order = ClaimOrder(random.Random(5))
    assert order.order(key, due[::-1], now) == due
    order.contended(key, now)
    spreads = [order.order(key, due, now + 1) for _ in range(20)]
    assert all(sorted(spread[:len(window)]) == window and spread[len(window):] == due[len(window):]
               for spread in spreads)
    assert len({spread[0] for spread in spreads}) > 1
    assert order.order(key, due, now + CONTENDED_MS) == due


def test_a_job_the_process_took_shown_again_by_a_lagging_index_is_no_race() -> None:
    """A read of the queue's head, lagging as the ready index may on AWS, shows again a job this process took:
    the claim's transaction is refused, and the claims go on in due order. Counting that refusal as another
    process taking the queue's jobs would spread the process's claims for CONTENDED_MS (out of due order)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    created = []
    for _ in range(8):
        created.append(store.create("acme", ECHO).job.job_id)
        clock.now += 5
    stale = recorder.due("acme", ReadyQueue(0, 0), clock.now, 8)
    (first,) = _claims(store, 1)
    assert first.job_id == created[0]
    clock.now += max(DUE_HEAD_SHARE_MS, COUNTERS_SHARE_MS, HEAD_CACHE_MS)
    due = recorder.due
    answers = iter([stale])
    recorder.due = lambda tenant_id, queue, now, limit: next(answers, None) or due(  # type: ignore[method-assign]
        tenant_id, queue, now, limit)
    recorder.outcomes.clear()
    assert [lease.job_id for lease in _claims(store, 7)] == created[1:]
    assert recorder.outcomes == {CommitOutcome.JOB_MOVED: 1, CommitOutcome.COMMITTED: 7}



def test_a_job_cancelled_in_the_shared_head_is_no_race() -> None:
    """A job the process's shared head still shows was cancelled meanwhile (by the API, another process): the
    claim finds it ended and goes on in due order. Counting it as another process taking the queue's jobs would
    spread the process's claims for CONTENDED_MS (the 6 left out of due order here, seed 7): a cancel, which
    users make of queued jobs every day, would reorder their queue."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, api = _store(recorder, clock), _store(recorder, clock)
    created = []
    for _ in range(8):
        created.append(api.create("acme", ECHO).job.job_id)
        clock.now += 5
    (first,) = _claims(store, 1)  # (its read of the queue's head holds the 7 others)
    assert first.job_id == created[0]
    api.cancel(created[1], "acme")
    assert [lease.job_id for lease in _claims(store, 6)] == created[2:]

# --- nothing due, parking, from the claim's own reads ------------------------------------------------------

def test_a_shared_head_with_no_due_job_left_is_read_again_before_saying_nothing_is_due() -> None:
    """The process's shared head of the queue was handed out; a job created since (another process's create,
    which its counters do not count either) is due: the claim reads the counters and the queue again and
    takes it. If a shared head with nothing left to hand out counted as "nothing due", the claim would
    return None with a job due."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    api = _store(recorder, clock)
    api.create("acme", ECHO)
    api.create("acme", ECHO)
    _claims(store, 2)
    later = api.create("acme", ECHO).job.job_id
    lease = store.claim("w", 30)
    assert lease is not None and lease.job_id == later


def test_a_parked_entry_leaves_the_cached_head() -> None:
    """An entry whose job is in backoff is parked from the claim's own read of its queue, and leaves the
    process's cached `active` head: the next claim (head still cached) neither reads that queue again nor
    tries to park it again. Without leaving the head, each claim within HEAD_CACHE_MS would read the queue
    and send the park again."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    store.create("acme", NewJob(type="demo.echo", max_attempts=3))
    (lease,) = _claims(store, 1)
    store.fail(lease, ErrorSummary.of("Boom", "failed"))  # retry_wait: due after its backoff
    clock.now += max(HEAD_CACHE_MS, COUNTERS_SHARE_MS)  # this claim reads everything itself
    assert store.get(lease.job_id).not_before > clock()
    recorder.calls.clear()
    assert store.claim("w", 30) is None
    assert (recorder.calls["due"], recorder.calls["park"]) == (1, 1)
    recorder.calls.clear()
    assert store.claim("w", 30) is None
    assert (recorder.calls["due"], recorder.calls["park"]) == (0, 0)


def test_an_entry_leaves_the_index_only_on_counters_the_claim_read() -> None:
    """A claim on shared counters takes a queue's last job as they show it, while another process creates the
    next one: the entry stays in the index and in the cached head, and the next claim finds the new job with
    one read of the counters, without reading the `active` head again (and, on the counters it read, takes
    the entry out of the index with that last job). Deactivating on the shared counters (they miss other
    processes' new jobs), the entry would leave the cached head (and the index, or be refused), and the next
    claim would read the head's partitions again to find it."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, api = _store(recorder, clock), _store(recorder, clock)
    api.create("acme", ECHO)
    api.create("acme", ECHO)
    _claims(store, 2)  # the second on the counters the first read
    assert recorder.calls["deactivate"] == 0
    later = api.create("acme", ECHO).job.job_id
    heads = recorder.calls["active_head"]
    lease = store.claim("w", 30)
    assert lease is not None and lease.job_id == later
    assert recorder.calls["active_head"] == heads


def test_a_parked_entry_is_woken_at_its_end_not_at_the_next_once_a_second_pass() -> None:
    """Two delayed jobs of two tenants, due 2.0 s and 2.1 s from now: a claim parks both entries; each job is
    claimed at its due time (not a millisecond before), the second 0.1 s after the wake pass that woke the
    first. Each wake pass used to set the next one a second on, over the ends of the parks in between: a
    job waited up to a second past its due time."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    first = store.create("a", NewJob(type="demo.echo", delay_s=2.0)).job
    second = store.create("b", NewJob(type="demo.echo", delay_s=2.1)).job
    assert store.claim("w", 30) is None
    assert recorder.calls["park"] == 2
    for job in (first, second):
        clock.now = job.not_before - 1
        assert store.claim("w", 30) is None, "claimed before it was due"
        clock.now = job.not_before
        lease = store.claim("w", 30)
        assert lease is not None and lease.job_id == job.job_id


def test_parked_entries_due_at_once_beyond_one_pass_are_woken_by_the_next_claims() -> None:
    """80 tenants' delayed jobs, all due at one time, their entries parked (20 per `parked` partition on
    average): a wake pass wakes at most WAKE_PER_SHARD of a partition, and the claims after it pass again at
    once, so every job is claimed at its due time. Without passing again, the rest slept a second more."""
    assert PARKED_SHARDS * WAKE_PER_SHARD < 80  # (more than one pass can wake)
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    jobs = {store.create(f"t{number:02d}", NewJob(type="demo.echo", delay_s=5.0)).job.job_id for number in range(80)}
    while recorder.calls["park"] < 80:
        assert store.claim("w", 30) is None
        clock.now += 1
    clock.now = max(store.get(job_id).not_before for job_id in jobs)
    claimed = {lease.job_id for lease in _claims(store, 80)}
    assert claimed == jobs


# --- counters, shared ----------------------------------------------------------------------------------------

def test_claims_sharing_counters_spread_over_tenants_as_fresh_counters_would() -> None:
    """Two tenants of equal weight, four claims at one instant on one read of the counters: the claims
    alternate between the tenants (fewer running first), as four reads would have had them. Without the
    process's claims counted into the shared counters, all four would go to `a` (both at 0 running, `a`
    first by id)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    for tenant_id in ("a", "b"):
        for _ in range(4):
            store.create(tenant_id, ECHO)
    tenants = [lease.job.tenant_id for lease in _claims(store, 4)]
    assert tenants == ["a", "b", "a", "b"]
    assert recorder.calls["tenant_counters"] == 1


def test_the_process_writes_counted_in_are_what_a_fresh_read_shows() -> None:
    """`counted_write` on the counters read before each write of a job's life (claims on two RUNNING shards,
    complete, fail into retry, release, cancel of a queued job) gives what a read after it shows. A wrong
    count would misplace the tenant in the fair order (or at its cap) until its counters are read again."""
    checked: list[tuple[TenantState, TenantState]] = []

    class Checking(MemoryRecorder):
        def commit(self, write: TransitionWrite) -> CommitOutcome:
            tenant = self.tenants(["acme"])["acme"]
            before = self.tenant_counters({tenant: None})["acme"]
            outcome = super().commit(write)
            if outcome is CommitOutcome.COMMITTED:
                after = self.tenant_counters({tenant: None})["acme"]
                checked.append((counted_write(before, write.running, write.waiting), after))
            return outcome

    clock = ManualClock()
    store = JobStore.in_memory(clock=clock, recorder=Checking())
    store.register_tenant(Tenant("acme", ready_shards=2))
    jobs = [store.create("acme", NewJob(type="demo.echo", max_attempts=3, priority=band)).job.job_id
            for band in (0, 0, 5, 5, 9)]
    first, second, third = _claims(store, 3)
    clock.advance(2)
    store.complete(first)
    store.fail(second, ErrorSummary.of("Flaky", "again"))
    store.release(third)
    store.cancel(next(job_id for job_id in jobs if store.get(job_id).state is JobState.QUEUED), "acme")
    assert len(checked) == 7
    for counted, read in checked:
        assert counted == read


def test_the_process_ends_counted_in_keep_a_tenants_virtual_time_and_do_not_lift_it() -> None:
    """Twenty attempts claimed and ended within COUNTERS_SHARE_MS, then a claim on the shared counters: with
    the ends counted in, the tenant's virtual time is what the table says, so the system clock does not run
    ahead of it and no lift follows. Counting only the claims, the ended attempts would still run in the
    shared counters (about 4 s of worker time too much), the claim would move the clock there, and the
    tenant would be lifted to it at its next claim: charged for time it never used."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    for _ in range(30):
        store.create("acme", ECHO)
    leases = _claims(store, 20)
    clock.now += 1
    for lease in leases:
        store.complete(lease)
    clock.now += COUNTERS_SHARE_MS - 50  # still shared
    _claims(store, 1)
    clock.now += COUNTERS_SHARE_MS  # read again
    _claims(store, 1)
    assert recorder.calls["lift"] == 0
    assert store.tenant_states()["acme"].usage.lift_vt == 0


def test_a_flex_is_decided_from_counters_the_claim_read_itself() -> None:
    """`a` (cap 1) is at its cap; `b` (no cap) had one waiting job, which another process took, and has a
    new one in another band, created since the process read the counters. On the shared counters b looks
    empty and a would flex past its cap; the claim reads the counters first and serves b. Without that read,
    a would run two jobs with a cap of 1 while b, below its cap, has a job due."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, other = _store(recorder, clock), _store(recorder, clock)
    store.register_tenant(Tenant("a", TenantPolicy(cap=1)))
    store.create("a", ECHO)
    store.create("a", ECHO)
    store.create("b", ECHO)
    (first,) = _claims(store, 1)
    assert first.job.tenant_id == "a"
    (taken,) = _claims(other, 1)
    assert taken.job.tenant_id == "b"
    urgent = other.create("b", NewJob(type="demo.echo", priority=5)).job.job_id
    lease = store.claim("w", 30)
    assert lease is not None and lease.job_id == urgent
    assert store.tenant_states()["a"].usage.running == 1


def test_a_refused_admission_drops_the_shared_counters_that_showed_room() -> None:
    """`a` (cap 1, weight 10: first in fair order below its cap) is at its cap by another process's claim
    the process's counters missed: its claims try a, are refused (AdmissionRefused), and serve `z`. The
    refusal drops a's shared counters, so the next claim sees a at its cap and goes to z without trying.
    Kept, every claim within COUNTERS_SHARE_MS would send a refused transaction first (2, not 1)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, other = _store(recorder, clock), _store(recorder, clock)
    store.register_tenant(Tenant("a", TenantPolicy(weight=10, cap=1)))
    for _ in range(3):
        store.create("a", ECHO)
        store.create("z", ECHO)
    stale = recorder.tenant_states()
    assert other.claim("w", 30) is not None  # a's one slot
    _answer_next_counters_read_from(recorder, stale)
    recorder.outcomes.clear()
    assert [lease.job.tenant_id for lease in _claims(store, 2)] == ["z", "z"]
    assert recorder.outcomes[CommitOutcome.CAP_REACHED] == 1


def test_a_lift_met_is_counted_in_and_the_claim_goes_on_without_reading_again() -> None:
    """`sleeper` returns after `bulk` ran two jobs for 100 s; another process's claim serves it first, raising
    its lift in its transaction. This process, on counters read before that (still unlifted, returning), sends
    the same lift: refused as met (CommitOutcome.LIFTED), it counts the lift in and claims on from its shared
    counters, without a lift and without reading them again. Deciding again from fresh counters instead (a
    read a moment behind on AWS shows the same) would send the lift again, one refused transaction a round."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, other = _store(recorder, clock), _store(recorder, clock)
    _sleeper_returns(store, other, clock)
    stale = recorder.tenant_states()
    (served,) = _claims(other, 1)
    assert served.job.tenant_id == "sleeper" and recorder.calls["claim with a lift"] == 1
    _answer_next_counters_read_from(recorder, stale)
    recorder.calls.clear()
    recorder.outcomes.clear()
    assert store.claim("w", 30) is not None
    assert recorder.outcomes[CommitOutcome.LIFTED] == 1 and recorder.outcomes[CommitOutcome.COMMITTED] == 1
    assert (recorder.calls["claim with a lift"], recorder.calls["tenant_counters"]) == (1, 0)
    assert store.tenant_states()["sleeper"].usage.lift_vt == 200_000


def test_a_job_not_taken_for_want_of_a_slot_goes_back_to_the_shared_head() -> None:
    """`a` (cap 1) looks below its cap on counters read before another process took its slot: the claim is
    handed a's job, refused (AdmissionRefused), and with no other tenant due it flexes a past its cap with
    that same job, given back to the shared head: one read of the queue. Kept out of the head, the flex
    would read the queue again to find it (2 reads)."""
    clock, recorder = ManualClock(), CountingRecorder()
    store, other = _store(recorder, clock), _store(recorder, clock)
    store.register_tenant(Tenant("a", TenantPolicy(cap=1)))
    jobs = {store.create("a", ECHO).job.job_id for _ in range(2)}
    stale = recorder.tenant_states()
    (held,) = _claims(other, 1)  # a's one slot
    (job,) = jobs - {held.job_id}
    _answer_next_counters_read_from(recorder, stale)
    recorder.calls.clear()
    lease = store.claim("w", 30)
    assert lease is not None and lease.job_id == job
    assert recorder.outcomes[CommitOutcome.CAP_REACHED] == 1
    assert recorder.calls["due"] == 1


def test_a_lift_is_counted_into_the_shared_counters() -> None:
    """`sleeper` returns after `bulk` ran two jobs for 100 s: its first claim lifts it to the clock, in the
    claim's own transaction (issue 34: no lift request of its own, 1 write unit), and the next claim on the
    shared counters sees the lift (no second lift). Without the lift counted in, every claim within
    COUNTERS_SHARE_MS would find sleeper below the clock and carry the lift again, refused as lifted
    meanwhile (Role.LIFT) and tried again from fresh counters."""
    clock, recorder = ManualClock(), CountingRecorder()
    store = _store(recorder, clock)
    _sleeper_returns(store, store, clock)
    _claims(store, 2)
    assert (recorder.calls["claim with a lift"], recorder.calls["lift"]) == (1, 0)
    assert recorder.outcomes[CommitOutcome.LIFTED] == 0
    assert store.tenant_states()["sleeper"].usage.lift_vt == 200_000

"""What a claim reads (issue 20): the reads a claim can leave out without deciding anything differently.

- A claim that finds nothing in a head it read itself does not read the head a second time (a second read
  is only for a head taken from the process's cache, which may be up to HEAD_CACHE_MS old).
- The local platform's reaper runs a quarter of the lease apart (1 s to 10 s), not every second.
- An entry whose jobs are all in backoff is parked from the one read of each band's head the claim makes
  anyway (the head read without the due bound: due jobs first, else the earliest says how long to park).
"""

from __future__ import annotations

from collections import Counter

from onward.domain.clock import EpochMs
from onward.domain.dispatch import Candidate
from onward.domain.models import ErrorSummary, NewJob
from onward.store.claim_window import HeadWindow, served_next
from onward.store.claims import HEAD_CACHE_MS
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import ActiveEntry, DueJob, Tenant
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import ActiveHead
from onward.store.service import JobStore
from onward_infra.platform import REAPER_MAX_S, REAPER_MIN_S, PlatformOptions
from tests.support import ManualClock


class CountingRecorder(MemoryRecorder):
    """The memory recorder, counting the index reads and parks a claim makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.due_bounds: list[EpochMs] = []

    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        self.calls["active_head"] += 1
        return super().active_head(limit_per_shard)

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        self.calls["due"] += 1
        self.due_bounds.append(now)
        return super().due(tenant_id, queue, now, limit)

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        self.calls["park"] += 1
        self.parked_until = until
        return super().park(tenant_id, shard, until, entered)


def _store() -> tuple[JobStore, CountingRecorder, ManualClock]:
    clock = ManualClock()
    recorder = CountingRecorder()
    return JobStore.in_memory(clock=clock, recorder=recorder), recorder, clock


def test_an_empty_claim_reads_the_head_once_when_it_read_it_itself() -> None:
    """With the second read back for every round, an idle worker's empty claim reads the head twice in a
    row (every ACTIVE_SHARDS partition each time): this counts 2 reads instead of 1."""
    store, recorder, _ = _store()
    assert store.claim("w-1", 30) is None
    assert recorder.calls["active_head"] == 1


def test_an_empty_claim_from_a_cached_head_reads_it_again() -> None:
    """A head from the cache can miss a job created since it was read: without the fresh read this claim
    would say "nothing due" while a job is due, and the test's second claim would get None."""
    store, recorder, clock = _store()
    assert store.claim("w-1", 30) is None  # reads the (empty) head and caches it
    created = store.create("acme", NewJob(type="demo.echo"))
    clock.advance(HEAD_CACHE_MS / 1000 / 2)  # the cached head is still fresh enough to be used first
    lease = store.claim("w-1", 30)
    assert lease is not None and lease.job_id == created.job.job_id
    assert recorder.calls["active_head"] == 2


def test_an_entry_in_backoff_is_parked_from_the_head_read_it_makes_anyway() -> None:
    """The claim reads each band's head once, without the due bound, and parks from it: with the old second
    read per band for the park, this counts 2 reads of the ready index instead of 1; a park until any other
    moment than the job's due time would show in parked_until."""
    store, recorder, clock = _store()
    store.create("acme", NewJob(type="demo.echo", max_attempts=3))
    lease = store.claim("w-1", 30)
    assert lease is not None
    store.fail(lease, ErrorSummary.of("Boom", "failed"))  # retry_wait: due after its backoff
    due_at = store.get(lease.job_id).not_before
    assert due_at is not None and due_at > clock()
    recorder.calls.clear()
    assert store.claim("w-1", 30) is None
    assert recorder.calls["due"] == 1
    assert recorder.calls["park"] == 1
    assert recorder.parked_until == due_at
    clock.now = due_at  # due: woken and claimed
    clock.advance(1.0)
    again = store.claim("w-1", 30)
    assert again is not None and again.job_id == lease.job_id


def test_the_reaper_runs_a_quarter_of_the_lease_apart_within_bounds() -> None:
    """A reaper pass reads every lease shard: with a pass a second, a platform with 30 s leases spent most
    of its idle requests on it. An explicit interval is kept; without one it follows the lease."""
    assert PlatformOptions(lease_s=3.0).reaper_every_s == REAPER_MIN_S
    assert PlatformOptions(lease_s=30.0).reaper_every_s == 7.5
    assert PlatformOptions(lease_s=600.0).reaper_every_s == REAPER_MAX_S
    assert PlatformOptions(lease_s=30.0, reaper_interval_s=0.5).reaper_every_s == 0.5



class RekeyCountingRecorder(MemoryRecorder):
    """The memory recorder, counting the re-keys of queue entries a claim's examination makes."""

    def __init__(self) -> None:
        super().__init__()
        self.rekeys = 0

    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        self.rekeys += 1
        return super().rekey(tenant_id, shard, active_vt)


def test_a_claim_does_not_re_key_the_entries_of_the_tenant_it_serves() -> None:
    """A tenant alone on 8 ready shards, its jobs taking worker time (so its virtual time runs ahead of its
    entries' keys): every claim serves it, and none re-keys its other entries. Without
    `claim_window.served_next` each claim raised every entry of the tenant more than 250 ms behind (an UpdateItem
    and a move of its `active` index entry: 3 write units each), about 9 of the 46 write units of its jobs in
    the realistic run, for a place at the head it keeps anyway while it is the only one (or the best)."""
    clock = ManualClock()
    recorder = RekeyCountingRecorder()
    store = JobStore.in_memory(clock=clock, recorder=recorder)
    store.register_tenant(Tenant("solo", ready_shards=8))
    for _ in range(64):
        store.create("solo", NewJob(type="demo.echo", params={}))
    served = 0
    while (lease := store.claim("w", 300)) is not None:
        clock.advance(0.5)  # (each attempt takes half a second of worker time)
        store.complete(lease)
        served += 1
        clock.advance(HEAD_CACHE_MS / 1000)  # (a fresh head at every claim)
    assert served == 64
    assert recorder.rekeys == 0


def test_the_tenant_served_next_is_the_best_below_its_cap_once_the_window_trusts_it() -> None:
    """Catches a `served_next` that spares a tenant the window does not trust yet (a tenant not examined may
    come first: the claim examines on, and the spared tenant, far behind its keys, would lead every head read
    and be examined at every claim), or one that names a tenant with no candidate."""
    head = ActiveHead([ActiveEntry("a", 0, 100.0), ActiveEntry("b", 0, 1_000.0)], None)
    window = HeadWindow(head)
    window.take(1)  # ("a" examined; "b" at 1,000 not yet)
    assert served_next([Candidate("a", 1_200.0, None)], window) == "a"
    assert served_next([Candidate("a", 1_300.0, None)], window) is None
    assert served_next([], window) is None


class DeactivationCountingRecorder(MemoryRecorder):
    """The memory recorder, counting the deactivations that found the entry still in the index and those
    that did not (on DynamoDB a conditional write that fails costs its write unit all the same)."""

    def __init__(self) -> None:
        super().__init__()
        self.deactivations: Counter[bool] = Counter()

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        done = super().deactivate(tenant_id, shard)
        self.deactivations[done] += 1
        return done


def test_a_claim_does_not_deactivate_an_entry_its_read_shows_out_of_the_index() -> None:
    """Two processes (a store each over one recorder) and 40 tenants with a job each. The second claims
    once (its head cached), the first takes 20 jobs (each claim takes its entry out of the index), and the
    second claims on from its cached head: it examines entries already out, reading their counters. Without
    the check of what those show (not in the index) each sent a deactivation bound to fail: a write unit for
    nothing, 1.7 of the 40 write units of a job in the realistic many-tenant run. Every entry still leaves
    the index: the claims end with none in it."""
    clock = ManualClock()
    recorder = DeactivationCountingRecorder()
    first = JobStore.in_memory(clock=clock, recorder=recorder)
    second = JobStore.in_memory(clock=clock, recorder=recorder)
    for n in range(40):
        first.register_tenant(Tenant(f"t{n:02d}"))
        first.create(f"t{n:02d}", NewJob(type="demo.echo", params={}))
    leases = [second.claim("w", 300)] + [first.claim("w", 300) for _ in range(20)]
    leases += [second.claim("w", 300) for _ in range(19)]
    assert None not in leases and len({lease.job_id for lease in leases if lease is not None}) == 40
    clock.advance(HEAD_CACHE_MS / 1000)
    assert first.claim("w", 300) is None and second.claim("w", 300) is None
    assert recorder.deactivations[True] > 0
    assert recorder.deactivations[False] == 0
    assert recorder.active_head(16) == []

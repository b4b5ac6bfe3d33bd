"""The claim: which job a free worker takes, read from the head of the `active` index (onward.keys).

A claim costs the same however many tenants are registered or backlogged:
1. it reads the head of the `active` index: HEAD_PER_SHARD entries of each of its ACTIVE_SHARDS partitions,
   each a tenant's ready shard that may hold work, keyed by a lower bound of the tenant's virtual time
   (its virtual time when that shard was last served; entries enter at the system clock);
2. it takes the first CANDIDATE_TENANTS distinct tenants in key order, reads their settings (cached,
   onward.tenants) and their RUNNING counters and queue entries in one batch, and orders them with
   onward.dispatch (fair share under the system clock, caps that flex), lifting a returning tenant;
3. inside the chosen tenant it reads the head of each ready queue (ready shard and priority band) its
   entries count waiting jobs in, and serves the queue whose oldest due job has the highest aged priority
   (onward.dispatch.aged_priority: priority with aging; within a band the oldest due job across the
   shards, so no shard goes first), through the store's transaction (onward.store), which takes a slot on
   one of the tenant's RUNNING counters under its share of the cap (`Admission`) and re-keys the served
   entry to the tenant's virtual time.
Keys are lower bounds because a tenant's virtual time only grows (its running attempts accrue, lifts
raise it): a tenant at the head whose key is far below its virtual time is re-keyed (REKEYS_PER_CLAIM at
most), so the head converges on the tenants that are really next. Housekeeping keeps the head clean:
an entry found with nothing waiting leaves the index (`deactivate`, conditional on still nothing waiting);
one whose jobs are all in backoff is parked until its earliest is due (`park`, conditional on no job
entering since the read), and parked entries are woken once a second (WAKE_EVERY_MS) by any claiming
process, or at once by a job entering them.

Order is exact among the tenants considered; a tenant beyond them is at worst one re-key away. The
index is eventually consistent: a job created a moment ago may wait for the next claim.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from onward.clock import Clock, EpochMs
from onward.dispatch import Candidate, aged_priority, dispatch_order
from onward.keys import ReadyQueue
from onward.models import Lease
from onward.recorder import ActiveEntry, Admission, DueJob, JobRecorder, QueueEntry, TenantState
from onward.tenants import TenantRegistry

HEAD_PER_SHARD = 4
HEAD_CACHE_MS = 250  # a process reads the head at most this often: its reads do not grow with its claims
CANDIDATE_TENANTS = 8
CANDIDATES_PER_QUERY = 8
REKEYS_PER_CLAIM = 2
REKEY_GAP_MS = 2_000.0  # a key of a tenant considered but not served this far behind is raised (an UpdateItem)
SERVED_REKEY_GAP_MS = 0.0  # the served entry's key, raised by the claim's transaction, which writes it anyway
MAX_FLEX_CHECKS = 80  # condition checks of a flexing claim (a transaction holds at most 100 actions)
MAX_ROUNDS = 25
SPREAD_MS = 1_000  # jobs due this close to a queue's oldest are tried in random order (concurrent claims spread)
WAKE_EVERY_MS = 1_000
WAKE_PER_SHARD = 16
NO_DUE_BOUND: EpochMs = 2 ** 62  # a queue's head read due or not (the index is in due order)


class AdmissionRefused(Exception):
    """The claim's Admission failed on the RUNNING counter it charged: that shard reached its cap."""


class FlexRefused(Exception):
    """A flexing claim found another tenant with waiting jobs back below its cap: it must be served first."""


class _Found(StrEnum):
    NOTHING_DUE = "nothing_due"
    AT_CAP = "at_cap"


# Claim one job: (the due job as the queue's head showed it, worker, lease ms, admission) -> the Lease, or None
# when the job was not claimable (taken meanwhile, no longer due). Raises AdmissionRefused / FlexRefused.
Take = Callable[[DueJob, str, int, Admission], Lease | None]


@dataclass(frozen=True)
class _Slots:
    """A tenant's RUNNING counters as this claim read them, with the shards refused since."""

    running: list[int]
    caps: tuple[int | None, ...]

    def pick(self, rng: random.Random, *, flex: bool) -> int | None:
        """The shard to charge: the one with the most room under its cap (any, least running, when
        flexing or uncapped); None when every shard is at its cap."""
        shards = range(len(self.caps))
        if flex or self.caps[0] is None:
            least = min(self.running)
            return rng.choice([shard for shard in shards if self.running[shard] == least])
        if sum(self.running) >= sum(cap or 0 for cap in self.caps):
            return None  # at its cap as read (after a cap was lowered, shards can hold more than their share)
        room = [(cap - self.running[shard], shard) for shard in shards if (cap := self.caps[shard]) is not None]
        best = max(room)[0]
        if best <= 0:
            return None
        return rng.choice([shard for left, shard in room if left == best])

    def full(self, shard: int) -> None:
        cap = self.caps[shard]
        self.running[shard] = max(self.running[shard], cap if cap is not None else 0)


class Claimer:
    """The claim path of one JobStore. Thread-safe."""

    def __init__(self, recorder: JobRecorder, registry: TenantRegistry, clock: Clock, rng: random.Random,
                 take: Take) -> None:
        self._recorder = recorder
        self._registry = registry
        self._clock = clock
        self._rng = rng
        self._take = take
        self._lock = threading.Lock()
        self._wake_at: EpochMs | None = None  # the next wake pass: WAKE_EVERY_MS on, or a park's end
        self._head: tuple[EpochMs, list[ActiveEntry]] | None = None
        self._local = threading.local()  # read_head: whether this thread's claim round read the head itself

    def claim(self, worker_id: str, lease_ms: int) -> Lease | None:
        """Lease the next due job in fair order, None when no job is due (see the module's docstring)."""
        self._wake_parked()
        fresh = False
        for _ in range(MAX_ROUNDS):
            self._local.read_head = False
            try:
                lease = self._claim_once(worker_id, lease_ms, fresh=fresh)
            except FlexRefused:
                continue  # a capped tenant came back below its cap: decide again from fresh counters
            if lease is not None or fresh or self._local.read_head:
                return lease  # (a head this round read itself is as fresh as a second read would be)
            fresh = True  # nothing in the head this process last read: read it now before saying so
        return None

    def _wake_parked(self) -> None:
        """Wake the parked entries that are due: once per WAKE_EVERY_MS, sooner when one this process
        parked is due."""
        now = self._clock()
        with self._lock:
            if self._wake_at is not None and now < self._wake_at:
                return
            self._wake_at = now + WAKE_EVERY_MS
        for tenant_id, shard in self._recorder.parked_due(now, WAKE_PER_SHARD):
            self._recorder.wake(tenant_id, shard)

    def _active_head(self, *, fresh: bool) -> list[ActiveEntry]:
        """The head of the `active` index, read at most once per HEAD_CACHE_MS unless `fresh`."""
        now = self._clock()
        with self._lock:
            if not fresh and self._head is not None and now - self._head[0] < HEAD_CACHE_MS:
                return self._head[1]
        head = self._recorder.active_head(HEAD_PER_SHARD)
        with self._lock:
            self._head = (now, head)
        self._local.read_head = True
        return head

    def _deactivate(self, tenant_id: str, shard: int) -> None:
        """Take an entry with nothing waiting out of the index, and out of this process's cached head (so
        the claims reading the cache do not try again)."""
        self._recorder.deactivate(tenant_id, shard)
        with self._lock:
            if self._head is not None:
                read_at, head = self._head
                self._head = (read_at, [entry for entry in head
                                        if (entry.tenant_id, entry.shard) != (tenant_id, shard)])

    def _claim_once(self, worker_id: str, lease_ms: int, *, fresh: bool) -> Lease | None:
        head = self._active_head(fresh=fresh)
        seen: dict[str, list[ActiveEntry]] = {}
        for entry in head:
            if entry.tenant_id in seen or len(seen) < CANDIDATE_TENANTS:
                seen.setdefault(entry.tenant_id, []).append(entry)
        if not seen:
            return None
        settings = self._registry.settings(list(seen))
        states = self._recorder.tenant_counters(
            {settings[tenant_id]: {entry.shard for entry in entries}
             for tenant_id, entries in seen.items() if tenant_id in settings})
        now = self._clock()
        order = dispatch_order([state.load() for state in states.values()], now, self._registry.virtual_clock())
        self._tidy(seen, states, order.within_cap + order.flex, crowded=len(seen) >= CANDIDATE_TENANTS)
        reached_cap: list[Candidate] = []
        for candidate in order.within_cap:
            found = self._claim_from(states[candidate.tenant_id], candidate, worker_id, lease_ms)
            if isinstance(found, Lease):
                return found
            if found is _Found.AT_CAP:  # it reached its cap while this claim read it; it still has work
                reached_cap.append(candidate)
        # No tenant below its cap has a due job: serve the capped ones past their caps, in fair order. The
        # flexing transaction also checks that the other capped tenants are still at their caps (they were
        # when the counters were read): if one came back below, it goes first (FlexRefused).
        capped = sorted([*order.flex, *reached_cap], key=lambda candidate: candidate.virtual_time)
        for candidate in capped:
            others = [(other.tenant_id, shard, cap) for other in capped if other is not candidate
                      for shard, cap in enumerate(states[other.tenant_id].tenant.shard_caps()) if cap]
            found = self._claim_from(states[candidate.tenant_id], candidate, worker_id, lease_ms,
                                     flex_while_at_cap=tuple(others[:MAX_FLEX_CHECKS]))
            if isinstance(found, Lease):
                return found
        return None

    def _tidy(self, seen: dict[str, list[ActiveEntry]], states: dict[str, TenantState],
              candidates: tuple[Candidate, ...], *, crowded: bool) -> None:
        """Take entries with nothing waiting out of the index; when the head is crowded, raise the keys of
        tenants far behind their virtual time, so that the tenants really next come to the head."""
        for tenant_id, entries in seen.items():
            state = states.get(tenant_id)
            for entry in entries:
                queue = state.queues.get(entry.shard) if state is not None else None
                if queue is None or queue.waiting <= 0:
                    self._deactivate(tenant_id, entry.shard)
        if not crowded:
            return
        rekeyed = 0
        for candidate in reversed(candidates):  # the furthest behind first
            for entry in seen.get(candidate.tenant_id, ()):
                if rekeyed >= REKEYS_PER_CLAIM:
                    return
                if candidate.virtual_time - entry.active_vt > REKEY_GAP_MS:
                    self._recorder.rekey(candidate.tenant_id, entry.shard, candidate.virtual_time)
                    rekeyed += 1

    def _claim_from(
        self,
        state: TenantState,
        candidate: Candidate,
        worker_id: str,
        lease_ms: int,
        *,
        flex_while_at_cap: tuple[tuple[str, int, int], ...] | None = None,
    ) -> Lease | _Found:
        """Claim one due job of this tenant within its cap, or past it (`flex_while_at_cap` given: while
        those tenants' shards are at their caps). NOTHING_DUE: none of its entries read had a due job it
        had not tried (jobs already tried are not tried again, so a lagging index cannot keep it here)."""
        tenant = state.tenant
        if candidate.lift_offset_ms is not None:
            self._recorder.lift(tenant.tenant_id, candidate.lift_offset_ms)
        slots = _Slots([usage.running for usage in state.running_by_shard][:tenant.running_shards],
                       tenant.shard_caps())
        entries = sorted((entry for entry in state.queues.values() if entry.waiting > 0),
                         key=lambda entry: (entry.active_vt if entry.active_vt is not None else -1.0, entry.shard))
        now = self._clock()
        heads: list[tuple[float, int, float, int, QueueEntry, list[DueJob]]] = []
        for entry in entries:
            found_due = False
            earliest: list[EpochMs] = []  # the earliest job of each band none of whose jobs is due
            for band in entry.bands_with_work():
                # One read of the queue's head, due or not: the due jobs come first (the index is in due
                # order), and when none is, its first job says how long the entry may be parked.
                head = self._recorder.due(tenant.tenant_id, ReadyQueue(entry.shard, band), NO_DUE_BOUND,
                                          CANDIDATES_PER_QUERY)
                due = [job for job in head if job.due_at <= now]
                if due:
                    found_due = True
                    key = entry.active_vt if entry.active_vt is not None else -1.0
                    heads.append((-aged_priority(band, due[0].due_at, now), -band, key, entry.shard, entry, due))
                elif head:
                    earliest.append(head[0].due_at)
            if not found_due and earliest:
                self._park(entry, min(earliest), now)
        heads.sort(key=lambda head: head[:4])
        tried: set[str] = set()
        for _, band, _, _, entry, due in heads:
            behind = entry.active_vt is not None and candidate.virtual_time - entry.active_vt > SERVED_REKEY_GAP_MS
            active_vt = candidate.virtual_time if behind else None
            found = self._claim_in(entry, ReadyQueue(entry.shard, -band), due, slots, active_vt, tried,
                                   worker_id, lease_ms, flex_while_at_cap)
            if isinstance(found, Lease):
                self._registry.served(candidate.virtual_time)
                if entry.waiting <= 1:  # likely its last job: out of the index unless one came meanwhile
                    self._deactivate(tenant.tenant_id, entry.shard)
                return found
            if found is _Found.AT_CAP:
                return found
        return _Found.NOTHING_DUE

    def _claim_in(self, entry: QueueEntry, queue: ReadyQueue, due: list[DueJob], slots: _Slots,
                  active_vt: float | None, tried: set[str], worker_id: str, lease_ms: int,
                  flex_while_at_cap: tuple[tuple[str, int, int], ...] | None) -> Lease | _Found:
        """Claim a due job of one ready queue (`due`: its head as first read; read again while every job
        shown was taken by concurrent claims, else the claim would pass this tenant while it has due jobs)."""
        for _ in range(MAX_ROUNDS):
            jobs = self._in_claim_order([job for job in due if job.job_id not in tried])
            if not jobs:
                break
            tried.update(job.job_id for job in jobs)
            for job in jobs:
                found = self._take_within(job, slots, active_vt, worker_id, lease_ms, flex_while_at_cap)
                if found is not None:
                    return found
            due = self._recorder.due(entry.tenant_id, queue, self._clock(), CANDIDATES_PER_QUERY)
        return _Found.NOTHING_DUE

    def _in_claim_order(self, due: list[DueJob]) -> list[DueJob]:
        """Due jobs in due order, except that those due within SPREAD_MS of the oldest are shuffled: a burst
        created together spreads concurrent claims over it, while an older job goes first (FIFO, and the
        head's age is what aging weighs)."""
        if not due:
            return []
        oldest = min(job.due_at for job in due)
        spread = [job for job in due if job.due_at - oldest <= SPREAD_MS]
        self._rng.shuffle(spread)
        return spread + [job for job in sorted(due, key=lambda job: job.due_at) if job.due_at - oldest > SPREAD_MS]

    def _take_within(self, job: DueJob, slots: _Slots, active_vt: float | None, worker_id: str, lease_ms: int,
                     flex_while_at_cap: tuple[tuple[str, int, int], ...] | None) -> Lease | _Found | None:
        """Claim `job` on a RUNNING shard with room (another one when the first is found full): the
        Lease, AT_CAP when every shard is full, None when the job was not claimable."""
        flexing = flex_while_at_cap is not None
        while True:
            shard = slots.pick(self._rng, flex=flexing)
            if shard is None:
                return _Found.AT_CAP
            admission = Admission(running_shard=shard, cap=None if flexing else slots.caps[shard],
                                  active_vt=active_vt, others_at_cap=flex_while_at_cap or ())
            try:
                return self._take(job, worker_id, lease_ms, admission)
            except AdmissionRefused:
                slots.full(shard)

    def _park(self, entry: QueueEntry, until: EpochMs, now: EpochMs) -> None:
        """Park an entry none of whose jobs is due, until its earliest (`until`, as its bands' heads read) is
        due."""
        # (until <= now: the index lags behind a job that is due: not parked)
        if until > now and self._recorder.park(entry.tenant_id, entry.shard, until, entry.entered):
            with self._lock:
                self._wake_at = until if self._wake_at is None else min(self._wake_at, until)

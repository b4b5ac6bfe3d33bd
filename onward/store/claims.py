"""The claim: which job a free worker takes, read from the head of the `active` index (onward.store.dynamo.keys).

A claim costs the same however many tenants are registered or backlogged:
1. it reads the head of the `active` index: HEAD_PER_SHARD entries of each of its ACTIVE_SHARDS partitions,
   each a tenant's ready shard that may hold work, keyed by a lower bound of the tenant's virtual time
   (its virtual time when that shard was last served; entries enter at the system clock);
2. it examines the tenants in key order, CANDIDATE_TENANTS at a time: reads their settings (cached,
   onward.store.tenants) and their RUNNING counters and queue entries in one batch, and orders them with
   onward.domain.dispatch (fair share under the system clock, caps that flex), lifting a tenant that
   returned; it serves the best one below its cap only once no tenant it has not examined can come
   first (onward.store.claim_window: keys are lower bounds), else it examines the next window (and reads the
   head again past keys it found far behind), and flexes a cap only when no tenant below its cap it
   examined has a due job;
3. inside the chosen tenant it reads the head of each ready queue (ready shard and priority band) its
   entries count waiting jobs in, and serves the queue whose oldest due job has the highest aged priority
   (onward.domain.dispatch.aged_priority: priority with aging; within a band the oldest due job across the
   shards, so no shard goes first; due at the same millisecond, the lower job id), its jobs in due order
   (onward.store.claim_order: spread a little while processes race for the queue), through the store's
   transaction (onward.store.service), which takes a slot on one of the tenant's RUNNING counters under its share
   of the cap (`Admission`) and re-keys the served entry to the tenant's virtual time.
Keys are lower bounds because a tenant's virtual time only grows (its running attempts accrue, lifts
raise it): an examined tenant whose key is REKEY_GAP_MS below its virtual time is re-keyed (an UpdateItem,
REKEYS_PER_CLAIM at most), so the head converges on the tenants that are really next. Housekeeping keeps the
head clean: an entry found with nothing waiting leaves the index (`deactivate`, conditional on still
nothing waiting); one whose jobs are all in backoff (or delayed) is parked until its earliest is due (`park`,
conditional on no job entering since the read), and woken then by the process that parked it, within a
second (WAKE_EVERY_MS) by any claiming process (onward.store.wake_schedule), or at once by a job entering it.
Order is exact within WINDOW_SLACK_MS of virtual time whatever the number of waiting tenants. The index is
eventually consistent: a job created a moment ago may wait for the next claim.

The worker threads of a process share one Claimer, and share what its claims read (a claim costs about one
transaction and a fraction of a read):
- the `active` head, used for less than HEAD_CACHE_MS, the less the further apart the process's claims come
  (onward.store.head_life: at every claim when they come HEAD_EVERY_CLAIM_GAP_MS apart, so a tenant that
  became active is not held behind the cache); while one claim reads it again, the others use it as it
  was; so too the counters;
- each tenant's counters (onward.store.shared_claim_reads's `SharedCounters`), for COUNTERS_SHARE_MS, with the writes
  of this process since counted in (`committed`: its claims, so that its threads do not all pick the same
  tenant and shard, and its attempts' ends, retries and releases);
- each ready queue's head (`SharedDueHeads`), for DUE_HEAD_SHARE_MS while it holds due jobs not handed
  out: each of its jobs is handed to one claim of the process at a time (its threads do not race for one
  job), in due order (`ClaimOrder`: spread while the process finds other processes taking the queue's jobs),
  and given back when that claim did not take it for want of a slot; a queue whose shared head ran out is
  read again (by one claim: the others wait for that read).
What is shared only chooses what to try: every claim commits through its transaction's conditions (the
job row's version and state, the RUNNING counter's cap in `Admission`, a flex's checks), which refuse what
a stale read showed (a job another process took: the claim tries the next). And no claim concludes from a
shared read that nothing is due: "nothing due" in a queue, and a park, come from a read of that queue the
claim made itself; a claim that found nothing reads again what it shared, the counters, then the head; a
flex (a cap passed) is decided from counters the claim read itself. Only a worker's poll (`polling`) takes
"nothing" from another claim's own reads less than NOTHING_SHARE_MS old (onward.store.head_life.NothingFound).
"""

from __future__ import annotations

import functools
import math
import random
import threading
from collections.abc import Collection
from enum import StrEnum

from onward.domain.clock import Clock, EpochMs
from onward.domain.dispatch import Candidate, DispatchOrder, aged_ms, dispatch_order
from onward.domain.models import Lease
from onward.store.claim_order import ClaimOrder
from onward.store.claim_take import AdmissionRefused, FlexRefused, LiftMet, NotTaken, Take
from onward.store.claim_window import WINDOW_SLACK_MS, HeadWindow, rekeyed, served_next
from onward.store.head_life import HeadLife, NothingFound
from onward.store.pauses import Switches, paused
from onward.store.ports.lease_index import LeaseIndex
from onward.store.ports.parking import Parking
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import ActiveEntry, ActiveHead, DueJob
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import QueueEntry, TenantState
from onward.store.ports.write_plans import Admission, RunningUpdate, WaitingUpdate
from onward.store.running_slots import RunningSlots
from onward.store.shared_claim_reads import QueueKey, SharedCounters, SharedDueHeads, counted_lift, counted_write
from onward.store.tenants import TenantRegistry
from onward.store.wake_schedule import WakeSchedule

HEAD_PER_SHARD = 16  # KEYS_ONLY entries of about 100 bytes: 16 cost a Query what 4 do (0.5 read units per 4 KB)
NOTHING_SHARE_MS = 250  # a claim that found nothing on its own reads this recently answers the process's next ones
HEAD_CACHE_MS = 250  # a process claiming back to back reads the head about this often: not once per claim
HEAD_EVERY_CLAIM_GAP_MS = 100  # a process claiming this far apart reads it at every claim (onward.store.head_life)
CANDIDATE_TENANTS = 8
CANDIDATES_PER_QUERY = 8
READ_WAIT_S = 1.0  # the longest a claim waits for another claim's read of a queue's head before reading it
REKEYS_PER_CLAIM = 16  # at most this many UpdateItems of keys per claim (the served entry's is in its transaction)
REKEY_GAP_MS = WINDOW_SLACK_MS  # a key of a tenant examined this far behind it is raised
SERVED_REKEY_GAP_MS = 0.0  # the served entry's key, raised by the claim's transaction, which writes it anyway
HEAD_REREADS = 2  # reads of the head a claim makes after its first, when the keys it examined were far behind
REREAD_DEEPER = 2  # each of them reads this many times as many entries per partition (a full page hid some)
MAX_FLEX_CHECKS = 80  # condition checks of a flexing claim (a transaction holds at most 100 actions)
MAX_ROUNDS = 25
WAKE_PER_SHARD = 16
NO_DUE_BOUND: EpochMs = 2 ** 62  # a queue's head read due or not (the index is in due order)


class _FlexOnSharedCounters(Exception):
    """A claim would flex (pass a cap) on counters it did not read itself: it decides again from fresh ones."""


class _Found(StrEnum):
    NOTHING_DUE = "nothing_due"
    AT_CAP = "at_cap"


# --- the claim ---------------------------------------------------------------------------------------------

class Claimer:
    """The claim path of one JobStore, shared by its worker threads. Thread-safe."""

    def __init__(self, indexes: LeaseIndex, counters: TenantCounters, parking: Parking, registry: TenantRegistry,
                 clock: Clock, rng: random.Random, take: Take, switches: Switches) -> None:
        self._indexes = indexes
        self._tenants = counters
        self._parking = parking
        self._registry = registry
        self._clock = clock
        self._rng = rng
        self._take = take
        self._switches = switches  # pauses and the drain switch, cached (onward.store.pauses: the claim's part)
        self._lock = threading.Lock()
        self._wake = WakeSchedule()
        self._head: tuple[EpochMs, ActiveHead] | None = None
        self._head_readers = 0  # claims reading the head now
        self._head_life = HeadLife(HEAD_CACHE_MS, HEAD_EVERY_CLAIM_GAP_MS)
        self._nothing = NothingFound(NOTHING_SHARE_MS)
        self._counters = SharedCounters()
        self._due_heads = SharedDueHeads()
        self._order = ClaimOrder(rng)
        self._local = threading.local()  # shared_head, shared_counters: whether this thread's claim round used them

    def claim(self, worker_id: str, lease_ms: int, *, polling: bool = False) -> Lease | None:
        """Lease the next due job in fair order, None when no job is due (see the module's docstring);
        `polling` (a worker's poll for work): None also when another claim of the process found nothing on
        its own reads within NOTHING_SHARE_MS (onward.store.head_life.NothingFound)."""
        self._wake_parked()
        started = self._clock()
        fresh_head = fresh_counters = False  # read the `active` head / the counters now, not what the process shares
        for _ in range(MAX_ROUNDS):
            self._local.shared_head = self._local.shared_counters = False
            try:
                lease = self._claim_once(worker_id, lease_ms, fresh_head=fresh_head, fresh_counters=fresh_counters)
            except (FlexRefused, _FlexOnSharedCounters):  # (FlexRefused: a capped tenant came back below its cap)
                fresh_counters = True  # decide again from fresh counters
                continue
            except LiftMet as met:  # counted in, so that counters a moment behind do not send the lift again
                self._counters.update(met.tenant_id, functools.partial(counted_lift, lift_vt=met.lift_vt))
                continue
            if lease is not None:
                return lease
            # Nothing found in what the process shares: read it now before saying so, the counters first (one
            # request; they miss the jobs other processes created), then the head (a Query per partition).
            if self._local.shared_counters:
                fresh_counters = True
            elif self._local.shared_head:
                if polling and self._nothing.lately(started):
                    return None  # another claim's own reads showed nothing a moment ago: its worker backs off
                fresh_head = True
            else:
                self._nothing.found(started)  # (what this round read itself is as fresh as a second read would be)
                return None
        return None

    def jobs_entered(self) -> None:
        """The process wrote jobs into a queue (created, retried, released): its polls find them at once."""
        self._nothing.jobs_entered()

    def committed(self, running: RunningUpdate | None, waiting: WaitingUpdate | None) -> None:
        """The store committed a write that changed a tenant's counters so (its claims, and its attempts'
        ends, retries and releases): counted into the counters the process shares, which then differ from
        the table only by other processes' writes since they were read (whose claims and ends, about as
        many, about cancel out in a tenant's virtual time; counting only this process's claims would run
        its tenants' virtual times ahead, ended attempts counted as running, and lift them for nothing)."""
        if waiting is not None and waiting.delta > 0:
            self.jobs_entered()
        tenant_id = running.tenant_id if running is not None else waiting.tenant_id if waiting is not None else None
        if tenant_id is not None:
            self._counters.update(tenant_id, lambda state: counted_write(state, running, waiting))

    def _wake_parked(self) -> None:
        """Wake the parked entries that are due, when a pass is (onward.store.wake_schedule). A woken entry reaches
        the claims as a new one does: in the next read of the `active` head."""
        now = self._clock()
        if not self._wake.pass_due(now):
            return
        due = self._parking.parked_due(now, WAKE_PER_SHARD)
        if len(due) >= WAKE_PER_SHARD:
            self._wake.again()  # (a partition's page may have been full: more may be due)
        for tenant_id, shard in due:
            self._parking.wake(tenant_id, shard, now)

    def _active_head(self, *, fresh: bool, per_shard: int = HEAD_PER_SHARD) -> ActiveHead:
        """The head of the `active` index: the cached one while it is young for how often the process claims
        (onward.store.head_life), else read now, as when `fresh` (the cached one a little longer while another
        claim of the process reads it again: its threads do not all read it)."""
        now = self._clock()
        with self._lock:
            if not fresh:  # (a claim's round that reads the head anyway is not a claim of its own)
                self._head_life.claimed(now)
            young = self._head is not None and self._head_life.young(now - self._head[0])
            if not fresh and self._head is not None and (young or self._head_readers):
                self._local.shared_head = True
                return self._head[1]
            self._head_readers += 1
        try:
            head = self._tenants.active_head(per_shard)
            with self._lock:
                self._head = (now, head)
        finally:
            with self._lock:
                self._head_readers -= 1
        return head

    def _leave_head(self, tenant_id: str, shard: int) -> None:
        """Take an entry that left the `active` index out of this process's cached head (so the claims reading
        the cache do not try it again)."""
        with self._lock:
            if self._head is not None:
                read_at, head = self._head
                self._head = (read_at, ActiveHead([entry for entry in head
                                                   if (entry.tenant_id, entry.shard) != (tenant_id, shard)],
                                                  head.unread_from))

    def _deactivate(self, tenant_id: str, shard: int) -> None:
        """Take an entry with nothing waiting out of the index, and out of this process's cached head."""
        self._tenants.deactivate(tenant_id, shard)
        self._leave_head(tenant_id, shard)

    def _claim_once(self, worker_id: str, lease_ms: int, *, fresh_head: bool, fresh_counters: bool
                    ) -> Lease | None:
        window = HeadWindow(self._active_head(fresh=fresh_head))
        if not window:
            return None
        states: dict[str, TenantState] = {}
        shared: set[str] = set()
        passed: set[str] = set()  # tenants this claim tried and did not serve
        reached_cap: list[Candidate] = []
        order = DispatchOrder((), ())
        rereads = 0
        while True:
            best = next((candidate for candidate in order.within_cap if candidate.tenant_id not in passed), None)
            if window.more() and (best is None or not window.trusts(best.virtual_time)):
                # The best tenant examined may come after one not examined yet: examine the next window.
                order = self._examine(window.take(CANDIDATE_TENANTS), states, shared, fresh_counters, window)
                continue
            if window.read_short(best.virtual_time if best is not None else math.inf) and rereads < HEAD_REREADS:
                # The keys examined were behind (now raised), or a partition's full page hid entries that
                # may come first or be the only ones below their caps (behind tenants at their caps, whose
                # keys are right; a cap flexes only when none is): read the head again, deeper (entries of a
                # hundred bytes: 32 or 64 a partition cost 0.5 or 1 read unit).
                rereads += 1
                window = HeadWindow(self._active_head(fresh=True, per_shard=HEAD_PER_SHARD * REREAD_DEEPER ** rereads),
                                    examined=states)
                continue
            if best is None:
                break
            passed.add(best.tenant_id)
            found = self._claim_from(states[best.tenant_id], best, worker_id, lease_ms,
                                     tidy=best.tenant_id not in shared)
            if isinstance(found, Lease):
                return found
            if found is _Found.AT_CAP:  # it reached its cap while this claim read it; it still has work
                reached_cap.append(best)
        # No tenant below its cap has a due job: serve the capped ones past their caps, in fair order. The
        # flexing transaction also checks that the other capped tenants are still at their caps (they were
        # when the counters were read): if one came back below, it goes first (FlexRefused). Counters the
        # process shared may miss a tenant's new jobs (below its cap, it would go first): read them now.
        capped = sorted([*order.flex, *reached_cap], key=lambda candidate: candidate.virtual_time)
        if capped and shared:
            raise _FlexOnSharedCounters()
        for candidate in capped:
            others = [(other.tenant_id, shard, cap) for other in capped if other is not candidate
                      for shard, cap in enumerate(states[other.tenant_id].entry_caps()) if cap and cap > 0]
            found = self._claim_from(states[candidate.tenant_id], candidate, worker_id, lease_ms, tidy=True,
                                     flex_while_at_cap=tuple(others[:MAX_FLEX_CHECKS]))
            if isinstance(found, Lease):
                return found
        return None

    def _examine(self, seen: dict[str, list[ActiveEntry]], states: dict[str, TenantState], shared: set[str],
                 fresh_counters: bool, window: HeadWindow) -> DispatchOrder:
        """Read the settings and counters of the tenants `seen` (a window of the head) into `states` (`shared`:
        those the process shared), tidy their entries, and order every tenant examined so far."""
        seen = {tenant: entries for tenant, entries in seen.items() if not self._switches().tenant_paused(tenant)}
        settings = self._registry.settings(list(seen))
        read, read_shared = self._counters.read_through(
            self._tenants, {settings[tenant_id]: {entry.shard for entry in entries}
                            for tenant_id, entries in seen.items() if tenant_id in settings},
            self._clock(), fresh=fresh_counters)
        if read_shared:
            self._local.shared_counters = True
        states.update(read)
        shared.update(read_shared)
        now = self._clock()
        order = dispatch_order([state.load() for state in states.values()], now, self._registry.virtual_clock(),
                               window.bound())
        self._tidy(seen, read, order.within_cap + order.flex, read_shared, served_next(order.within_cap, window))
        return order

    def _tidy(self, seen: dict[str, list[ActiveEntry]], states: dict[str, TenantState],
              candidates: tuple[Candidate, ...], shared: Collection[str], serving: str | None) -> None:
        """Take entries with nothing waiting out of the index as counters this claim read show them (shared
        ones miss other processes' new jobs; one out already, as a stale head shows it, costs no write), and
        raise the keys of entries whose tenant (but `serving`: served_next) is over REKEY_GAP_MS past them."""
        for tenant_id, entries in ((tenant, entries) for tenant, entries in seen.items() if tenant not in shared):
            for entry in entries:
                queue = states[tenant_id].queues.get(entry.shard, None) if tenant_id in states else None
                if tenant_id in states and (queue is None or queue.active_vt is None):
                    self._leave_head(tenant_id, entry.shard)
                elif queue is None or queue.waiting <= 0:
                    self._deactivate(tenant_id, entry.shard)
        raised: list[tuple[str, int, float]] = []
        for candidate in (candidate for candidate in candidates if candidate.tenant_id != serving):
            for entry in seen.get(candidate.tenant_id, ()):
                # (an entry with one job waiting is left: the claim serving it takes it out of the index, so
                # moving its index entry now would cost 2 write units for a place it keeps only until then)
                queue = states[candidate.tenant_id].queues.get(entry.shard)
                if (len(raised) < REKEYS_PER_CLAIM and queue is not None and queue.waiting > 1
                        and candidate.virtual_time - entry.active_vt > REKEY_GAP_MS):
                    self._tenants.rekey(candidate.tenant_id, entry.shard, candidate.virtual_time)
                    raised.append((candidate.tenant_id, entry.shard, candidate.virtual_time))
        if raised:
            with self._lock:
                if self._head is not None:
                    self._head = (self._head[0], rekeyed(self._head[1], raised))

    def _claim_from(
        self,
        state: TenantState,
        candidate: Candidate,
        worker_id: str,
        lease_ms: int,
        *,
        tidy: bool,
        flex_while_at_cap: tuple[tuple[str, int, int], ...] | None = None,
    ) -> Lease | _Found:
        """Claim one due job of this tenant within its cap, or past it (`flex_while_at_cap` given: while
        those tenants' shards are at their caps). NOTHING_DUE: none of its entries read had a due job it
        had not tried (jobs already tried are not tried again, so a lagging index cannot keep it here).
        `tidy`: `state` was read by this claim, so an entry whose last job it takes leaves the index."""
        tenant = state.tenant  # (a returning tenant's lift: raised by the claim's transaction, RunningSlots.lift_vt)
        slots = RunningSlots([usage.running for usage in state.running_by_shard][:tenant.running_shards],
                             tenant.shard_caps(), state.entry_caps(), candidate.lift_offset_ms)
        entries = sorted((entry for entry in state.queues.values() if entry.waiting > 0),
                         key=lambda entry: (entry.active_vt if entry.active_vt is not None else -1.0, entry.shard))
        now = self._clock()
        heads: list[tuple[int, int, tuple[EpochMs, str], QueueEntry]] = []
        for entry in entries:
            found_due = False
            earliest: list[EpochMs] = []  # the earliest job of each band none of whose jobs is due
            for band in entry.bands_with_work():
                key = (tenant.tenant_id, ReadyQueue(entry.shard, band))
                due = self._due_heads.shown(key, now)
                issued: int | None = None
                if due is None:
                    issued = self._due_heads.join_or_begin_read(key, READ_WAIT_S)
                    if issued is None:  # another claim's read of it was under way: its jobs are shared now
                        now = self._clock()
                        due = self._due_heads.shown(key, now)
                if due is None:
                    # One read of the queue's head, due or not: the due jobs come first (the index is in due
                    # order), and when none is, its first job says how long the entry may be parked.
                    read, left = self._read_due(key, NO_DUE_BOUND, issued)
                    if not read or read[0].due_at > now:
                        earliest += [read[0].due_at] if read else []
                        continue
                    due = [job for job in left if job.due_at <= now]
                found_due = True  # (due jobs all handed to the process's other claims: not parked either)
                if due:
                    oldest = min(due, key=DueJob.rank)
                    heads.append((-aged_ms(band, oldest.due_at, now), -band, oldest.rank(), entry))
            if not found_due and earliest:
                self._park(entry, min(earliest), now)
        heads.sort(key=lambda head: head[:3])
        tried: set[str] = set()
        for _, band, _, entry in heads:
            last = tidy and entry.waiting <= 1  # likely its last job: out of the index unless one came meanwhile
            behind = entry.active_vt is not None and candidate.virtual_time - entry.active_vt > SERVED_REKEY_GAP_MS
            # (an entry about to leave the index is not re-keyed: moving its index entry costs 2 write units)
            active_vt = candidate.virtual_time if behind and not last else None
            found = self._claim_in(entry, ReadyQueue(entry.shard, -band), slots, active_vt, tried,
                                   worker_id, lease_ms, flex_while_at_cap)
            if isinstance(found, Lease):
                self._registry.served(candidate.virtual_time)
                if last:
                    self._deactivate(tenant.tenant_id, entry.shard)
                return found
            if found is _Found.AT_CAP:
                return found
        return _Found.NOTHING_DUE

    def _read_due(self, key: QueueKey, bound: EpochMs, issued: int | None = None
                  ) -> tuple[list[DueJob], list[DueJob]]:
        """Read a ready queue's head (its jobs due by `bound`, due order) and share it: the read, and the jobs
        it leaves to hand out (CANDIDATES_PER_QUERY, or all the queue has: it asks for as many more as it
        hides). `issued`: what `begin_read` answered, when the caller began the read."""
        hidden = self._due_heads.in_flight(key)
        for _ in range(MAX_ROUNDS):
            limit = CANDIDATES_PER_QUERY + hidden
            read, left = self._read_shared(key, bound, limit, issued)
            if len(read) < limit or len(left) >= CANDIDATES_PER_QUERY:
                break
            hidden, issued = len(read) - len(left), None
        return read, left

    def _read_shared(self, key: QueueKey, bound: EpochMs, limit: int, issued: int | None
                     ) -> tuple[list[DueJob], list[DueJob]]:
        tenant_id, queue = key
        if issued is None:
            issued = self._due_heads.begin_read(key)
        read: list[DueJob] | None = None
        try:
            read = self._indexes.due(tenant_id, queue, bound, limit)
        finally:
            left = self._due_heads.end_read(key, read, issued, self._clock())
        return read, left

    def _claim_in(self, entry: QueueEntry, queue: ReadyQueue, slots: RunningSlots, active_vt: float | None,
                  tried: set[str], worker_id: str, lease_ms: int,
                  flex_while_at_cap: tuple[tuple[str, int, int], ...] | None) -> Lease | _Found:
        """Claim a due job of one ready queue: those its shared head hands this claim, then those of a read
        of the queue made now, again while every job shown was taken by concurrent claims (else the claim
        would pass this tenant while it has due jobs). NOTHING_DUE only when this claim's own read shows no
        due job it has not tried (but jobs the process's other claims hold: theirs to take)."""
        key = (entry.tenant_id, queue)
        for _ in range(MAX_ROUNDS):
            while (job := self._due_heads.hand_out(key, tried, self._clock(), self._order.order)) is not None:
                tried.add(job.job_id)
                found = self._take_handed(key, job, slots, active_vt, worker_id, lease_ms, flex_while_at_cap)
                if found is not None:
                    return found
            issued = self._due_heads.join_or_begin_read(key, READ_WAIT_S)
            if issued is None:
                continue  # another claim of the process was reading this head: hand out from its read
            now = self._clock()
            _, left = self._read_due(key, now, issued)
            if all(job.job_id in tried for job in left):
                break
        return _Found.NOTHING_DUE

    def _take_handed(self, key: QueueKey, job: DueJob, slots: RunningSlots, active_vt: float | None, worker_id: str,
                     lease_ms: int, flex_while_at_cap: tuple[tuple[str, int, int], ...] | None
                     ) -> Lease | _Found | None:
        """`_take_within` on a job handed out of the queue's shared head: settled there when taken or found
        not claimable, given back when not taken for want of a slot or when the take raised. A job found
        not claimable that this process had not settled before was taken by another process since the read
        (not paused, not ended meanwhile): the queue is contended (`ClaimOrder`)."""
        found: Lease | _Found | NotTaken | None = _Found.AT_CAP  # (what a take that raised leaves: given back)
        try:
            found = self._take_within(key, job, slots, active_vt, worker_id, lease_ms, flex_while_at_cap)
        finally:
            now = self._clock()
            if found is None and not self._due_heads.settled_before(key, job) and not paused(self._switches(), job):
                self._order.contended(key, now)
            self._due_heads.settle(key, job, now, give_back=found is _Found.AT_CAP)
        return None if found is NotTaken.ENDED else found

    def _take_within(self, key: QueueKey, job: DueJob, slots: RunningSlots, active_vt: float | None, worker_id: str,
                     lease_ms: int, flex_while_at_cap: tuple[tuple[str, int, int], ...] | None
                     ) -> Lease | _Found | NotTaken | None:
        """Claim `job` on a RUNNING shard with room (another one when the first is found full): the
        Lease, AT_CAP when every shard is full, None (or NotTaken.ENDED) when the job was not claimable."""
        tenant_id, _ = key
        flexing = flex_while_at_cap is not None
        while True:
            shard = slots.pick(self._rng, flex=flexing, prefer=key[1].shard)
            if shard is None:
                return _Found.AT_CAP
            admission = Admission(running_shard=shard, cap=None if flexing else slots.admission_cap(shard),
                                  active_vt=active_vt, others_at_cap=flex_while_at_cap or (), lift_vt=slots.lift_vt)
            try:
                return self._take(job, worker_id, lease_ms, admission)  # (its commit calls `committed`)
            except AdmissionRefused:
                slots.full(shard)
                self._counters.forget(tenant_id)  # its shared counters showed room the shard did not have

    def _park(self, entry: QueueEntry, until: EpochMs, now: EpochMs) -> None:
        """Park an entry none of whose jobs is due, until its earliest (`until`, as its bands' heads read) is
        due, and take it out of this process's cached head (the claims reading the cache do not try it again)."""
        # (until <= now: the index lags behind a job that is due: not parked)
        if until <= now or not self._parking.park(entry.tenant_id, entry.shard, until, entry.entered):
            return
        self._wake.parked(until)
        self._leave_head(entry.tenant_id, entry.shard)

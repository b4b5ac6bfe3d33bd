"""What the claims of one process share (onward.store.claims): the tenants' counters as a claim last read them, with
the process's own writes since counted in, and the ready queues' heads, each job handed to one claim at a
time. Only what a claim tries comes from here: its transaction's conditions decide what it takes."""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.dispatch import Usage
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import DueJob
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.ports.tenant_values import Tenant, TenantState
from onward.store.ports.write_plans import RunningUpdate, WaitingUpdate

# A ready queue's head read by one claim serves the process's other claims this long, while it holds due jobs
# not handed out: a burst's queue is read about once per CANDIDATES_PER_QUERY claims instead of once per claim.
# Longer, more of its jobs would be gone to other processes when tried (each a refused transaction) and a job
# of a higher band created meanwhile would wait behind it longer; as long as the `active` head is kept.
DUE_HEAD_SHARE_MS = 250
# Tenant counters read by one claim serve the process's other claims this long, with the process's own writes
# counted in: other processes' claims, ends and new jobs reach the fair order at most this late (as a tenant's
# new entry reaches the cached `active` head). Caps do not rest on it: the transaction's Admission holds them
# and a flex (a cap passed) reads fresh counters.
COUNTERS_SHARE_MS = 250
SETTLED_KEEP_MS = 10_000  # a job taken is hidden from the reads under way then: remembered this long (a timeout)

QueueKey = tuple[str, ReadyQueue]  # a tenant's ready queue: (tenant id, queue)
JobMark = tuple[str, EpochMs]  # a job as a queue's head showed it: (job id, due time)
# The order in which to hand out a queue's due jobs, as of a time (onward.store.claim_order.ClaimOrder.order).
HandOutOrder = Callable[[QueueKey, list[DueJob], EpochMs], list[DueJob]]


def counted_write(state: TenantState, running: RunningUpdate | None, waiting: WaitingUpdate | None) -> TenantState:
    """`state` after a committed write changed its counters as its transaction did: `running` on that RUNNING
    counter (an attempt claimed or ended), `waiting` on the queue entry it names if `state` holds it (a job
    leaving it: one fewer waiting, re-keyed to its `active_vt` if in the `active` index; entering: one more,
    counted in `entered`, joining the index at its `active_vt` unless there; an entry that left the index
    may come back at the key it had, which a read would show: only the order of the tenant's entries, and
    whether the claim re-keys the one it serves, can differ until then)."""
    usage, by_shard, old = state.usage, state.running_by_shard, state.old_running
    if running is not None:
        shards = [*by_shard, *[Usage()] * (running.shard + 1 - len(by_shard))]
        shards[running.shard] = shards[running.shard].apply(running.usage)
        if running.lift_vt is not None:  # (a claim's lift, raised on the counter it charged)
            shards[running.shard] = shards[running.shard].lifted(running.lift_vt)
        usage, by_shard = Usage.combined(shards), tuple(shards)
        if running.old_counter and running.shard < len(old):
            old = tuple(count + running.usage.running if shard == running.shard else count
                        for shard, count in enumerate(old))
    queues = state.queues
    entry = queues.get(waiting.queue.shard) if waiting is not None else None
    if waiting is not None and entry is not None:
        band = waiting.queue.priority
        bands = {**entry.bands, band: max(0, entry.bands.get(band, 0) + waiting.delta)}
        if waiting.delta > 0:
            joined = entry.active_vt if entry.active_vt is not None else waiting.active_vt
            entry = replace(entry, bands=bands, active_vt=joined, entered=entry.entered + waiting.delta)
        else:
            keyed = entry.active_vt if waiting.active_vt is None or entry.active_vt is None else waiting.active_vt
            entry = replace(entry, bands=bands, active_vt=keyed,
                            returned_at=None if waiting.served else entry.returned_at)
        queues = {**queues, waiting.queue.shard: entry}
    return TenantState(state.tenant, usage, queues, by_shard, old)


def counted_lift(state: TenantState, lift_vt: int) -> TenantState:
    """`state` with its lift at least `lift_vt` (a tenant's lift is its counters' highest: raised on the first)."""
    running = list(state.running_by_shard) or [Usage()]
    running[0] = running[0].lifted(lift_vt)
    return replace(state, usage=Usage.combined(running), running_by_shard=tuple(running))


class _Counted(NamedTuple):
    read_at: EpochMs
    shards: frozenset[int]  # the ready shards whose queue entries were read
    state: TenantState


class SharedCounters:
    """The tenants' counters as this process's claims last read them, with its writes since counted in
    (`update`), for COUNTERS_SHARE_MS, or a little longer while a claim of the process reads them again (so
    that its threads do not all read them at once). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted: dict[str, _Counted] = {}
        self._reading: Counter[str] = Counter()  # tenants whose counters a claim is reading

    def shared(self, wanted: Mapping[Tenant, Collection[int]], now: EpochMs) -> dict[str, TenantState]:
        """The states of the wanted tenants that can be shared (read less than COUNTERS_SHARE_MS ago, or being
        read again; with the same settings and at least the ready shards wanted), each with the wanted
        shards' queue entries only (as a read of them would answer)."""
        found: dict[str, TenantState] = {}
        with self._lock:
            for tenant, shards in wanted.items():
                counted = self._counted.get(tenant.tenant_id)
                if (counted is None or counted.state.tenant != tenant or not counted.shards.issuperset(shards)
                        or (now - counted.read_at >= COUNTERS_SHARE_MS and not self._reading[tenant.tenant_id])):
                    continue
                found[tenant.tenant_id] = replace(counted.state, queues={
                    shard: entry for shard, entry in counted.state.queues.items() if shard in shards})
        return found

    def reading(self, tenant_ids: Collection[str], *, done: bool = False) -> None:
        """A claim starts reading these tenants' counters (`done`: it is done, read or not)."""
        with self._lock:
            for tenant_id in tenant_ids:
                self._reading[tenant_id] += -1 if done else 1
                if self._reading[tenant_id] <= 0:
                    del self._reading[tenant_id]

    def read_through(self, reader: TenantCounters, wanted: Mapping[Tenant, Collection[int]], now: EpochMs, *,
                     fresh: bool) -> tuple[dict[str, TenantState], set[str]]:
        """The wanted tenants' counters (RUNNING counters, and the queue entries of the ready shards wanted):
        those the process shares unless `fresh`, the others read through `reader` in one batch and kept;
        and the ids of the shared ones."""
        states = {} if fresh else self.shared(wanted, now)
        shared = set(states)
        missing = {tenant: shards for tenant, shards in wanted.items() if tenant.tenant_id not in shared}
        if missing:
            reading = [tenant.tenant_id for tenant in missing]
            self.reading(reading)
            try:
                read = reader.tenant_counters(missing)
                self.keep(missing, read, now)
            finally:
                self.reading(reading, done=True)
            states.update(read)
        return states, shared

    def keep(self, wanted: Mapping[Tenant, Collection[int]], states: Mapping[str, TenantState],
             read_at: EpochMs) -> None:
        """Share the states read for `wanted` at `read_at` (and drop those too old to share)."""
        with self._lock:
            for tenant, shards in wanted.items():
                if (state := states.get(tenant.tenant_id)) is not None:
                    self._counted[tenant.tenant_id] = _Counted(read_at, frozenset(shards), state)
            for tenant_id in [tenant_id for tenant_id, counted in self._counted.items()
                              if read_at - counted.read_at >= COUNTERS_SHARE_MS and not self._reading[tenant_id]]:
                del self._counted[tenant_id]

    def update(self, tenant_id: str, change: Callable[[TenantState], TenantState]) -> None:
        """Count a change this process made to a tenant's counters into its shared state (if it has one)."""
        with self._lock:
            counted = self._counted.get(tenant_id)
            if counted is not None:
                self._counted[tenant_id] = counted._replace(state=change(counted.state))

    def forget(self, tenant_id: str) -> None:
        """Stop sharing a tenant's state: a refusal showed it behind."""
        with self._lock:
            self._counted.pop(tenant_id, None)


def _mark(job: DueJob) -> JobMark:
    return job.job_id, job.due_at


@dataclass
class _Head:
    read_at: EpochMs  # when the read answered
    jobs: list[DueJob]  # those not handed out, in due order (DueJob.rank)


class SharedDueHeads:
    """The ready queues' heads as this process's claims last read them, for DUE_HEAD_SHARE_MS; each job is
    handed to one claim of the process at a time. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_done = threading.Condition(self._lock)
        self._heads: dict[QueueKey, _Head] = {}
        self._in_flight: dict[QueueKey, set[JobMark]] = {}  # handed out, their claims not done with them
        self._reading: Counter[QueueKey] = Counter()  # reads under way
        self._settled: deque[tuple[int, EpochMs, QueueKey, JobMark]] = deque()  # (sequence, when, queue, job)
        self._settled_marks: Counter[tuple[QueueKey, JobMark]] = Counter()  # the same, to look up
        self._sequence = 0  # jobs settled so far

    def begin_read(self, key: QueueKey) -> int:
        """A read of the queue's head is about to be sent: the settled jobs' count now (the read hides those
        settled after it, taken or found gone while it was under way: it may still show them)."""
        with self._lock:
            self._reading[key] += 1
            return self._sequence

    def join_or_begin_read(self, key: QueueKey, wait_s: float) -> int | None:
        """When another claim's read of the queue's head is under way, wait for it (up to `wait_s`) and None:
        its jobs are shared then, hand them out rather than read the same head again. Else `begin_read`."""
        with self._lock:
            if self._reading[key]:
                self._read_done.wait_for(lambda: not self._reading[key], wait_s)
                return None
            self._reading[key] += 1
            return self._sequence

    def end_read(self, key: QueueKey, jobs: list[DueJob] | None, issued: int, now: EpochMs) -> list[DueJob]:
        """A read of the queue's head (sent at settled count `issued`) answered `jobs` (None: it failed): shared
        as the queue's head, less the jobs handed out and those settled since it was sent. The jobs it leaves
        to hand out (due order)."""
        with self._lock:
            self._reading[key] -= 1
            if self._reading[key] <= 0:
                del self._reading[key]
            self._read_done.notify_all()
            if jobs is None:
                return []
            hidden = set(self._in_flight.get(key, ()))
            for sequence, _, queue, mark in reversed(self._settled):
                if sequence <= issued:
                    break
                if queue == key:
                    hidden.add(mark)
            left = sorted((job for job in jobs if _mark(job) not in hidden), key=DueJob.rank)
            self._heads[key] = _Head(now, left)
            self._prune(now)
            return list(left)

    def in_flight(self, key: QueueKey) -> int:
        """How many jobs of the queue are handed out to claims not done with them."""
        with self._lock:
            return len(self._in_flight.get(key, ()))

    def shown(self, key: QueueKey, now: EpochMs) -> list[DueJob] | None:
        """The due jobs left to hand out in the queue's shared head (due order); None when it has none, or
        when it was read DUE_HEAD_SHARE_MS ago or more (read the queue then)."""
        with self._lock:
            head = self._heads.get(key)
            if head is None or now - head.read_at >= DUE_HEAD_SHARE_MS:
                return None
            return [job for job in head.jobs if job.due_at <= now] or None

    def hand_out(self, key: QueueKey, tried: Collection[str], now: EpochMs, order: HandOutOrder) -> DueJob | None:
        """The next job of the queue's shared head for one claim: the first in `order` of its due jobs the
        claim has not tried, out of the head until `settle`; None when there is none (or the head is too old)."""
        with self._lock:
            head = self._heads.get(key)
            if head is None or now - head.read_at >= DUE_HEAD_SHARE_MS:
                return None
            due = [job for job in head.jobs if job.due_at <= now and job.job_id not in tried]
            if not due:
                return None
            job = order(key, due, now)[0]
            head.jobs = [other for other in head.jobs if other.job_id != job.job_id]
            self._in_flight.setdefault(key, set()).add(_mark(job))
            return job

    def settle(self, key: QueueKey, job: DueJob, now: EpochMs, *, give_back: bool) -> None:
        """The claim `job` was handed to is done with it: settled (taken, or found not claimable), or given
        back to the queue's shared head (`give_back`: not taken for want of a slot, or the claim failed)."""
        mark = _mark(job)
        with self._lock:
            in_flight = self._in_flight.get(key)
            if in_flight is not None:
                in_flight.discard(mark)
                if not in_flight:
                    del self._in_flight[key]
            if not give_back:
                self._sequence += 1
                self._settled.append((self._sequence, now, key, mark))
                self._settled_marks[key, mark] += 1
                return
            head = self._heads.get(key)
            if head is not None and all(other.job_id != job.job_id for other in head.jobs):
                head.jobs = sorted([*head.jobs, job], key=DueJob.rank)

    def settled_before(self, key: QueueKey, job: DueJob) -> bool:
        """Whether a claim of this process settled this job (as shown: same due time) in the last
        SETTLED_KEEP_MS: taken, or found gone, by this process."""
        with self._lock:
            return self._settled_marks[key, _mark(job)] > 0

    def _prune(self, now: EpochMs) -> None:
        for key in [key for key, head in self._heads.items() if now - head.read_at >= DUE_HEAD_SHARE_MS]:
            del self._heads[key]
        while self._settled and now - self._settled[0][1] >= SETTLED_KEEP_MS:
            _, _, key, mark = self._settled.popleft()
            self._settled_marks[key, mark] -= 1
            if self._settled_marks[key, mark] <= 0:
                del self._settled_marks[key, mark]

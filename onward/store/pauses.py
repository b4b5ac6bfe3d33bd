"""Pauses and the drain switch as the store keeps them (onward.domain.pauses), and as one process's claims see them.

Where they are kept: a `FlowBook`, on DynamoDB onward.store.dynamo.pauses.DynamoFlowBook (a few items in one
partition of the jobs table), in memory `MemoryFlowBook`; tests/contract/test_pause_contract.py runs one suite
over both. A pause is an item put (idempotent) and deleted by its resume; the drain switch is one item.

How the claim uses them (`FlowControl.switches`, cached per process for FLOW_CACHE_MS, as tenants' settings
are: onward.store.tenants.TENANT_CACHE_MS): while the drain switch is on, a claim starts nothing; a paused
tenant is left out of the claim's fair order (not served, not flexed past its cap, not lifted, its `active`
entries left where they are; the caps of others flex as if it waited for nothing); a job of a paused type is
not taken (the claim passes to the next job of the queue). So a pause, a resume or the drain switch takes effect
in every process within FLOW_CACHE_MS (the process that wrote it: at once); a claim that read the switches
before may still start a job in that moment. A claim costs no read or write for them: each process reads the
partition once per FLOW_CACHE_MS, whatever is paused.

A tenant's resume lifts it to the system virtual clock when it is below it (`FlowControl.resume`): a paused
tenant is not served, so without the lift it would come back with the credit of the whole pause and hold the
pool until it caught up. It owes nothing for the pause either: while paused it is not charged (its running
attempts are, as they run).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from onward.domain.clock import Clock, EpochMs
from onward.domain.dispatch import candidate, pool_mean_ms
from onward.domain.lifecycle import Refusal, RefusalReason
from onward.domain.models import Job
from onward.domain.pauses import FlowSwitches, Pause
from onward.store.held_jobs import Holding, Released, pause_hold_key
from onward.store.ports.rows import DueJob
from onward.store.ports.tenant_counters import TenantCounters
from onward.store.tenants import TENANT_CACHE_MS, TenantRegistry

# The switches as a process's claims see them (FlowControl.switches: cached).
Switches = Callable[[], FlowSwitches]
FLOW_CACHE_MS = TENANT_CACHE_MS  # how late a pause, a resume or the drain switch reaches another process's claims
MAX_PAUSES = 1_000  # pauses in force at once (one Query of a small partition reads them all)


class TooManyPauses(Exception):
    """MAX_PAUSES are in force: a new one is refused (resume some first)."""


class FlowBook(Protocol):
    """Where pauses and the drain switch are kept (both backends keep the same)."""

    def switches(self) -> FlowSwitches:
        """Every pause in force and the drain switch, read now (as last written)."""

    def pause(self, pause: Pause, at: EpochMs) -> bool:
        """Put the pause in force (kept as it was if already in force): False when it already was."""

    def resume(self, pause: Pause) -> bool:
        """Lift the pause: False when it was not in force."""

    def set_draining(self, on: bool, at: EpochMs) -> bool:
        """Turn the drain switch on or off: False when it already was so."""

    def mark_unswept(self, pause: Pause, at: EpochMs) -> None:
        """Note that `pause`'s held jobs are being put back (idempotent): until `mark_swept`, the switches name it
        in `unswept`, so a sweep cut short is finished by the reaper."""

    def mark_swept(self, pause: Pause) -> None:
        """Every job `pause` held is back (idempotent)."""


class MemoryFlowBook:
    """A FlowBook in this process's memory (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses: dict[Pause, EpochMs] = {}
        self._draining = False
        self._unswept: set[Pause] = set()

    def switches(self) -> FlowSwitches:
        with self._lock:
            return FlowSwitches(frozenset(self._pauses), self._draining, frozenset(self._unswept))

    def pause(self, pause: Pause, at: EpochMs) -> bool:
        with self._lock:
            if pause in self._pauses:
                return False
            if len(self._pauses) >= MAX_PAUSES:
                raise TooManyPauses(f"{MAX_PAUSES} pauses are in force: resume some first")
            self._pauses[pause] = at
            return True

    def resume(self, pause: Pause) -> bool:
        with self._lock:
            return self._pauses.pop(pause, None) is not None

    def set_draining(self, on: bool, at: EpochMs) -> bool:
        with self._lock:
            changed, self._draining = self._draining != on, on
            return changed

    def mark_unswept(self, pause: Pause, at: EpochMs) -> None:
        with self._lock:
            self._unswept.add(pause)

    def mark_swept(self, pause: Pause) -> None:
        with self._lock:
            self._unswept.discard(pause)


class FlowControl:
    """Pauses and the drain switch for one JobStore: the operator's writes, and the cached read its claims make.
    Thread-safe."""

    def __init__(self, book: FlowBook, registry: TenantRegistry, counters: TenantCounters, clock: Clock,
                 holding: Holding) -> None:
        self._book = book
        self._holding = holding
        self._registry = registry
        self._counters = counters
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[EpochMs, FlowSwitches] | None = None

    def switches(self) -> FlowSwitches:
        """The switches as the claims of this process see them: read at most once per FLOW_CACHE_MS."""
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < FLOW_CACHE_MS:
                return self._cached[1]
        return self.current()

    def current(self) -> FlowSwitches:
        """The switches read now (an operator's read), kept for this process's claims."""
        now = self._clock()
        read = self._book.switches()
        with self._lock:
            self._cached = (now, read)
        return read

    def pause(self, pause: Pause) -> bool:
        """Put `pause` in force (False: it already was). TooManyPauses past MAX_PAUSES."""
        added = self._book.pause(pause, self._clock())
        self.current()
        return added

    def resume(self, pause: Pause) -> bool:
        """Lift `pause` and release every job it held (False: it was not in force)."""
        return self.resume_and_release(pause)[0]

    def resume_and_release(self, pause: Pause, *, budget_s: float | None = None,
                           progress: Callable[[int], None] | None = None) -> tuple[bool, Released]:
        """Lift `pause` (False: it was not in force), then put back the jobs of a paused type held aside under it,
        with their due times (onward.store.held_jobs), for at most `budget_s` (`more`: call again, the pause
        lifted or not: the sweep goes on). A tenant's resume lifts it to the clock first (the module's
        docstring), so its first claims after find it where a returning tenant would be. The pause goes before
        the sweep: a hold racing it fails its condition, so the sweep misses none."""
        if pause.job_type is None and pause.tenant_id is not None and pause in self.current().pauses:
            self._lift_to_clock(pause.tenant_id)
        if pause.job_type is not None:  # before the lift: a resume that stops anywhere after it leaves the mark
            self._book.mark_unswept(pause, self._clock())
        lifted = self._book.resume(pause)
        self.current()
        if pause.job_type is None:
            return lifted, Released(0, more=False)
        return lifted, self._sweep(pause, budget_s, progress)

    def sweep_unswept(self, *, budget_s: float) -> Released:
        """Finish the sweeps of resumed type pauses that stopped before every held job was back (an HTTP resume
        answered `more` and was not called again, or a process died): the reaper calls this on every pass. A
        pause put in force again since keeps its jobs held (its own resume sweeps them)."""
        started = time.monotonic()
        released, more = 0, False
        switches = self.current()
        for pause in sorted(switches.unswept, key=lambda unswept: unswept.sides):
            if pause in switches.pauses:
                self._book.mark_swept(pause)
                continue
            left_s = budget_s - (time.monotonic() - started)
            if left_s <= 0:
                return Released(released, more=True)
            swept = self._sweep(pause, left_s, None)
            released, more = released + swept.released, more or swept.more
        return Released(released, more)

    def _sweep(self, pause: Pause, budget_s: float | None, progress: Callable[[int], None] | None) -> Released:
        assert pause.job_type is not None
        swept = self._holding.release_all(pause_hold_key(pause.job_type), pause.tenant_id, budget_s=budget_s,
                                          progress=progress)
        if not swept.more:
            self._book.mark_swept(pause)
        return swept

    def passed(self, due: DueJob) -> bool:
        """Whether a claim must pass `due` now (paused, or the platform drains); a job of a paused type is held
        aside as it is passed (onward.store.held_jobs), while that pause is in force."""
        switches = self.switches()
        if not paused(switches, due):
            return False
        assert due.row is not None
        pause = None if switches.draining else switches.paused_by(due.row.job.tenant_id, due.row.job.type)
        if pause is not None and pause.job_type is not None and due.row.held_by is None:
            self._holding.hold(due.row, pause_hold_key(pause.job_type), pause)
        return True

    def set_draining(self, on: bool) -> bool:
        """Turn the drain switch on or off (False: it already was so)."""
        changed = self._book.set_draining(on, self._clock())
        self.current()
        return changed

    def _lift_to_clock(self, tenant_id: str) -> None:
        tenant = self._registry.settings([tenant_id]).get(tenant_id)
        if tenant is None:
            return
        state = self._counters.tenant_counters({tenant: None}, consistent=True).get(tenant_id)
        if state is None:
            return
        load = state.load()._replace(returning=True)  # (as a tenant that comes back: lifted when below the clock)
        chosen = candidate(load, self._clock(), self._registry.virtual_clock(), pool_mean_ms([load]))
        if chosen.lift_offset_ms is not None:
            self._counters.lift(tenant_id, chosen.lift_offset_ms)


def flow_book_of(recorder: object) -> FlowBook:
    """The FlowBook a recorder keeps beside its jobs (`flow_book`: both recorders have one; stores sharing a
    recorder share it), or one of this store's own in memory for a recorder without."""
    book = getattr(recorder, "flow_book", None)
    return book if book is not None else MemoryFlowBook()


def paused_refusal(switches: FlowSwitches, job: Job) -> Refusal | None:
    """A claim's refusal of `job` while it may not start (paused, or the platform drains); None when it may."""
    return None if switches.may_start(job.tenant_id, job.type) else Refusal(RefusalReason.NOT_CLAIMABLE, job)


def paused(switches: FlowSwitches, due: DueJob) -> bool:
    """Whether the claim passed `due` for a pause (as its row shows it): not a job another process took, so its
    queue is not contended for it (onward.store.claim_order)."""
    return due.row is not None and not switches.may_start(due.row.job.tenant_id, due.row.job.type)

"""Unique jobs (issue 37) against a model, on both recorders: a hypothesis state machine creates jobs with one
of two unique keys (`w`: a 20 s window; `u`: held until the holder finishes) under every `on_conflict`, claims,
completes and cancels them, and moves the clock; after each create it checks the store's answer against the
model's, and after every step that at most one job holds each key: the key's item names the model's holder, no
two unfinished jobs share `u`, and no job of `w` was created inside another's window unless that one was
finished or replaced.

Each example is a tenant of its own on one backend; its teardown ends every job it left, so the next example's
claims see only its own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from onward.domain.clock import ManualClock
from onward.domain.errors import UniqueKeyHeld
from onward.domain.models import Lease, NewJob
from onward.domain.states import JobState, is_terminal
from onward.store.memory.recorder import MemoryRecorder
from onward.store.service import JobStore
from tests.contract.backends import StoreBackend

WINDOW_S = 20
KEYS = {"w": WINDOW_S, "u": None}
WAITING = (JobState.QUEUED, JobState.RETRY_WAIT)
_tenants = itertools.count()


@dataclass
class Holder:
    job_id: str
    created_at: int
    window_s: int | None

    def expired(self, now: int) -> bool:
        return self.window_s is not None and self.created_at + self.window_s * 1000 <= now


@dataclass
class UniqueModel:
    holders: dict[str, Holder] = field(default_factory=dict)
    # per key, each job created with it in order: (job id, created_at, why it could take the key)
    created: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)


class UniqueMachine(RuleBasedStateMachine):
    backend: StoreBackend  # set by the test

    def __init__(self) -> None:
        super().__init__()
        if self.backend.name == "memory":  # a fresh store and clock per example: a replay of an example by
            # hypothesis must meet the state it met first (what earlier examples or tests left would differ)
            self.clock = ManualClock(self.backend.clock.now)
            self.store: JobStore = self.backend.store(recorder=MemoryRecorder(), clock=self.clock)
        else:
            self.store = self.backend.store()
            self.clock = self.backend.clock
        self.tenant = f"unique-model-{next(_tenants)}"
        self.model = UniqueModel()
        self.leases: list[Lease] = []
        self.jobs: list[str] = []

    def _state(self, job_id: str) -> JobState:
        return self.store.get(job_id).state

    @rule(key=st.sampled_from(sorted(KEYS)), on_conflict=st.sampled_from(["keep", "reject", "replace"]))
    def create(self, key: str, on_conflict: str) -> None:
        window_s = KEYS[key]
        rule_ = {"key": key, "on_conflict": on_conflict, **({"window_s": window_s} if window_s else {})}
        now = self.clock.now
        holder = self.model.holders.get(key)
        holder_state = None if holder is None else self._state(holder.job_id)
        free = (holder is None or holder.expired(now)
                or (holder.window_s is None and holder_state is not None and is_terminal(holder_state)))
        refusal: UniqueKeyHeld | None = None
        try:
            answer = self.store.create(self.tenant, NewJob.model_validate({"type": "demo.echo", "unique": rule_}))
        except UniqueKeyHeld as refused:
            refusal = refused
        if refusal is not None:
            assert not free and holder is not None and refusal.job_id == holder.job_id
            assert on_conflict == "reject" or holder_state is JobState.RUNNING
            return
        if free or (on_conflict == "replace" and holder_state not in (JobState.RUNNING,)):
            assert holder_state is not None or holder is None
            assert answer.created, (free, on_conflict, holder_state)
            why = "free" if free else "replaced"
            if not free and holder is not None and holder_state in WAITING:
                assert answer.replaced == holder.job_id and self._state(holder.job_id) is JobState.CANCELLED
            self.model.holders[key] = Holder(answer.job.job_id, answer.job.created_at, window_s)
            self.model.created.setdefault(key, []).append((answer.job.job_id, now, why))
            self.jobs.append(answer.job.job_id)
            return
        assert holder is not None and on_conflict == "keep"
        assert answer.duplicate_of_unique and not answer.created and answer.job.job_id == holder.job_id

    @rule()
    def claim(self) -> None:
        lease = self.store.claim("worker", 300)
        if lease is not None:
            assert lease.job.tenant_id == self.tenant
            self.leases.append(lease)

    # (which lease or job a rule picks is drawn as a plain number, then taken modulo: what hypothesis draws
    # must not depend on what the store answered, which a replay of an example may not repeat exactly: a
    # claim's order among jobs due at one millisecond follows their random ids)
    @rule(pick=st.integers(0, 1_000))
    def complete(self, pick: int) -> None:
        if self.leases:
            self.store.complete(self.leases.pop(pick % len(self.leases)))

    @rule(pick=st.integers(0, 1_000))
    def cancel(self, pick: int) -> None:
        if self.jobs:
            self.store.cancel(self.jobs[pick % len(self.jobs)])

    @rule(seconds=st.sampled_from([1, 5, 19, 20, 40]))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def one_holder_per_key(self) -> None:
        for key, holder in self.model.holders.items():
            assert self.store.recorder.unique_hold(self.tenant, key).job_id == holder.job_id  # type: ignore[union-attr]
        unfinished = [job_id for job_id, _, _ in self.model.created.get("u", [])
                      if not is_terminal(self._state(job_id))]
        assert len(unfinished) <= 1
        created = self.model.created.get("w", [])
        for (_, earlier_at, _), (_, later_at, why) in itertools.pairwise(created):
            assert later_at >= earlier_at + WINDOW_S * 1000 or why == "replaced"

    def teardown(self) -> None:
        for lease in self.leases:
            self.store.complete(lease)
        for job_id in self.jobs:
            self.store.cancel(job_id)
        while (lease := self.store.claim("worker", 300)) is not None:  # anything a race left claimable
            self.store.complete(lease)


def run_model(backend: StoreBackend, examples: int, steps: int) -> None:
    machine: Any = type("UniqueMachineOn" + backend.name.title(), (UniqueMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_unique_keys_match_the_model(backend: StoreBackend) -> None:
    """Without the key item's conditions, a create would make a second holder (the invariant fails); without
    the takeover's check of the holder's row, a finished `u` holder would keep its key (an answer fails)."""
    if backend.name == "memory":
        run_model(backend, examples=120, steps=40)
    else:
        run_model(backend, examples=12, steps=25)

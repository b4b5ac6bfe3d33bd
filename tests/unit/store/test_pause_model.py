"""A model-based test of pause, resume and the drain switch (onward.store.pauses) on the real claim, in memory:
hypothesis drives random sequences of create (two tenants, two types), pause and resume (a tenant, a type of
every tenant, one tenant's type; through the operator's store), the drain switch, claims (a worker's store: a
process of its own, with its own cache of the switches), completes and the clock moving on.

Checked at every claim: no job starts whose tenant or type is paused, or while the platform drains, once the
pause has been in force for FLOW_CACHE_MS (the documented propagation; the claiming process may not have read
it before). Checked at the end: once everything is resumed (and FLOW_CACHE_MS passed), every waiting job is
claimed, each tenant's in its due order (jobs keep their place through a pause), and paused jobs kept `queued`
all along.

What breaks without which code: the claim's tenant filter (onward.store.claims.Claimer._examine) or the type
check (onward.store.service.JobStore._take): a paused job starts; the drain check (JobStore.claim): a job starts
while draining; `paused` in onward.store.claims.Claimer._take_handed: a job passed for a pause marks its queue
contended, and the claims after hand out its jobs spread out of due order (onward.store.claim_order); the cache's
expiry (FlowControl.switches): a pause never reaches the worker's process; a pause
that moved jobs out of their queues without putting them back: the final claims miss them or reorder them.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from onward.domain.clock import EpochMs
from onward.domain.models import Lease, NewJob
from onward.domain.pauses import Pause
from onward.domain.states import JobState
from onward.store.memory.recorder import MemoryRecorder
from onward.store.pauses import FLOW_CACHE_MS
from onward.store.service import JobStore
from tests.support import ManualClock

TENANTS = ("acme", "globex")
TYPES = ("demo.echo", "demo.sleep")
PAUSES = [Pause(tenant) for tenant in TENANTS] + [Pause(job_type=job_type) for job_type in TYPES] + [
    Pause(tenant, job_type) for tenant in TENANTS for job_type in TYPES]


@dataclass
class Made:
    job_id: str
    tenant: str
    job_type: str
    due_at: EpochMs


class PauseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        recorder = MemoryRecorder()
        # Hypothesis replays an example only if every claim repeats: the rngs are seeded and the job ids counted
        # (a random id decides a job's queue shard, so which job a claim takes, so whether a later claim finds one).
        ids = itertools.count(1)
        self.operator = JobStore.in_memory(clock=self.clock, recorder=recorder, rng=random.Random(0),
                                           new_job_id=lambda: f"{next(ids):032x}")
        # another process: its own cache
        self.worker = JobStore.in_memory(clock=self.clock, recorder=recorder, rng=random.Random(1))
        self.jobs: dict[str, Made] = {}
        self.in_force: dict[Pause, EpochMs] = {}  # pause -> when it was put in force
        self.draining_since: EpochMs | None = None
        self.running: list[Lease] = []
        self.claimed: list[str] = []

    @rule(tenant=st.sampled_from(TENANTS), job_type=st.sampled_from(TYPES))
    def create(self, tenant: str, job_type: str) -> None:
        job = self.operator.create(tenant, NewJob(type=job_type, params={})).job
        self.jobs[job.job_id] = Made(job.job_id, tenant, job_type, job.not_before)
        self.clock.advance(0.001)  # (distinct due times: the order to keep is unambiguous)

    @rule(pause=st.sampled_from(PAUSES))
    def pause(self, pause: Pause) -> None:
        added = self.operator.flow.pause(pause)
        assert added == (pause not in self.in_force)
        self.in_force.setdefault(pause, self.clock.now)

    @rule(pause=st.sampled_from(PAUSES))
    def resume(self, pause: Pause) -> None:
        assert self.operator.flow.resume(pause) == (pause in self.in_force)
        self.in_force.pop(pause, None)

    @rule(on=st.booleans())
    def drain(self, on: bool) -> None:
        self.operator.flow.set_draining(on)
        if not on:
            self.draining_since = None
        elif self.draining_since is None:
            self.draining_since = self.clock.now

    @rule()
    def claim(self) -> None:
        lease = self.worker.claim("w", 300)
        if lease is None:
            return
        job = self.jobs[lease.job.job_id]
        settled = self.clock.now - FLOW_CACHE_MS
        assert self.draining_since is None or self.draining_since > settled, "a job started while draining"
        holding = [pause for pause, since in self.in_force.items()
                   if since <= settled and pause.covers(job.tenant, job.job_type)]
        assert not holding, f"{job} started under {holding}"
        self.running.append(lease)
        self.claimed.append(job.job_id)

    @precondition(lambda self: self.running)
    @rule(which=st.integers(min_value=0))
    def complete(self, which: int) -> None:
        self.worker.complete(self.running.pop(which % len(self.running)))

    @precondition(lambda self: set(self.jobs) - set(self.claimed))
    @rule(which=st.integers(min_value=0))
    def cancel(self, which: int) -> None:
        """A waiting job cancelled (held aside or not): it ends cancelled, and its queue's count stays whole
        (checked by `queues_count_what_waits`)."""
        claimed = set(self.claimed)
        waiting = [job_id for job_id in self.jobs if job_id not in claimed]  # in creation order
        job_id = waiting[which % len(waiting)]
        self.operator.cancel(job_id)
        assert self.operator.get(job_id).state is JobState.CANCELLED
        self.jobs.pop(job_id)

    @invariant()
    def queues_count_what_waits(self) -> None:
        """Each tenant's queue entries count its waiting jobs that are not held aside (a hold takes one off, a
        release or a cancel of a held job puts the count right)."""
        for tenant in TENANTS:
            state = self.operator.tenant_states().get(tenant)
            counted = sum(entry.waiting for entry in state.queues.values()) if state is not None else 0
            in_queue = [job_id for job_id, job in self.jobs.items() if job.tenant == tenant
                        and job_id not in self.claimed and self.operator.row(job_id).held_by is None]
            assert counted == len(in_queue), (tenant, counted, len(in_queue))

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.0, 2.5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def waiting_jobs_stay_queued(self) -> None:
        for job_id in set(self.jobs) - set(self.claimed):
            assert self.operator.get(job_id).state is JobState.QUEUED

    def teardown(self) -> None:
        for pause in list(self.in_force):
            self.operator.flow.resume(pause)
        self.operator.flow.set_draining(False)
        self.clock.advance(FLOW_CACHE_MS / 1000)
        before = len(self.claimed)
        while (lease := self.worker.claim("w", 300)) is not None:
            self.claimed.append(lease.job.job_id)
        assert sorted(self.claimed) == sorted(self.jobs), "a job was never claimed after the resume"
        after = [self.jobs[job_id] for job_id in self.claimed[before:]]
        for tenant in TENANTS:
            mine = [job.due_at for job in after if job.tenant == tenant]
            assert mine == sorted(mine), f"{tenant}'s jobs came back out of their due order"


def test_no_paused_job_starts_and_every_one_runs_in_its_order_once_resumed() -> None:
    run_state_machine_as_test(PauseMachine, settings=settings(
        max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]))

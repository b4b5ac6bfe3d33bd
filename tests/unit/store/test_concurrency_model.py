"""A model-based test of concurrency keys (onward.store.concurrency_keys) on the real claim, in memory: hypothesis
drives random sequences of creates (two tenants, keys with limits 1 and 2, jobs with no key), claims from two
stores (two processes), completes, failures (retried after a backoff), clock steps and reaps (a worker that
vanished: its lease lapses), cancels, and an end of an attempt that races a claim: another process's claim
commits between the end's read of the key and its commit (the hold the brief's condition on `held` is for).

Checked after every step: no key ever has more than its limit of jobs running; the key's item counts exactly
its running jobs and its held ones; each tenant's queue entries count its waiting jobs that are not held.
Checked at the end (no starvation): workers that keep claiming and completing run every job.

What breaks without which code: the condition `running < limit` (onward.store.ports.concurrency_keys.SlotTake):
a key runs past its limit; the slot given back by every end (ConcurrencySlots.for_commit, `ends_attempt`): a
reaped or failed attempt keeps its slot and the key's jobs starve; the condition that `held` is still the value
the end read: the racing end gives the last slot back without releasing the job held meanwhile, which then
waits forever (the final claims never reach it); the `held - 1` of a cancelled held job: the counts drift.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from onward.domain.backoff import BackoffPolicy
from onward.domain.concurrency import ConcurrencyRule, KeyCount, hold_key
from onward.domain.models import ErrorSummary, Lease, NewJob
from onward.domain.states import JobState, is_terminal
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports.concurrency_keys import ConcurrencyCounts
from onward.store.service import JobStore
from tests.support import ManualClock

TENANTS = ("acme", "globex")
KEYS = {"one": 1, "two": 2}
LEASE_S = 30


@dataclass
class Made:
    job_id: str
    tenant: str
    key: str | None


class Interloping(ConcurrencyCounts):
    """The key's read of an end, with another process's write run right after it (before the end commits)."""

    def __init__(self, counts: ConcurrencyCounts) -> None:
        self._counts = counts
        self.pending: Callable[[], None] | None = None

    def key_count(self, tenant_id: str, key: str) -> KeyCount:
        count = self._counts.key_count(tenant_id, key)
        if self.pending is not None:
            interloper, self.pending = self.pending, None
            interloper()
        return count


class ConcurrencyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.recorder = MemoryRecorder()
        backoff = BackoffPolicy(base_s=1, cap_s=2)
        # (seeded, ids counted: hypothesis replays an example on the state it first met; a job's id picks its
        # queue shard, so which job a claim takes)
        ids = itertools.count(1)
        self.stores = [JobStore.in_memory(clock=self.clock, recorder=self.recorder, backoff=backoff,
                                          rng=random.Random(seed), new_job_id=lambda: f"{next(ids):032x}")
                       for seed in range(2)]
        self.interloping = Interloping(self.recorder)
        self.stores[0].concurrency._counts = self.interloping  # (its ends' reads of the key)
        self.jobs: dict[str, Made] = {}
        self.running: list[tuple[int, Lease]] = []

    @rule(tenant=st.sampled_from(TENANTS), key=st.sampled_from([None, *KEYS]), store=st.integers(0, 1))
    def create(self, tenant: str, key: str | None, store: int) -> None:
        rule_ = None if key is None else ConcurrencyRule(key=key, limit=KEYS[key])
        job = self.stores[store].create(tenant, NewJob(type="demo.echo", params={}, concurrency=rule_,
                                                       max_attempts=3)).job
        self.jobs[job.job_id] = Made(job.job_id, tenant, key)
        self.clock.advance(0.001)

    @rule(store=st.integers(0, 1))
    def claim(self, store: int) -> None:
        lease = self.stores[store].claim(f"w{store}", LEASE_S)
        if lease is not None:
            self.running.append((store, lease))

    @precondition(lambda self: self.running)
    @rule(which=st.integers(min_value=0), how=st.sampled_from(["complete", "fail", "release"]))
    def end(self, which: int, how: str) -> None:
        store, lease = self.running.pop(which % len(self.running))
        if how == "complete":
            self.stores[store].complete(lease, None)
        elif how == "fail":
            self.stores[store].fail(lease, ErrorSummary.of("Boom", "x"))
        else:
            self.stores[store].release(lease)

    @precondition(lambda self: self.running)
    @rule(which=st.integers(min_value=0))
    def end_racing_a_claim(self, which: int) -> None:
        """Store 0 completes an attempt; between its read of the key and its commit, store 1 claims (and may
        hold a job of the key, at its limit until the end commits)."""
        _, lease = self.running.pop(which % len(self.running))
        raced: list[Lease] = []
        self.interloping.pending = lambda: raced.extend(
            lease for lease in [self.stores[1].claim("w1", LEASE_S)] if lease is not None)
        self.stores[0].complete(lease, None)
        self.interloping.pending = None
        self.running += [(1, lease) for lease in raced]

    @rule(seconds=st.sampled_from([0.5, 2.0, LEASE_S + 1]))
    def advance_and_reap(self, seconds: float) -> None:
        """Time passes; the reaper ends the attempts whose lease lapsed (their workers vanished)."""
        self.clock.advance(seconds)
        reaped = {job.job_id for job in self.stores[1].reap()}
        self.running = [(store, lease) for store, lease in self.running if lease.job.job_id not in reaped]

    @precondition(lambda self: self.jobs)
    @rule(which=st.integers(min_value=0))
    def cancel(self, which: int) -> None:
        ids = list(self.jobs)  # (in creation order: ids are random)
        self.stores[0].cancel(ids[which % len(ids)])

    @invariant()
    def keys_hold_their_limits_and_counts(self) -> None:
        contents = self.recorder.contents()
        for tenant in TENANTS:
            for key, limit in KEYS.items():
                mine = [made.job_id for made in self.jobs.values() if made.tenant == tenant and made.key == key]
                running = sum(contents.rows[job_id].job.state is JobState.RUNNING for job_id in mine)
                held = sum(contents.rows[job_id].held_by == hold_key(key) for job_id in mine)
                assert running <= limit, f"{tenant}/{key}: {running} running, limit {limit}"
                assert self.recorder.key_count(tenant, key) == KeyCount(running, held)

    @invariant()
    def queues_count_what_waits(self) -> None:
        contents = self.recorder.contents()
        for tenant in TENANTS:
            state = self.stores[0].tenant_states().get(tenant)
            counted = sum(entry.waiting for entry in state.queues.values()) if state is not None else 0
            in_queue = [row for row in contents.rows.values() if row.job.tenant_id == tenant
                        and row.job.state in (JobState.QUEUED, JobState.RETRY_WAIT) and row.held_by is None]
            assert counted == len(in_queue), (tenant, counted, len(in_queue))

    def teardown(self) -> None:
        """Workers that keep claiming and completing (the clock moving past backoffs and leases) run every job:
        nothing is left held, or waiting, for good."""
        for _ in range(200):
            for store, lease in self.running:
                self.stores[store].complete(lease, None)
            self.running = []
            for store in (0, 1):
                while (lease := self.stores[store].claim(f"w{store}", LEASE_S)) is not None:
                    self.running.append((store, lease))
            if not self.running and all(is_terminal(self.stores[0].get(job_id).state) for job_id in self.jobs):
                return
            self.clock.advance(1)
            self.stores[1].reap()
        left = {job_id: (self.stores[0].get(job_id).state, self.stores[0].row(job_id).held_by)
                for job_id in self.jobs if not is_terminal(self.stores[0].get(job_id).state)}
        raise AssertionError(f"jobs never ran: {left}")


def test_no_key_passes_its_limit_and_every_job_runs() -> None:
    run_state_machine_as_test(ConcurrencyMachine, settings=settings(
        max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]))

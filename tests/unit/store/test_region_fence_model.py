"""A hypothesis state machine of the region fence (issue 39, onward.store.region_fence) on the in-memory store:
random interleavings of the current home's operations (create, claim, complete, fail, release, renew, cancel,
reap) with the stale homes' (every earlier epoch's store keeps trying its own leases, claims, cancels and
reaps) and failovers (the epoch raised, every job adopted, the counters rebuilt).

After every step: no write by a stale home ever commits (the outbox and every row unchanged by its
operations, each refused with RegionFenced or finding nothing to do); each job's versions only rise, its
row's version is its newest event's, and once adopted every one of its versions is of its epoch's range;
every job that has not ended is of the current epoch; no attempt is ever charged for a failover (attempts
used never pass max_attempts, and a job running at a failover has its run closed `region_failover`).

What breaks without which code: the epoch in the job row's condition (onward.store.ports.write_plans
.epoch_refusal, the recorders' checks): a stale home's complete or claim commits on an adopted row (a stale
write seen); the renewal's epoch check: a stale renewal moves an adopted row's lease; version_under in
the adoption: a version of an earlier epoch's range after adoption; attempt_floor in the adoption: a job with
max_attempts 1 running at a failover ends dead at its next claim.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from onward.domain.errors import RegionFenced
from onward.domain.models import ErrorSummary, Lease, NewJob
from onward.domain.regions import epoch_of_version, first_version_of
from onward.domain.states import JobState, RunOutcome, is_terminal
from onward.store.memory.recorder import MemoryRecorder
from onward.store.service import JobStore
from tests.support import ManualClock

MAX_EPOCH = 4


class RegionFenceModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.clock = ManualClock()
        self.recorder = MemoryRecorder()
        self.epoch = 0
        self.job_ids = itertools.count(1)
        self.homes: list[JobStore] = [self._store(0)]
        self.leases: list[tuple[int, Lease]] = []  # (the epoch of the home that claimed it, its lease)
        self.versions: dict[str, int] = {}
        self.adopted_in: dict[str, int] = {}

    def _store(self, epoch: int) -> JobStore:
        """A home of `epoch`, deterministic (job ids, its claims' rotation) so that hypothesis replays a case."""
        return JobStore.in_memory(clock=self.clock, recorder=self.recorder, rng=random.Random(epoch),
                                  region_epoch=epoch, new_job_id=lambda: f"{next(self.job_ids):032x}")

    @property
    def home(self) -> JobStore:
        return self.homes[-1]

    def _contents(self) -> tuple[Any, Any]:
        contents = self.recorder.contents()
        return ({job_id: (row.job, row.region_epoch) for job_id, row in contents.rows.items()},
                {job_id: [event.version for event in events] for job_id, events in contents.events.items()})

    # --- the home's operations --------------------------------------------------------------------------------

    @rule(max_attempts=st.integers(1, 3))
    def create(self, max_attempts: int) -> None:
        self.home.create("acme", NewJob(type="demo.echo", params={}, max_attempts=max_attempts))
        self.clock.advance(0.001)

    @rule()
    def claim(self) -> None:
        lease = self.home.claim("w", 30)
        if lease is not None:
            assert lease.job.attempts_used <= lease.job.max_attempts
            self.leases.append((self.epoch, lease))

    @rule(data=st.data(), how=st.sampled_from(["complete", "fail", "release", "renew"]))
    def report(self, data: st.DataObject, how: str) -> None:
        current = [lease for epoch, lease in self.leases if epoch == self.epoch]
        if not current:
            return
        lease = data.draw(st.sampled_from(current))
        self._report(self.home, lease, how)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if self.versions:
            self.home.cancel(data.draw(st.sampled_from(sorted(self.versions))))

    @rule(seconds=st.sampled_from([1, 40]))
    def advance_and_reap(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.home.reap()

    # --- the stale homes -----------------------------------------------------------------------------------

    @precondition(lambda self: self.epoch > 0)
    @rule(data=st.data(), how=st.sampled_from(["complete", "fail", "release", "renew", "claim", "cancel", "reap"]))
    def stale_write(self, data: st.DataObject, how: str) -> None:
        """A stale home's write: refused (RegionFenced) or nothing to do, and nothing written either way."""
        stale_epoch = data.draw(st.integers(0, self.epoch - 1))
        stale = self.homes[stale_epoch]
        before = self._contents()
        try:
            if how == "claim":
                assert stale.claim("stale", 30) is None
            elif how == "reap":
                stale.reap()
            elif how == "cancel":
                if self.versions:
                    stale.cancel(data.draw(st.sampled_from(sorted(self.versions))))
            else:
                leases = [lease for epoch, lease in self.leases if epoch == stale_epoch]
                if leases:
                    self._report(stale, data.draw(st.sampled_from(leases)), how)
        except RegionFenced:
            pass
        assert self._contents() == before, f"a stale home's {how} wrote"

    def _report(self, store: JobStore, lease: Lease, how: str) -> None:
        if how == "complete":
            store.complete(lease, {"by": lease.worker_id})
        elif how == "fail":
            store.fail(lease, ErrorSummary.of("Boom", "failed"))
        elif how == "release":
            store.release(lease)
        else:
            store.renew_lease(lease, 30)

    # --- failover ------------------------------------------------------------------------------------------

    @precondition(lambda self: self.epoch < MAX_EPOCH)
    @rule()
    def fail_over(self) -> None:
        running = {job_id for job_id, (job, _) in self._contents()[0].items() if job.state is JobState.RUNNING}
        self.epoch += 1
        home = self._store(self.epoch)
        home.raise_region_epoch(self.epoch, home=f"region-{self.epoch}", previous_home=f"region-{self.epoch - 1}",
                                reason="model", decided_by="model")
        cursor = None
        while True:
            page = home.adopt_page(self.epoch, cursor=cursor, limit=3)
            cursor = page.cursor
            if cursor is None:
                break
        home.rebuild_counters(self.epoch)
        self.homes.append(home)
        for job_id in running:
            run = home.runs(job_id)[-1]
            assert run.outcome is RunOutcome.REGION_FAILOVER
            assert home.get(job_id).state in (JobState.QUEUED, JobState.CANCELLED)

    # --- invariants ----------------------------------------------------------------------------------------

    @invariant()
    def versions_rise_and_rows_are_of_their_epoch(self) -> None:
        if not hasattr(self, "recorder"):
            return
        rows, events = self._contents()
        for job_id, (job, row_epoch) in rows.items():
            assert events[job_id] == sorted(set(events[job_id])) and events[job_id][-1] == job.version
            assert job.version >= self.versions.get(job_id, 0)
            self.versions[job_id] = job.version
            if row_epoch > 0:
                assert epoch_of_version(job.version) == row_epoch
                assert job.version >= first_version_of(row_epoch)
            if not is_terminal(job.state):
                assert row_epoch == self.epoch
            assert job.attempts_used <= job.max_attempts


TestRegionFenceModel = RegionFenceModel.TestCase
TestRegionFenceModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])


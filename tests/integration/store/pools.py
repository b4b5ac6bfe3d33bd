"""A pool of workers simulated on one store and a manual clock, for the fairness tests."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from onward.domain.models import Lease, NewJob
from onward.store.service import JobStore
from tests.support import ManualClock

WORK = NewJob(type="fair.work", params={})
HOUR_S = 3_600


def enqueue(store: JobStore, tenant_id: str, count: int, priority: int = 0) -> list[str]:
    job = NewJob(type="fair.work", params={}, priority=priority)
    return [store.create(tenant_id, job).job.job_id for _ in range(count)]


@dataclass
class Pool:
    """`workers` workers on one store: each step fills every free worker with a claim and lets `job_s`
    pass, then completes the attempts that have run `job_s` (jobs in `held` run until released)."""

    store: JobStore
    clock: ManualClock
    workers: int
    running: list[tuple[Lease, int]] = field(default_factory=list)  # (lease, ends at)
    held: list[Lease] = field(default_factory=list)
    claims: Counter[str] = field(default_factory=Counter)

    def fill(self, job_s: float) -> None:
        while len(self.running) + len(self.held) < self.workers:
            lease = self.store.claim(f"w{len(self.running)}", 3 * HOUR_S)
            if lease is None:
                return
            self.claims[lease.job.tenant_id] += 1
            self.running.append((lease, self.clock.now + int(job_s * 1000)))

    def step(self, job_s: float) -> None:
        self.fill(job_s)
        ends = min((end for _, end in self.running), default=self.clock.now + int(job_s * 1000))
        self.clock.now = ends
        for lease, end in [entry for entry in self.running if entry[1] <= ends]:
            self.store.complete(lease)
            self.running.remove((lease, end))

    def run(self, seconds: float, job_s: float) -> Counter[str]:
        """Claims per tenant while `seconds` pass."""
        before = Counter(self.claims)
        until = self.clock.now + int(seconds * 1000)
        while self.clock.now < until:
            self.step(job_s)
        after = Counter(self.claims)
        after.subtract(before)
        return after


def share(claims: Counter[str], tenant_id: str) -> float:
    return claims[tenant_id] / sum(claims.values())

"""A model-based test of rate limits (issue 37) on the in-memory store: jobs of two types and two keys, limits
set and removed on the tenant, a type and the keys, claims by two processes (one of them read its buckets just
before the other claimed: a stale read), the clock stepping at random. After every step, for each limit and
each stretch of time it stayed unchanged, the starts whose tokens it handed out never exceed its GCRA bound in
any window (limit + floor(w / T) by token moment; limit + floor((w + grace) / T) by start), and at the end
every job starts.

Without the compare-and-set on a bucket's TAT the stale read hands out a token twice (the invariant fails
with a limit's burst exceeded at one moment); without the reservation's version condition a job could
reserve two tokens; and a reservation re-deferred in a loop would leave jobs queued at the end."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from onward.domain.clock import ManualClock
from onward.domain.models import Job, NewJob
from onward.domain.rate_limits import TENANT_LIMIT, Gcra, applicable_keys, grace_ms
from onward.domain.states import JobState
from onward.store.memory.recorder import MemoryRecorder
from onward.store.service import JobStore

KEYS = (TENANT_LIMIT, "type:demo.a", "k1", "k2")
LIMITS = (1, 2, 4, 5)
PERIODS = (1.0, 2.0)  # with LIMITS: whole-millisecond intervals, so token moments are exact


@dataclass(frozen=True)
class Start:
    at: int  # when the claim started it
    token_at: int  # the moment of the token it spent
    groups: tuple[tuple[str, int], ...]  # (limit key, epoch of its definition) of each limit it counted against
    grace: int


class RacingBuckets:
    """A recorder whose next bucket read lets another process claim a job before it answers (a stale read)."""

    def __init__(self, inner: MemoryRecorder) -> None:
        self.inner = inner
        self.race: object | None = None

    def bucket_tats(self, tenant_id: str, keys: list[str]) -> dict[str, int]:
        read = self.inner.bucket_tats(tenant_id, keys)
        race, self.race = self.race, None
        if race is not None:
            race()  # type: ignore[operator]
        return read

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class RateLimitModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.recorder = MemoryRecorder()
        ids = itertools.count(1)  # (seeded, ids counted: hypothesis replays an example only if the claims repeat)
        self.stores = [JobStore.in_memory(clock=self.clock, recorder=self.recorder, rng=random.Random(seed),
                                          new_job_id=lambda: f"{next(ids):032x}") for seed in range(2)]
        for store in self.stores:  # limit changes apply at the next claim (the cache is timing, not logic)
            store.rate_limits.limiter._cache_ms = 0
        self.racing = RacingBuckets(self.recorder)
        self.stores[0].rate_limits.limiter._buckets = self.racing
        self.limits: dict[str, Gcra] = {}
        self.epochs: dict[str, int] = dict.fromkeys(KEYS, 0)
        self.reserved: dict[str, tuple[int, tuple[tuple[str, int], ...], int]] = {}  # job -> (at, groups, grace)
        self.starts: list[Start] = []
        self.jobs: list[str] = []
        self.history: dict[tuple[str, int], Gcra] = {}  # each (key, epoch)'s definition

    def _groups(self, job: Job) -> tuple[tuple[tuple[str, int], ...], int]:
        keys = [key for key in applicable_keys(job.type, job.rate_limit_key) if key in self.limits]
        return tuple((key, self.epochs[key]) for key in keys), grace_ms(self.limits[key] for key in keys)

    def _queued(self) -> dict[str, Job]:
        return {job.job_id: job for job in self.recorder.all_jobs() if job.state is JobState.QUEUED}

    def _claim(self, store: JobStore) -> None:
        before = self._queued()
        lease = store.claim("w", 30)
        if lease is not None:
            job = before[lease.job_id]
            now = self.clock.now
            kept = self.reserved.pop(job.job_id, None)
            if kept is not None and job.rate_reserved_at == kept[0] and now - kept[0] <= kept[2]:
                self.starts.append(Start(now, kept[0], kept[1], kept[2]))
            else:
                groups, grace = self._groups(job)
                self.starts.append(Start(now, now, groups, grace))
            store.complete(lease)
        for job_id, job in self._queued().items():  # reservations made by this claim, under today's limits
            if job.rate_reserved_at is not None and self.reserved.get(job_id, (None,))[0] != job.rate_reserved_at:
                self.reserved[job_id] = (job.rate_reserved_at, *self._groups(job))

    @rule(count=st.integers(1, 4), job_type=st.sampled_from(["demo.a", "demo.b"]),
          key=st.sampled_from([None, "k1", "k2"]))
    def create(self, count: int, job_type: str, key: str | None) -> None:
        for _ in range(count):
            self.jobs.append(self.stores[1].create("acme", NewJob(type=job_type, rate_limit_key=key)).job.job_id)

    @rule(which=st.integers(0, 1))
    def claim(self, which: int) -> None:
        self._claim(self.stores[which])

    @rule()
    def claim_racing_another_process(self) -> None:
        self.racing.race = lambda: self._claim(self.stores[1])
        self._claim(self.stores[0])
        self.racing.race = None

    @rule(ms=st.sampled_from([0, 1, 50, 125, 250, 500, 1000, 3000]))
    def advance(self, ms: int) -> None:
        self.clock.now += ms

    @rule(key=st.sampled_from(KEYS), limit=st.sampled_from(LIMITS), period=st.sampled_from(PERIODS))
    def set_limit(self, key: str, limit: int, period: float) -> None:
        self.stores[1].rate_limits.put("acme", key, limit, period)
        self.epochs[key] += 1
        self.limits[key] = self.history[(key, self.epochs[key])] = Gcra(limit, period)

    @rule(key=st.sampled_from(KEYS))
    def delete_limit(self, key: str) -> None:
        assert self.stores[1].rate_limits.delete("acme", key) is (key in self.limits)
        self.limits.pop(key, None)
        self.epochs[key] += 1

    @invariant()
    def never_over_a_limit(self) -> None:
        by_group: dict[tuple[str, int], list[Start]] = {}
        for start in self.starts:
            for group in start.groups:
                by_group.setdefault(group, []).append(start)
        for (key, epoch), starts in by_group.items():
            gcra = self._gcra_of(key, epoch)
            for moments, slack in (([s.token_at for s in starts], 0), ([s.at for s in starts],
                                                                          max(s.grace for s in starts))):
                moments.sort()
                for i, first in enumerate(moments):
                    for j in range(i, len(moments)):
                        allowed = gcra.limit + (moments[j] - first + slack) * 1000 // gcra.interval_us
                        assert j - i + 1 <= allowed, (key, gcra, moments[i:j + 1], slack)

    def _gcra_of(self, key: str, epoch: int) -> Gcra:
        return self.history[(key, epoch)]

    def teardown(self) -> None:
        for _ in range(2000):  # every runnable job starts: step the clock, claim what is due
            if not self._queued():
                break
            self.clock.now += 100
            for _ in range(8):
                self._claim(self.stores[0])
        assert not self._queued()
        assert all(self.recorder.job(job_id).job.state is JobState.SUCCEEDED for job_id in self.jobs)


TestRateLimitModel = RateLimitModel.TestCase
TestRateLimitModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])

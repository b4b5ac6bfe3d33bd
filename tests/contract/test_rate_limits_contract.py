"""Rate limits on both backends (issue 37): a claim takes a token in its own transaction, reserves the
earliest one to come when there is none (the job waits, holding no worker), spends a fresh reservation with no
bucket write, and every bucket change is a compare-and-set on its TAT, so stale reads lose."""

from __future__ import annotations

from dataclasses import replace

from onward.domain.clock import ManualClock
from onward.domain.models import NewJob
from onward.domain.rate_limits import RESERVATION_GRACE_MS, BucketMove
from onward.domain.states import JobState
from onward.store.ports import CommitOutcome
from onward.store.ports.rate_buckets import Reservation, ReserveOutcome
from onward.store.service import JobStore


def _drain(store: JobStore) -> list[str]:
    """Claim and complete every job due now: their ids, in claim order."""
    started = []
    while (lease := store.claim("w1", 30)) is not None:
        started.append(lease.job_id)
        store.complete(lease)
    return started


def test_a_burst_takes_limit_tokens_then_each_job_reserves_its_own_moment(backend, store: JobStore) -> None:
    """2 per second: two jobs start at once, the next two are deferred to +500 ms and +1000 ms (their due
    times and `rate_reserved_at`) and start then, each without another bucket write. Without the take in
    the claim's transaction all four would start at once; without the reservation the claim would keep
    meeting them and starting none."""
    clock: ManualClock = backend.clock
    start = clock.now
    store.rate_limits.put("acme", "mail", 2, 1.0)
    ids = [store.create("acme", NewJob(type="demo.echo", rate_limit_key="mail")).job.job_id for _ in range(4)]
    assert len(_drain(store)) == 2
    waiting = {job_id: store.get(job_id) for job_id in ids if store.get(job_id).state is JobState.QUEUED}
    assert sorted(job.rate_reserved_at for job in waiting.values()) == [start + 500, start + 1000]
    assert all(job.not_before == job.rate_reserved_at for job in waiting.values())
    tats = backend.recorder.bucket_tats("acme", ["mail"])
    assert tats == {"mail": (start + 2000) * 1000}
    clock.advance(0.5)
    assert len(_drain(store)) == 1
    assert backend.recorder.bucket_tats("acme", ["mail"]) == tats  # spent the reservation: no write
    clock.advance(0.5)
    assert len(_drain(store)) == 1
    assert all(store.get(job_id).state is JobState.SUCCEEDED and store.get(job_id).rate_reserved_at is None
               for job_id in ids)


def test_a_job_is_subject_to_its_key_its_type_and_its_tenant(backend, store: JobStore) -> None:
    """The tenant's limit (reserved key `tenant`) and its type's (`type:<type>`) apply to jobs without a key
    too; another tenant's jobs are never held. Without applicable_keys naming them, only keyed jobs would
    be limited."""
    store.rate_limits.put("acme", "tenant", 1, 1.0)
    store.rate_limits.put("acme", "type:demo.slow", 1, 10.0)
    for job_type in ("demo.echo", "demo.echo", "demo.slow"):
        store.create("acme", NewJob(type=job_type))
    store.create("globex", NewJob(type="demo.echo"))
    store.create("globex", NewJob(type="demo.echo"))
    started = _drain(store)
    assert sorted(store.get(job_id).tenant_id for job_id in started) == ["acme", "globex", "globex"]
    backend.clock.advance(2.0)
    assert len(_drain(store)) == 2  # acme's tenant limit has refilled by two tokens' worth... one at a time
    assert {job.state for job in store.all_jobs()} == {JobState.SUCCEEDED}


def test_a_limited_key_never_blocks_other_keys(backend, store: JobStore) -> None:
    """Jobs of a key without tokens are deferred and the claim goes on to the tenant's other jobs in the
    same call. Without JobDeferred leaving the job (a claim returning None instead), the unlimited job
    would wait behind them."""
    store.rate_limits.put("acme", "slow", 1, 60.0)
    for _ in range(5):
        store.create("acme", NewJob(type="demo.echo", rate_limit_key="slow"))
    free = store.create("acme", NewJob(type="demo.echo", rate_limit_key="fast")).job.job_id
    started = _drain(store)
    assert free in started and len(started) == 2
    assert store.rate_limits.limiter.reservations == 4


def test_a_stale_bucket_read_loses_its_compare_and_set(backend, store: JobStore) -> None:
    """A reservation and a claim's take both name the TAT they read: after another process moved the
    bucket, the reservation is refused (BUCKET_MOVED) and the claim's commit is RATE_MOVED, then decided
    again from a fresh read (counted as a lost race). Without the condition both would take one token."""
    store.rate_limits.put("acme", "k", 1, 1.0)
    first = store.create("acme", NewJob(type="demo.echo", rate_limit_key="k")).job
    second = store.create("acme", NewJob(type="demo.echo", rate_limit_key="k")).job
    now_us = backend.clock.now * 1000
    stale = (BucketMove("k", None, now_us + 1_000_000),)
    assert backend.recorder.reserve(Reservation("acme", second.job_id, (second.state, second.version, 0), None,
                                                backend.clock.now + 1000, stale)) is ReserveOutcome.RESERVED
    assert backend.recorder.reserve(Reservation("acme", first.job_id, (first.state, first.version, 0), None,
                                                backend.clock.now + 2000, stale)) is ReserveOutcome.BUCKET_MOVED
    assert store.get(first.job_id).rate_reserved_at is None
    # the second job's row moved (its reservation): reserving it again from the old row is refused
    assert backend.recorder.reserve(Reservation("acme", second.job_id, (second.state, second.version, 0), None,
                                                backend.clock.now + 3000, ())) is ReserveOutcome.JOB_MOVED

    class StaleOnce:
        """The recorder, answering the first bucket read with no bucket (as a read before the reservation)."""

        def __init__(self, inner) -> None:
            self.inner, self.stale = inner, True

        def bucket_tats(self, tenant_id, keys):
            if self.stale:
                self.stale = False
                return {}
            return self.inner.bucket_tats(tenant_id, keys)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    backend.clock.advance(1.0)  # the second job is due (reserved); the first takes the token at +1 s
    limiter = store.rate_limits.limiter
    limiter._buckets = StaleOnce(backend.recorder)
    assert sorted(_drain(store)) == sorted([first.job_id, second.job_id])
    # the stale read's take (from no bucket) lost; decided again from the bucket as it is, one token on
    assert store.stats.lost_races().get("RateBucketMoved") == 1
    assert backend.recorder.bucket_tats("acme", ["k"]) == {"k": now_us + 2_000_000}


def test_a_claims_take_is_refused_on_a_moved_bucket(backend, store: JobStore) -> None:
    """The recorder refuses a claim whose bucket move names a TAT the bucket no longer holds (RATE_MOVED),
    writing nothing: the job stays queued."""
    from onward.domain import lifecycle
    from onward.store.ports import TransitionWrite
    from onward.store.ports.rate_buckets import RateTake

    store.rate_limits.put("acme", "k", 5, 1.0)
    job = store.create("acme", NewJob(type="demo.echo", rate_limit_key="k")).job
    change = lifecycle.claim(job, "w1", 30_000, backend.clock.now)
    take = RateTake("acme", (BucketMove("k", 123, 456),), None)
    write = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=60, rate=take)
    assert backend.recorder.commit(write) is CommitOutcome.RATE_MOVED
    assert store.get(job.job_id).state is JobState.QUEUED
    good = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=60,
                              rate=replace(take, moves=(BucketMove("k", None, 456),)))
    assert backend.recorder.commit(good) is CommitOutcome.COMMITTED
    assert backend.recorder.bucket_tats("acme", ["k"]) == {"k": 456}


def test_a_late_reservation_takes_a_token_anew_and_a_deleted_limit_keeps_reservations(
        backend, store: JobStore) -> None:
    """A reservation claimed later than the grace is not spent: the job takes a fresh token (here: none
    left, so it reserves again), so starts delayed past their tokens cannot bunch up. A deleted limit keeps
    the reserved moments (the job waits for its own) and limits nothing new."""
    store.rate_limits.put("acme", "k", 1, 1.0)
    ids = [store.create("acme", NewJob(type="demo.echo", rate_limit_key="k")).job.job_id for _ in range(3)]
    assert len(_drain(store)) == 1
    backend.clock.advance((2000 + RESERVATION_GRACE_MS + 1) / 1000)  # both reservations (+1 s, +2 s) now stale
    assert len(_drain(store)) == 1  # one fresh token now; the other job reserved again
    late = [job_id for job_id in ids if store.get(job_id).state is JobState.QUEUED]
    assert len(late) == 1 and store.get(late[0]).rate_reserved_at == backend.clock.now + 1000
    assert store.rate_limits.delete("acme", "k") and not store.rate_limits.delete("acme", "k")
    store.create("acme", NewJob(type="demo.echo", rate_limit_key="k"))
    assert len(_drain(store)) == 1  # the new job: unlimited now; the reserved one waits for its moment
    backend.clock.advance(1.0)
    assert _drain(store) == late


def test_limits_are_listed_read_and_validated(backend, store: JobStore) -> None:
    """PUT's validation happens before anything is written (the API's 422 names the field)."""
    import pytest

    from onward.domain.errors import InvalidRequest

    store.rate_limits.put("acme", "type:demo.echo", 10, 60)
    store.rate_limits.put("acme", "b", 1, 0.5)
    assert [d.key for d in store.rate_limits.list("acme")] == ["b", "type:demo.echo"]
    assert store.rate_limits.get("acme", "b").gcra.period_s == 0.5
    assert store.rate_limits.list("globex") == [] and store.rate_limits.get("acme", "zz") is None
    for key, limit, period in (("type:Bad", 1, 1.0), ("a/b", 1, 1.0), ("k", 0, 1.0), ("k", 1, 0.0)):
        with pytest.raises(InvalidRequest):
            store.rate_limits.put("acme", key, limit, period)
    assert len(store.rate_limits.list("acme")) == 2

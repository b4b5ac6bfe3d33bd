"""Why a waiting job waits (onward/operator/explain.py), decided from values alone, and its count of the jobs ahead
held against the claim path itself on the in-memory store.

What breaks without which code:
- without `ahead_bounds`' aging bound, a higher-band job due a moment after this one, or a lower-band job
  due long before it, would be counted wrongly: the count would not match the order claims really take
  (test_the_count_ahead_is_each_jobs_place_in_the_claim_order);
- without the bound on `count_ahead`, a tenant with a million queued jobs would be read whole on each
  explain (test_the_count_stops_at_its_bound_and_says_at_least);
- with the reasons in another order, a capped tenant's job would read `no_worker` whenever its long jobs
  started before the window (test_a_capped_tenant_is_at_cap_even_when_nothing_claimed_lately).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from onward.domain import lifecycle
from onward.domain.dispatch import AGING_MS, TenantPolicy, Usage
from onward.domain.models import ErrorSummary, Job, NewJob
from onward.domain.states import JobState
from onward.operator import explain
from onward.operator.claim_history import ClaimCounts
from onward.operator.explain import Ahead, Throughput, Waiting, WaitReason
from onward.store.ports import DueJob, QueueEntry, Tenant, TenantState
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.reads import StoreReads
from onward.store.service import JobStore
from tests.support import ManualClock

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"
WINDOW_MS = 300_000


def _job(**changes) -> Job:
    return lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo"), NOW).after.model_copy(update=changes)


def _waiting(*, running: int = 0, cap: int | None = None, tenant_claims: int = 0,
             platform_claims: int | None = 0, ahead: int = 0) -> Waiting:
    tenant = TenantState(Tenant("acme", TenantPolicy(cap=cap)), Usage(running=running),
                         {0: QueueEntry("acme", 0, {0: ahead + 1})})
    return Waiting(tenant, Throughput(tenant_claims, platform_claims, WINDOW_MS, complete=True), Ahead(ahead))


# --- the reasons -------------------------------------------------------------------------------------------------

def test_a_job_with_a_run_at_to_come_is_scheduled_until_then() -> None:
    """Catches a delayed job explained as waiting for workers: its run_at is what it waits for."""
    job = _job(not_before=NOW + 60_000, run_at=NOW + 60_000)
    answer = explain.explain(job, NOW, _waiting(tenant_claims=10, platform_claims=10))
    assert (answer.reason, answer.until) == (WaitReason.SCHEDULED, NOW + 60_000)
    assert answer.eta == NOW + 60_000  # its turn (1 claim at 2 a minute: 30 s) comes before its run_at
    assert "scheduled" in answer.detail


def test_a_failed_attempt_in_retry_wait_is_backoff_until_its_next_attempt() -> None:
    """Catches a retry_wait job explained like a scheduled one, or as due before its backoff ends."""
    job = _job(state=JobState.RETRY_WAIT, not_before=NOW + 5_000, attempt=1,
               last_error=ErrorSummary.of("Boom", "x"))
    answer = explain.explain(job, NOW, _waiting())
    assert (answer.reason, answer.until, answer.eta) == (WaitReason.BACKOFF, NOW + 5_000, None)
    due = explain.explain(job, NOW + 5_000, _waiting(tenant_claims=1, platform_claims=3))
    assert (due.reason, due.until) == (WaitReason.WAITING_FOR_SHARE, None)  # its backoff is over


def test_a_capped_tenant_is_at_cap_even_when_nothing_claimed_lately() -> None:
    """Catches no_worker answered for a tenant whose long jobs (claimed before the window) hold its cap."""
    answer = explain.explain(_job(), NOW, _waiting(running=2, cap=2))
    assert answer.reason is WaitReason.TENANT_AT_CAP
    assert "2 running of 2" in answer.detail
    below = explain.explain(_job(), NOW, _waiting(running=1, cap=2, tenant_claims=1, platform_claims=1))
    assert below.reason is WaitReason.WAITING_FOR_SHARE


def test_nothing_claimed_in_the_window_is_no_worker_without_an_eta() -> None:
    """Catches an ETA made up when nothing takes work."""
    answer = explain.explain(_job(), NOW, _waiting())
    assert (answer.reason, answer.eta) == (WaitReason.NO_WORKER, None)


def test_the_reason_is_decided_from_its_tenants_own_claims_alone() -> None:
    """Catches a reason that tells a tenant whether any other tenant works: with none of its own claims in the
    window, no_worker whether or not others claimed (before: waiting_for_share as soon as another tenant's
    job was claimed), and waiting_for_share once its own jobs are being claimed."""
    for platform_claims in (None, 0, 40):
        idle = explain.explain(_job(), NOW, _waiting(tenant_claims=0, platform_claims=platform_claims))
        assert (idle.reason, idle.eta) == (WaitReason.NO_WORKER, None), platform_claims
        assert "of its tenant" in idle.detail
        served = explain.explain(_job(), NOW, _waiting(tenant_claims=2, platform_claims=platform_claims))
        assert served.reason is WaitReason.WAITING_FOR_SHARE, platform_claims
    unknown = explain.explain(_job(), NOW, _waiting(tenant_claims=2, platform_claims=None))
    assert "recent claims" not in unknown.detail  # no share of the platform's claims without them


def test_a_tenants_throughput_holds_no_other_tenants_claims() -> None:
    """Catches the platform's count (or the share it makes) kept in a throughput built for the tenant."""
    claims = ClaimCounts(NOW - WINDOW_MS, NOW, 60_000, {"acme": [1, 0, 2, 0, 0], "globex": [3, 3, 3, 3, 3]},
                         examined=20, complete=True)
    own = Throughput.of("acme", claims, platform=False)
    assert (own.tenant_claims, own.platform_claims, own.share) == (3, None, None)


def test_waiting_for_share_has_an_eta_from_its_tenants_claims_per_minute() -> None:
    """Catches an ETA that ignores the jobs ahead, or the tenant's own rate (the platform's is not its)."""
    answer = explain.explain(_job(), NOW, _waiting(tenant_claims=10, platform_claims=40, ahead=3))
    assert answer.reason is WaitReason.WAITING_FOR_SHARE
    assert answer.waiting is not None and answer.waiting.throughput.per_minute == 2.0
    assert answer.waiting.throughput.share == 0.25
    assert answer.eta == NOW + 120_000  # its tenant's 4th claim from now, at 2 a minute
    later = _job(not_before=NOW + 60_000, run_at=NOW + 60_000)
    unknown = explain.explain(later, NOW, _waiting(tenant_claims=0, platform_claims=40))
    assert unknown.eta is None and "no estimate" in unknown.detail  # others' claims are not its rate


def test_running_and_ended_jobs_are_said_as_such_and_a_waiting_one_needs_its_load() -> None:
    """Catches a running or finished job explained as waiting (the page asks only for waiting ones, but an
    answer can race the status)."""
    assert explain.explain(_job(state=JobState.RUNNING), NOW).reason is WaitReason.RUNNING
    assert explain.explain(_job(state=JobState.SUCCEEDED), NOW).reason is WaitReason.FINISHED
    with pytest.raises(ValueError, match="needs its tenant's load"):
        explain.explain(_job(), NOW)


def test_throughput_is_read_from_the_windows_claim_counts() -> None:
    claims = ClaimCounts(NOW - WINDOW_MS, NOW, 60_000, {"acme": [1, 0, 2, 0, 0], "globex": [3, 3, 3, 3, 3]},
                         examined=20, complete=True)
    throughput = Throughput.of("acme", claims)
    assert (throughput.tenant_claims, throughput.platform_claims, throughput.window_ms) == (3, 18, WINDOW_MS)
    assert throughput.per_minute == pytest.approx(0.6) and throughput.share == pytest.approx(1 / 6)
    assert Throughput.of("initech", claims).share == 0.0


# --- the jobs ahead -------------------------------------------------------------------------------------------

def test_the_bounds_follow_priority_aging_and_a_lower_band_loses_a_tie() -> None:
    """Catches a count by due time alone: a job two bands higher goes first if due up to 20 s after this one, a
    job one band lower only if due more than 10 s before it (on a tie the higher band goes first)."""
    job = _job(priority=1, not_before=NOW - 60_000)
    own = ReadyQueue(0, 1)
    bounds = dict(explain.ahead_bounds(job, own, [ReadyQueue(1, 3), ReadyQueue(0, 0), own], NOW))
    assert bounds[own] == NOW - 60_000
    assert bounds[ReadyQueue(1, 3)] == NOW - 60_000 + 2 * AGING_MS
    assert bounds[ReadyQueue(0, 0)] == NOW - 60_000 - AGING_MS - 1
    # a due job: jobs that become due only later are not ahead of a claim made now
    soon = dict(explain.ahead_bounds(_job(priority=0, not_before=NOW), ReadyQueue(0, 0), [ReadyQueue(0, 9)], NOW))
    assert soon[ReadyQueue(0, 9)] == NOW
    assert [queue for queue, _ in explain.ahead_bounds(job, own, [ReadyQueue(0, 0), ReadyQueue(1, 3)], NOW)] == [
        own, ReadyQueue(1, 3), ReadyQueue(0, 0)]


def test_the_count_stops_at_its_bound_and_says_at_least() -> None:
    """Catches a count that reads a huge backlog whole, that counts the job itself, or a job of its band due
    at its time with a higher job id (the claim takes that one after it)."""
    job = _job()
    reads: list[int] = []

    def due(queue: ReadyQueue, by: int, limit: int) -> list[DueJob]:
        """500 jobs due in each queue; the job itself first in its own (shard 0)."""
        reads.append(limit)
        ids = [JOB_ID if queue.shard == 0 and n == 0 else f"{queue.shard:08x}{n:024x}" for n in range(500)]
        return [DueJob(job_id, NOW) for job_id in ids[:limit]]

    queues = [(ReadyQueue(shard, 0), NOW) for shard in range(3)]
    assert explain.count_ahead(due, job, queues, limit=100) == Ahead(100, at_least=True)
    assert reads == [101, 1]  # 100 others in its own queue, then one more is enough to say "at least"
    # due at its time: a lower job id goes before it, a higher one after
    tied = [DueJob("0" * 32, NOW), DueJob(JOB_ID, NOW), DueJob("1" * 32, NOW)]
    assert explain.count_ahead(lambda queue, by, limit: tied, job, queues) == Ahead(3)
    assert explain.count_ahead(lambda *_: [], job, queues * 10, max_queries=4) == Ahead(0, at_least=True)


def test_the_count_ahead_is_each_jobs_place_in_the_claim_order() -> None:
    """The count, read from the ready index as GET /jobs/{id}/explain reads it, against the order the claim path
    (onward.store.claims) really takes a tenant's jobs: jobs of random priorities over 3 ready shards, created 3.3 s
    apart (no ties under 10 s aging), then claimed one by one."""
    rng = random.Random(7)
    clock = ManualClock(NOW)
    store = JobStore.in_memory(clock=clock, rng=random.Random(1))
    store.register_tenant(Tenant("acme", ready_shards=3))
    jobs = []
    for _ in range(30):
        jobs.append(store.create("acme", NewJob(type="demo.echo", priority=rng.choice([0, 0, 1, 4, 9]))).job)
        clock.advance(3.3)
    claims = ClaimCounts(clock.now - WINDOW_MS, clock.now, 60_000, {}, examined=0, complete=True)
    ahead = {}
    for job in jobs:
        ahead[job.job_id] = explain.waiting_of(StoreReads(store), store.row(job.job_id), claims, clock.now).ahead.count
    order = []
    while (lease := store.claim("w", 30)) is not None:
        order.append(lease.job_id)
    assert sorted(order) == sorted(job.job_id for job in jobs)
    assert order != [job.job_id for job in jobs]  # priorities and aging reorder them: not creation order
    assert [ahead[job_id] for job_id in order] == list(range(len(jobs)))


def test_the_count_ahead_is_each_jobs_place_when_jobs_come_in_bursts_with_ties() -> None:
    """One process claims a tenant's jobs in due order, and the count of jobs ahead is each job's place in
    that order, for jobs created 40 ms apart and several in the same millisecond (over 3 ready shards and 2
    bands): jobs due at the same millisecond go in job id order. Catches the claim's old shuffle of the jobs
    due within 1 s of a queue's oldest (a burst ran in random order, so the count was no job's place), and a
    count that takes a job due in the same millisecond as ahead whatever its id (the claim takes it after)."""
    rng = random.Random(11)
    clock = ManualClock(NOW)
    store = JobStore.in_memory(clock=clock, rng=random.Random(3))
    store.register_tenant(Tenant("acme", ready_shards=3))
    jobs = []
    for _ in range(12):
        jobs += [store.create("acme", NewJob(type="demo.echo", priority=rng.choice([0, 1]))).job
                 for _ in range(rng.choice([1, 1, 3]))]  # (3: created in the same millisecond)
        clock.advance(0.04)
    claims = ClaimCounts(clock.now - WINDOW_MS, clock.now, 60_000, {}, examined=0, complete=True)
    ahead = {}
    for job in jobs:
        ahead[job.job_id] = explain.waiting_of(StoreReads(store), store.row(job.job_id), claims, clock.now).ahead.count
    order = []
    while (lease := store.claim("w", 30)) is not None:
        order.append(lease.job_id)
    by_id = {job.job_id: job for job in jobs}
    in_band = {band: [job_id for job_id in order if by_id[job_id].priority == band] for band in (0, 1)}
    for band, claimed in in_band.items():
        assert claimed == sorted(claimed, key=lambda job_id: (by_id[job_id].not_before, job_id)), band
    assert [ahead[job_id] for job_id in order] == list(range(len(jobs)))


# --- delayed jobs: NewJob at the edge -----------------------------------------------------------------------------

def _at(seconds: float, zone: timedelta = timedelta(0)) -> str:
    """NOW + `seconds` as RFC 3339 in the zone `zone` ahead of UTC."""
    return datetime.fromtimestamp(NOW / 1000 + seconds, UTC).astimezone(timezone(zone)).isoformat()


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"run_at": _at(60), "delay_s": 5}, "delay_s", "not both"),
    ({"run_at": "2027-01-15T10:00:00"}, "run_at", "timezone"),
    ({"run_at": 1_800_000_060}, "run_at", "with its zone"),
    ({"run_at": _at(-61)}, "run_at", "in the past"),
    ({"run_at": _at(366 * 86_400)}, "run_at", "365 days"),
    ({"delay_s": -1}, "delay_s", "greater than or equal to 0"),
    ({"delay_s": 366 * 86_400}, "delay_s", "less than or equal"),
    ({"delay_s": float("nan")}, "delay_s", "finite"),
    ({"delay_s": "60"}, "delay_s", "valid number"),
])
def test_a_start_time_that_cannot_be_meant_is_refused_naming_its_field(body, field, message) -> None:
    """Catches both fields taken together, a time without a zone read in the server's, a time long past taken
    as "now", a delay past a year, and a number read as text."""
    with pytest.raises(ValidationError) as raised:
        NewJob.model_validate({"type": "demo.echo", **body}, context={"now_ms": NOW})
    errors = raised.value.errors()
    assert [error["loc"] for error in errors] == [(field,)], errors
    assert message in errors[0]["msg"]


def test_run_at_and_delay_s_set_when_the_job_is_due() -> None:
    """Catches a run_at in another zone read as UTC, and a run_at a little in the past making the job due before
    it was created."""
    later = NewJob.model_validate({"type": "demo.echo", "run_at": _at(3600, timedelta(hours=2))},
                                  context={"now_ms": NOW})
    created = lifecycle.create(JOB_ID, "acme", later, NOW).after
    assert (created.not_before, created.run_at, created.state) == (NOW + 3_600_000, NOW + 3_600_000, JobState.QUEUED)
    skewed = NewJob.model_validate({"type": "demo.echo", "run_at": _at(-30)}, context={"now_ms": NOW})
    assert lifecycle.create(JOB_ID, "acme", skewed, NOW).after.not_before == NOW
    delayed = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo", delay_s=1.5), NOW).after
    assert (delayed.not_before, delayed.run_at) == (NOW + 1_500, NOW + 1_500)
    assert lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo"), NOW).after.run_at is None

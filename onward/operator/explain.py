"""Why a job that is not running waits, and until when: decided from values its caller read (pure, no I/O).

GET /jobs/{job_id}/explain reads the job row, its tenant's settings and dispatch counters
(`TenantState`), the claims of the last minutes (onward.operator.claim_history) and the tenant's jobs that go before
this one (`count_ahead` over `ahead_bounds`, through the ready index), and asks `explain`. The reason is the
first of these that holds:

- `rate_limited`: it reserved the token of its rate limits (onward.store.rate_limits) for a moment to come
  and waits for it; `until` is that moment;
- `scheduled`: queued with a run_at (or delay_s) still to come; `until` is when it becomes due;
- `backoff`: in retry_wait after a failed attempt; `until` is its next attempt's earliest start;
- `snoozed`: queued again by its handler's Snooze (issue 37); `until` is when it is due again;
- `tenant_at_cap`: due, and its tenant has `cap` jobs running: one of them must end first (caps flex: a
  tenant at its cap is served past it only when no tenant below its cap has a due job);
- `no_worker`: due, and no worker claimed any job of its tenant in the window: nothing is taking its work;
- `waiting_for_share`: due, workers are claiming its tenant's jobs: `ahead` jobs of its tenant go before
  it, and its tenant gets its fair share of the workers (beside its `weight`).

Every reason, and every figure a tenant is shown, is its tenant's own: what other tenants do changes none of
them (a tenant must not learn another's activity from it). Only an operator bound to no tenant also gets the
window's claims of every tenant (`Throughput.platform_claims`, and the tenant's `share` of them).

The jobs ahead are those a claim takes before it by the claim's rule (onward.store.claims, onward.store.claim_order):
the highest aged priority first, within a band due order, jobs due in the same millisecond by job id; so
the count is the job's place in the order one worker process claims its tenant's jobs. Processes racing
for one ready queue spread their claims over its jobs due within SPREAD_MS (1 s) of its oldest: then jobs
due up to 1 s before or after it may start after or before it.

A job that is not waiting (running, or ended) is answered as such (`running`, `finished`), with nothing
estimated. The ETA is when the tenant makes its (ahead + 1)-th claim from now at its claims per minute over
the window, never before `until`: an estimate from recent throughput, None when the tenant claimed nothing
in the window (its throughput is unknown) or nothing claims (`no_worker`). With `ahead.at_least` the count
stopped at its bound, and the ETA is no earlier than the one given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from onward.domain.clock import EpochMs, iso
from onward.domain.dispatch import AGING_MS
from onward.domain.models import Job
from onward.domain.pauses import FlowSwitches
from onward.domain.states import CLAIMABLE_STATES, JobState, RunOutcome, is_terminal
from onward.operator.claim_history import ClaimCounts
from onward.store.ports import DueJob, JobRow, Tenant, TenantState
from onward.store.ports.ready_queues import ReadyQueue, ready_queue
from onward.store.reads import StoreReads

MAX_AHEAD = 100  # jobs ahead counted at most: beyond, "at least MAX_AHEAD"
MAX_AHEAD_QUERIES = 16  # ready queues read at most for them (a tenant's shards x bands with work)
MINUTE_MS = 60_000

# One read of a ready queue of the job's tenant: its jobs due by the bound, earliest first, up to the limit
# (StoreReads.due with the tenant bound in).
DueReader = Callable[[ReadyQueue, EpochMs, int], Sequence[DueJob]]


class WaitReason(StrEnum):
    SCHEDULED = "scheduled"
    BACKOFF = "backoff"
    TENANT_AT_CAP = "tenant_at_cap"
    WAITING_FOR_SHARE = "waiting_for_share"
    NO_WORKER = "no_worker"
    RUNNING = "running"  # not waiting: a worker holds it
    FINISHED = "finished"  # not waiting: it ended
    RATE_LIMITED = "rate_limited"  # rate limits (issue 37): waits for the token it reserved (`until`)
    SNOOZED = "snoozed"  # snooze (issue 37): its handler asked to run again later; `until` is when
    PAUSED = "paused"  # its tenant or type is paused, or the platform drains (issue 37: pause)
    CONCURRENCY_LIMITED = "concurrency_limited"  # held aside: its concurrency key is at its limit (issue 37)


@dataclass(frozen=True)
class Ahead:
    """Jobs of the tenant that a claim takes before this one; `at_least`: the count stopped at its bound."""

    count: int
    at_least: bool = False


@dataclass(frozen=True)
class Throughput:
    """Claims (attempts started) in the recent window: the tenant's, and every tenant's for a caller that may
    see them (None: not this caller's to know)."""

    tenant_claims: int
    platform_claims: int | None
    window_ms: int
    complete: bool  # every outbox entry of the window was read

    @classmethod
    def of(cls, tenant_id: str, claims: ClaimCounts, *, platform: bool = True) -> Throughput:
        """The tenant's throughput from the window's counts; with `platform`, every tenant's count too (`claims`
        then holds every tenant's)."""
        every = sum(claims.total(tenant) for tenant in claims.by_tenant) if platform else None
        return cls(claims.total(tenant_id), every, claims.until_ms - claims.since_ms, claims.complete)

    @property
    def per_minute(self) -> float:
        """The tenant's claims per minute over the window."""
        return self.tenant_claims * MINUTE_MS / self.window_ms if self.window_ms > 0 else 0.0

    @property
    def share(self) -> float | None:
        """The tenant's share of every claim in the window (0 to 1); None when nothing claimed, or when every
        tenant's claims are not known."""
        return self.tenant_claims / self.platform_claims if self.platform_claims else None


@dataclass(frozen=True)
class Waiting:
    """What a waiting job's explanation is decided from (read by the caller, all at about `now`)."""

    tenant: TenantState
    throughput: Throughput
    ahead: Ahead
    paused_by: str | None = None  # what holds it, as a sentence (`paused_by`); None: nothing (issue 37: pause)
    # concurrency keys (issue 37): "N of LIMIT running for key K" when it is held on its key; None: it is not
    concurrency_limited_by: str | None = None


@dataclass(frozen=True)
class Explanation:
    """Why the job is where it is. `until`: when the reason ends by itself (scheduled, backoff); `eta`: when it
    is likely to start. The rest is what the reason was decided from (None for a job that is not waiting)."""

    reason: WaitReason
    until: EpochMs | None = None
    eta: EpochMs | None = None
    waiting: Waiting | None = None

    @property
    def detail(self) -> str:
        """The explanation as one sentence (times in UTC)."""
        return _SENTENCES[self.reason](self)


def waits(job: Job) -> bool:
    """True for a job a claim may take (queued, retry_wait): the only ones `explain` needs a Waiting for."""
    return job.state in CLAIMABLE_STATES


def ahead_bounds(job: Job, own: ReadyQueue, queues: Iterable[ReadyQueue], now: EpochMs,
                 aging_ms: int = AGING_MS) -> list[tuple[ReadyQueue, EpochMs]]:
    """The tenant's ready queues to read for the jobs a claim takes before `job` (in `own`) once it is due
    (at max(now, its due time)), each with the due time up to which its jobs go first; its own queue first,
    then the highest band first.

    A claim takes the due job of the highest aged priority (onward.domain.dispatch.aged_priority: a band more per
    `aging_ms` due; on a tie the higher band), so a job of band b due at t goes before `job` (band p, due at
    d) when b + (now - t) / aging > p + (now - d) / aging, that is t < d + (b - p) * aging: a bound that does
    not move with the time of the claim. Jobs due only after that time are not counted. In its own band a
    job due at d too goes first only with a lower job id (`count_ahead`)."""
    claimed_at = max(now, job.not_before)
    others = sorted({queue for queue in queues if queue != own}, key=lambda queue: (-queue.priority, queue.shard))
    bounds = []
    for queue in [own, *others]:
        band_gap = queue.priority - job.priority
        tie = 1 if band_gap < 0 else 0  # a lower band loses a tie: strictly before the bound
        bounds.append((queue, min(claimed_at, job.not_before + band_gap * aging_ms - tie)))
    return bounds


def count_ahead(due: DueReader, job: Job, bounds: Sequence[tuple[ReadyQueue, EpochMs]], *,
                limit: int = MAX_AHEAD, max_queries: int = MAX_AHEAD_QUERIES) -> Ahead:
    """How many jobs go before `job`: those due by each queue's bound (`ahead_bounds`), in its own band
    only those before it in due order (`DueJob.rank`: due at its time, a lower job id), the job itself left
    out; at most `limit` (at_least when there are more, or when queues beyond `max_queries` went unread).
    (A read answers in due order, so in its own band the jobs ahead are the first of each read.)"""
    count = 0
    place = DueJob(job.job_id, job.not_before).rank()
    for read, (queue, bound) in enumerate(bounds):
        if read >= max_queries:
            return Ahead(count, at_least=True)
        found = [entry for entry in due(queue, bound, limit - count + 1)
                 if entry.job_id != job.job_id and (queue.priority != job.priority or entry.rank() < place)]
        count += len(found)
        if count > limit:
            return Ahead(limit, at_least=True)
    return Ahead(count)


def waiting_of(reads: StoreReads, row: JobRow, claims: ClaimCounts, now: EpochMs, *,
               platform: bool = False) -> Waiting:
    """What the explanation of a waiting job (`row`, as read with its ready shards) is decided from: its
    tenant's settings (read now, not from a cache) and counters (one batch), `claims` of the recent window
    (with `platform`, every tenant's, for a caller that may see them), and the jobs of its tenant ahead of it
    (the ready index: `ahead_bounds`, `count_ahead`)."""
    job = row.job
    tenant = reads.tenants([job.tenant_id]).get(job.tenant_id) or Tenant(job.tenant_id)
    state = reads.tenant_counters({tenant: None}).get(job.tenant_id) or TenantState(tenant)
    bounds = ahead_bounds(job, ready_queue(job, row.ready_shards), state.queues_with_work(), now)
    ahead = count_ahead(lambda queue, due_by, limit: reads.due(job.tenant_id, queue, due_by, limit), job, bounds)
    return Waiting(state, Throughput.of(job.tenant_id, claims, platform=platform), ahead)


def explain(job: Job, now: EpochMs, waiting: Waiting | None = None) -> Explanation:
    """Why `job` is not running (or that it is running, or ended), as of `now`. A job that waits (`waits`)
    needs `waiting`: ValueError without it."""
    if job.state is JobState.RUNNING:
        return Explanation(WaitReason.RUNNING)
    if is_terminal(job.state):
        return Explanation(WaitReason.FINISHED)
    if waiting is None:
        raise ValueError(f"job {job.job_id} is {job.state.value}: explaining its wait needs its tenant's load")
    until = job.not_before if job.not_before > now else None
    reason = _reason(job, until, waiting)
    eta = None if reason in (WaitReason.NO_WORKER, WaitReason.PAUSED, WaitReason.CONCURRENCY_LIMITED) else _eta(
        waiting, until, now)
    return Explanation(reason, until, eta, waiting)


def _reason(job: Job, until: EpochMs | None, waiting: Waiting) -> WaitReason:
    if waiting.paused_by is not None:  # (before its time too: it will not start when it comes)
        return WaitReason.PAUSED
    if waiting.concurrency_limited_by is not None:  # (issue 37) it starts once an attempt of its key ends
        return WaitReason.CONCURRENCY_LIMITED
    if until is not None and job.rate_reserved_at == job.not_before:  # rate limits (issue 37)
        return WaitReason.RATE_LIMITED
    if until is not None and job.last_outcome is RunOutcome.SNOOZED and job.state is JobState.QUEUED:
        return WaitReason.SNOOZED
    if until is not None:
        return WaitReason.BACKOFF if job.state is JobState.RETRY_WAIT else WaitReason.SCHEDULED
    cap = waiting.tenant.tenant.policy.cap
    if cap is not None and waiting.tenant.usage.running >= cap:
        return WaitReason.TENANT_AT_CAP
    if waiting.throughput.tenant_claims == 0:  # its own: whether others work is not its tenant's to know
        return WaitReason.NO_WORKER
    return WaitReason.WAITING_FOR_SHARE


def _eta(waiting: Waiting, until: EpochMs | None, now: EpochMs) -> EpochMs | None:
    """The tenant's (ahead + 1)-th claim from now at its recent rate, not before `until`; None: no rate."""
    per_minute = waiting.throughput.per_minute
    if per_minute <= 0:
        return None
    turn = now + math.ceil((waiting.ahead.count + 1) * MINUTE_MS / per_minute)
    return max(turn, until or now)


def _ahead_text(ahead: Ahead) -> str:
    if ahead.at_least:
        return f"at least {ahead.count} jobs of its tenant go before it"
    if ahead.count == 0:
        return "no job of its tenant goes before it"
    if ahead.count == 1:
        return "1 job of its tenant goes before it"
    return f"{ahead.count} jobs of its tenant go before it"


def _eta_text(explanation: Explanation) -> str:
    if explanation.eta is None:
        return "no estimate of when it starts (its tenant claimed nothing lately)"
    return f"likely to start around {iso(explanation.eta)}"


def _sentence_scheduled(explanation: Explanation) -> str:
    assert explanation.until is not None
    return f"scheduled: due at {iso(explanation.until)} (its run_at); {_eta_text(explanation)}"


def _sentence_backoff(explanation: Explanation) -> str:
    assert explanation.until is not None
    return f"backing off after a failed attempt: next attempt at {iso(explanation.until)} at the earliest; " \
           f"{_eta_text(explanation)}"


def _sentence_rate_limited(explanation: Explanation) -> str:
    assert explanation.until is not None
    return f"rate limited until {iso(explanation.until)}: it holds the token of one of its rate limits for then " \
           f"(its key's, its type's or its tenant's); {_eta_text(explanation)}"


def _sentence_at_cap(explanation: Explanation) -> str:
    assert explanation.waiting is not None
    tenant = explanation.waiting.tenant
    return f"its tenant is at its cap: {tenant.usage.running} running of {tenant.tenant.policy.cap} at once; " \
           f"{_ahead_text(explanation.waiting.ahead)}; {_eta_text(explanation)}"


def _sentence_share(explanation: Explanation) -> str:
    assert explanation.waiting is not None
    share = explanation.waiting.throughput.share
    shown = "" if share is None else f" ({share:.0%} of recent claims)"
    return f"waiting for its tenant's share of the workers{shown}; " \
           f"{_ahead_text(explanation.waiting.ahead)}; {_eta_text(explanation)}"


def _sentence_no_worker(explanation: Explanation) -> str:
    minutes = 0 if explanation.waiting is None else explanation.waiting.throughput.window_ms // MINUTE_MS
    return f"no worker claimed any job of its tenant in the last {minutes} minutes: nothing is taking its work"


_SENTENCES: dict[WaitReason, Callable[[Explanation], str]] = {
    WaitReason.SCHEDULED: _sentence_scheduled,
    WaitReason.BACKOFF: _sentence_backoff,
    WaitReason.TENANT_AT_CAP: _sentence_at_cap,
    WaitReason.WAITING_FOR_SHARE: _sentence_share,
    WaitReason.NO_WORKER: _sentence_no_worker,
    WaitReason.RUNNING: lambda _: "running: a worker holds it",
    WaitReason.FINISHED: lambda _: "it has ended: it waits for nothing",
    WaitReason.RATE_LIMITED: _sentence_rate_limited,  # rate limits (issue 37)
    WaitReason.SNOOZED: lambda explanation: f"snoozed until {iso(explanation.until or 0)} (its handler asked to run "
                                            f"again then; no attempt charged); {_eta_text(explanation)}",
    WaitReason.PAUSED: lambda explanation: f"paused: {explanation.waiting.paused_by if explanation.waiting else ''}; "
                                           "it keeps its place and starts once resumed",
    WaitReason.CONCURRENCY_LIMITED: lambda explanation: "concurrency limited: " + (  # concurrency keys (issue 37)
        (explanation.waiting.concurrency_limited_by or "") if explanation.waiting else ""),
}


def paused_by(switches: FlowSwitches, job: Job) -> str | None:
    """What holds a waiting job from starting (onward.domain.pauses), as a sentence; None when nothing does. Only
    the job's own tenant's pauses and the types paused for every tenant are named, and the drain switch."""
    if switches.draining:
        return "the platform is drained for maintenance: no job starts until it is back"
    pause = switches.paused_by(job.tenant_id, job.type)
    return pause.describe() if pause is not None else None

"""What the drill recorded while it ran, and what it read back at the end: plain frozen values the audit
(tests/drill/checks.py) reads. Nothing here talks to AWS.

Times are wall-clock milliseconds of this machine (the Regions share it: the drill skews no clock)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from onward.domain.models import Job, Run


@dataclass(frozen=True)
class Ack:
    """A job a client was answered for (201): by which Region, when."""

    job_id: str
    region: str
    acked_at_ms: int


@dataclass(frozen=True)
class Read:
    """One read of a job's status in one Region over the run: `source` "view" (the status view, what the page
    shows) or "row" (the job row, the authority); `seq` orders the reads of one reader."""

    region_role: str  # "A" (the old home) or "B" (the new one)
    source: str
    job_id: str
    status: str
    version: int
    seq: int
    at_ms: int


@dataclass(frozen=True)
class Execution:
    """One attempt's handler run: where, which attempt, when it started and ended."""

    region_role: str
    job_id: str
    attempt: int
    started_ms: int
    ended_ms: int


@dataclass(frozen=True)
class PageRead:
    """The freshness B's API showed at one moment after the failover: its `replication` block (None: there was
    none) and whether the drill had finished reconciling then."""

    at_ms: int
    stale: bool
    replication: Mapping[str, object] | None
    reconciled_by_then: bool


@dataclass(frozen=True)
class Missing:
    """A part of issue 39 the drill needs and did not find (its check fails for that reason, never passes)."""

    part: str
    why: str


@dataclass(frozen=True)
class DrillHistory:
    """Everything the audit reads: the run's record and B's final state."""

    partitioned_at_ms: int  # T: the replicator cut A from B
    rpo_s: float  # the documented recovery point for this link (see checks.rpo_of)
    acks: Sequence[Ack]
    reads: Sequence[Read]
    executions: Sequence[Execution]
    pages: Sequence[PageRead]
    jobs_b: Mapping[str, Job]  # B's job rows at the end
    epochs_b: Mapping[str, int]  # B's rows' `region_epoch` at the end (absent: 0)
    runs_b: Mapping[str, Sequence[Run]]  # B's run records at the end, per job by attempt
    versions_a: Mapping[str, int]  # each job's highest epoch-0 version seen anywhere (A's rows, B before the fence)
    overlap_jobs: frozenset[str]  # the jobs the overlap report (onward.operator.overlaps) lists
    first_claim_b_ms: int | None  # B's first claim after the failover (RTO ends there)
    reconciled: int  # late writes the reconciler undid or adopted
    missing: Sequence[Missing] = field(default=())  # the parts of issue 39 that were not there
    submitted: int = 0  # jobs the clients tried to create (acknowledged or not)
    healed_at_ms: int | None = None  # when the link healed (None: it did not)
    fence_ends_ms: int | None = None  # the epoch item's fenced_at + the fence window (None: no failover happened)

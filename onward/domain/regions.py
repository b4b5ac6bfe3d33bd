"""The region epoch (issue 39, docs/regional-recovery.md): which Region is home, and what a failover does to a
job's row (pure).

The home is named by an epoch `e` (0: the deployment never failed over). Every item the store writes carries
the epoch it was written under (`region_epoch`), every transition is conditioned on the row's epoch being the
writer's, and a job's versions under epoch `e` start at `first_version_of(e)` = e x 2^32 + 1, above any
version of an earlier epoch: a version compared anywhere (the view's guard, webhooks, `wait`) stays monotonic
across a failover, whatever the old home wrote that never replicated.

`adoption` decides what the new home does to a row of an older epoch: a running job's attempt is closed
`region_failover` (not charged: the platform failed, not the job) and the job queued again, due now; any
other row keeps its state and takes the new epoch's version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.lifecycle import Change, RunClosure
from onward.domain.models import Job
from onward.domain.states import JobState, RunOutcome, Transition, check_transition, is_terminal

EPOCH_VERSION_BASE = 2**32
# A job's attempts under epoch e > 0 are numbered from e x ATTEMPTS_PER_EPOCH + 1 (fix of issue 39's drill): an
# attempt the new home runs never shares its number, so its run record `RUN#<attempt>`, with an attempt the old
# home started that had not replicated (last writer wins would keep one of the two and drop the other unseen).
# Run keys stay 6 digits up to epoch 99; an old home reaches 10,000 attempts of one job in no real policy.
ATTEMPTS_PER_EPOCH = 10_000


def first_version_of(epoch: int) -> int:
    """A job's first version under `epoch` (epoch 0: 1, today's versions)."""
    if epoch < 0:
        raise ValueError(f"a region epoch is never negative: {epoch}")
    return epoch * EPOCH_VERSION_BASE + 1


def epoch_of_version(version: int) -> int:
    """The epoch a version was first written under (the inverse of first_version_of for its range)."""
    if version < 1:
        raise ValueError(f"versions start at 1: {version}")
    return (version - 1) // EPOCH_VERSION_BASE


def first_attempt_of(epoch: int) -> int:
    """The attempt number a job's first claim under `epoch` takes at least (epoch 0: 1, today's numbers)."""
    if epoch < 0:
        raise ValueError(f"a region epoch is never negative: {epoch}")
    return epoch * ATTEMPTS_PER_EPOCH + 1


def attempts_apart(job: Job, epoch: int) -> dict[str, int]:
    """`attempt` and `attempt_floor` of `job` adopted into `epoch`: the attempt raised to the epoch's range (its
    next claim is `first_attempt_of(epoch)` or later) and the floor by as much, so the attempts it used stay
    the same (the budget, `attempts_used`, is unchanged)."""
    attempt = max(job.attempt, first_attempt_of(epoch) - 1)
    return {"attempt": attempt, "attempt_floor": job.attempt_floor + attempt - job.attempt}


def version_under(version: int, epoch: int) -> int:
    """The version a row at `version` takes at its next transition written under `epoch`: the next one, and
    never below the epoch's first (so above every version an earlier epoch may have written)."""
    return max(version + 1, first_version_of(epoch))


@dataclass(frozen=True)
class RegionEpoch:
    """The epoch item (`REGION` / `EPOCH` in the jobs table): which Region is home since when and why. Epoch
    0 with home None: the deployment never failed over."""

    epoch: int
    home: str | None
    previous_home: str | None
    fenced_at: EpochMs | None
    decided_by: str | None
    reason: str | None
    # when `onward failover` finished adopting the old epoch's rows and rebuilding the counters (None: not yet, or
    # never failed over); until then the new home's API refuses writes (`writes_refused`)
    adopted_at: EpochMs | None = None

    @classmethod
    def never_failed_over(cls) -> RegionEpoch:
        return cls(epoch=0, home=None, previous_home=None, fenced_at=None, decided_by=None, reason=None)


@dataclass(frozen=True)
class WritesRefused:
    """Why a Region's API refuses writes now: it is the new home of `epoch` and its adoption is not done."""

    epoch: int
    home: str
    previous_home: str | None

    def detail(self) -> str:
        return (f"a failover to {self.home} (region epoch {self.epoch}, from {self.previous_home or 'the old home'}) "
                "is adopting the old home's jobs: writes are refused until it is done; reads still answer")


def writes_refused(item: RegionEpoch, region: str | None) -> WritesRefused | None:
    """Whether `region`'s API must refuse writes (docs/regional-recovery.md "How it is fenced", step 3): from the
    moment the epoch item names `region` home at an epoch above 0 until `onward failover` records its adoption
    done (`adopted_at`). A write before that would be judged against rows the adoption has not restamped yet (a
    cancel of an unadopted job is refused, a retry of one races its adoption) and a create would enter queue
    entries that the counters' rebuild then sets anew. Another Region's epoch item (replicated) refuses nothing
    here, nor an unknown Region (None): only the new home waits for its own adoption."""
    if item.epoch <= 0 or item.adopted_at is not None or item.home is None or item.home != region:
        return None
    return WritesRefused(epoch=item.epoch, home=item.home, previous_home=item.previous_home)


class Witness(NamedTuple):
    """The witness record in a third Region (`/onward/<stack>/home`): the home and its epoch."""

    home: str
    epoch: int


def adoption(job: Job, epoch: int, now: EpochMs) -> Change:
    """What the home of `epoch` writes to adopt `job`, a row of an earlier epoch (the store conditions the
    write on the row's epoch being below `epoch` and its version as read).

    Running: its run record is closed `region_failover` and the job queued again, due now, not charged the
    attempt (`attempt_floor` rises with it, as a release's: the next claim's attempt is the next number, the
    fencing token, but the budget counts it unused); cancelled instead when its cancel was requested (its
    worker, in the old home, will never acknowledge). Anything else keeps its state and takes the epoch's
    version (an ended row too: a replay in the new home then writes above the old home's versions). A row that
    has not ended takes the epoch's attempt numbers too (`attempts_apart`): an attempt the old home started
    that never replicated keeps a run record of its own when it arrives (the fence reconciler marks it)."""
    if job.version >= first_version_of(epoch) and epoch > 0:
        raise ValueError(f"job {job.job_id} v{job.version} is already at epoch {epoch_of_version(job.version)}'s "
                         f"versions; it cannot be adopted into epoch {epoch}")
    version = version_under(job.version, epoch)
    if job.state is not JobState.RUNNING:
        if is_terminal(job.state):  # (an ended row's is a restamp, no transition: it stays what it is)
            return Change(Transition.ADOPT, job, job.model_copy(update={"version": version}))
        check_transition(Transition.ADOPT, job.state, job.state)
        return Change(Transition.ADOPT, job, job.model_copy(update={"version": version, **attempts_apart(job, epoch)}))
    state = JobState.CANCELLED if job.cancel_requested else JobState.QUEUED
    check_transition(Transition.ADOPT, job.state, state)
    apart = attempts_apart(job, epoch)
    after = job.model_copy(update={
        "version": version, "updated_at": now, "state": state, "not_before": now,
        "attempt": apart["attempt"], "attempt_floor": apart["attempt_floor"] + 1,
        "last_outcome": RunOutcome.REGION_FAILOVER,
        "lease_owner": None, "lease_expires_at": None,
    })
    return Change(Transition.ADOPT, job, after, close_run=RunClosure(job.attempt, RunOutcome.REGION_FAILOVER, now))

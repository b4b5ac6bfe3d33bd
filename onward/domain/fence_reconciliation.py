"""What the fence reconciler does with one record of the jobs table's stream in the Region that is home at
region epoch `e` (pure): docs/regional-recovery.md, "How it is fenced", "What the fence does not rely on".

After a failover every write of the new home carries `region_epoch = e`; a write that arrives with a lower
epoch came from the old home (replicated, last writer wins let it in). For a record's old and new images
(plain values, as a stream record's images deserialise; None when absent):

- an item removed (no new image), or not an item of a job's partition (`JOB#<id>`): nothing;
- the new image's `region_epoch` >= e (this Region's own write, or a newer one): nothing;
- the old image's epoch is higher than the new image's (a late write overwrote a newer epoch's item): RESTORE
  the old image, and mark the late write's attempt's run record (`late_report`, `fenced_by: region_epoch`,
  `overlapped_with` the attempts that ran in the new home);
- a job row below e never adopted here (old image absent, or below e too): ADOPT the job (store.adopt: a
  terminal job restamped as it is, any other queued again);
- a run record below e that overwrote no newer epoch's item and carries no late mark (`fenced_by`): MARK it,
  when its job is adopted here (the consumer reads the job's row), as a late report overlapped with the
  attempts the new home ran: an attempt the old home started whose claim never replicated before the failover
  (the new home numbers its attempts apart, onward.domain.regions.attempts_apart, so it arrives as an item
  of its own and is the only trace that the job ran in both Regions);
- a running attempt's partial run record (no `worker_id`: its progress or overlap marks, written before the
  transition ending the attempt writes the record whole, issue 34): nothing, its row or its close decides;
- any other item of a job below e never adopted (a result item written before issue 34): nothing, its row's
  adoption decides;
- a tenant's RUNNING counter or queue entry of epoch >= e replaced by a late write (new image below e, old
  image at e or later): CORRECT it by adding, to each of its counts, the old image's minus the late one's
  (absent: 0). Every write of the new home to these items ADDs to its counts, so whatever it added since the
  late write landed stays, and the counts end as if the late write had never landed; restoring the old image
  instead would drop what the new home added meanwhile (fix of issue 39's drill, its second finding);
  (a counter item the new home never had, created by a late write, keeps the old home's counts: a residual
  docs/regional-recovery.md names);
- any other item (settings, clocks, the registry): nothing.

The restore names the late image only by its epoch (the consumer's condition is "the item is still below e"):
of two late writes in a row the first record restores the adopted image over whichever one is there, and the
second finds the job adopted (its ADOPT is a no-op). A restore is a write at the restored image's epoch, so its
own stream record is never a RESTORE again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.states import JobState, RunOutcome, is_terminal

REGION_EPOCH = "region_epoch"  # the attribute every item the store writes carries (issue 39's shared interface)
FENCED_BY = "fenced_by"  # on a run record: what fenced its late report; here always FENCED_BY_REGION_EPOCH
FENCED_BY_REGION_EPOCH = "region_epoch"
REGION_FAILOVER = "region_failover"  # RunOutcome.REGION_FAILOVER: the run the adoption closed
WORKER_ID = "worker_id"  # on every whole run record; a running attempt's partial one has none (issue 34)
RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT = "run_claimed_at", "run_lease_expires_at"  # a running row's attempt's claim
JOB_PREFIX = "JOB#"
JOB_SK = "JOB"
RUN_PREFIX = "RUN#"
# The counts of a tenant's counter items, by `entity` (onward.store.dynamo.keys; every write ADDs to them):
# a RUNNING counter's usage (onward.store.dynamo.writes.usage_adds), a queue entry's total, bands and entries,
# and the usage of the RUNNING counter kept on it (issue 34).
USAGE_COUNTS = ("running", "ended_ms", "started_ms_sum", "ended")
COUNTS_BY_ENTITY: dict[str, tuple[str, ...]] = {
    "tenant_running": USAGE_COUNTS,
    "tenant_queue": ("waiting", "entered", *(f"w{priority}" for priority in range(10)), *USAGE_COUNTS),
}

# What a late job row says its attempt reported, by the state it wrote (None: a claim or a renewal, no outcome).
_REPORTED_BY_STATE: dict[JobState, RunOutcome | None] = {
    JobState.QUEUED: None,  # released, snoozed or requeued: the row alone cannot tell
    JobState.RUNNING: None,
    JobState.RETRY_WAIT: RunOutcome.FAILED,
    JobState.SUCCEEDED: RunOutcome.SUCCEEDED,
    JobState.DEAD: RunOutcome.FAILED,
    JobState.CANCELLED: RunOutcome.CANCELLED,
    JobState.QUARANTINED: RunOutcome.FAILED,
}


class Action(StrEnum):
    NOTHING = "nothing"
    RESTORE = "restore"
    ADOPT = "adopt"
    MARK = "mark"  # fix of issue 39's drill: an old home's run record arriving as an item of its own
    CORRECT = "correct"  # fix of issue 39's drill: a late write replaced a tenant counter of this epoch


@dataclass(frozen=True)
class LateWrite:
    """An old-epoch write of one attempt that arrived after its job was adopted: marked on that attempt's run
    record. `reported`: the outcome it wrote (None: a claim or a lease renewal); `at`: when it was written
    (None: the image does not say; the consumer uses the time it saw it)."""

    job_id: str
    attempt: int
    reported: RunOutcome | None
    at: EpochMs | None
    # a late running row's attempt as its claim wrote it (worker, claimed_at, lease_expires_at): since issue 34 a
    # claim writes no run record, so when its attempt never ended in the old home the row is its only trace
    claimed: tuple[str, EpochMs, EpochMs] | None = None


@dataclass(frozen=True)
class Reconciliation:
    """The decision for one stream record. RESTORE: write `image` back over the late write whose epoch was
    `late_epoch`, and mark `late` (if any); ADOPT: adopt `job_id` (`terminal`: it is restamped as it is); MARK:
    mark `late` (its run record as it arrived) if the job is adopted here."""

    action: Action
    reason: str
    job_id: str | None = None
    image: Mapping[str, Any] | None = None
    late_epoch: int | None = None
    late: LateWrite | None = None
    terminal: bool = False
    corrections: Mapping[str, int] | None = None  # CORRECT: what to add to each count of the item


def epoch_of(image: Mapping[str, Any]) -> int:
    """An item's region epoch: an item without the attribute was written before any failover (epoch 0)."""
    return int(image.get(REGION_EPOCH, 0))


def _job_id(image: Mapping[str, Any]) -> str | None:
    pk = image.get("pk")
    return pk[len(JOB_PREFIX):] if isinstance(pk, str) and pk.startswith(JOB_PREFIX) else None


def decide(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, epoch: int) -> Reconciliation:
    """The decision for a record whose images are `old` and `new`, in a Region that is home at `epoch`."""
    if new is None:
        return Reconciliation(Action.NOTHING, "removed")
    job_id = _job_id(new)
    if job_id is None:
        counts = COUNTS_BY_ENTITY.get(str(new.get("entity")))
        if counts is not None and old is not None and epoch_of(new) < epoch <= epoch_of(old):
            return Reconciliation(Action.CORRECT, "a late write replaced a counter of this epoch",
                                  image=old, late_epoch=epoch_of(new), corrections=count_corrections(old, new))
        return Reconciliation(Action.NOTHING, "not an item of a job")
    late_epoch = epoch_of(new)
    if late_epoch >= epoch:
        return Reconciliation(Action.NOTHING, "written at the current epoch", job_id)
    if old is not None and epoch_of(old) > late_epoch:
        return Reconciliation(Action.RESTORE, "a late write overwrote a newer epoch's item", job_id,
                              image=old, late_epoch=late_epoch, late=late_write(job_id, new))
    if new.get("sk") == JOB_SK:
        state = JobState(new["state"])
        return Reconciliation(Action.ADOPT, "a job never adopted at this epoch", job_id, terminal=is_terminal(state))
    sk = new.get("sk")
    if isinstance(sk, str) and sk.startswith(RUN_PREFIX) and WORKER_ID not in new:
        # (issue 34: a running attempt's progress or overlap marks, before its close writes the record whole)
        return Reconciliation(Action.NOTHING, "a running attempt's partial run record: its row or close decides",
                              job_id)
    if isinstance(sk, str) and sk.startswith(RUN_PREFIX) and new.get(FENCED_BY) is None:
        return Reconciliation(Action.MARK, "an old home's run record the new home never had", job_id,
                              late_epoch=late_epoch, late=late_write(job_id, new))
    return Reconciliation(Action.NOTHING, "an item of a job not adopted yet: its row's adoption decides", job_id)


def count_corrections(kept: Mapping[str, Any], late: Mapping[str, Any]) -> dict[str, int]:
    """What to add to each count of a counter item that `late` replaced while it was `kept`: kept minus late
    (a count absent is 0), the zero ones left out."""
    counts = COUNTS_BY_ENTITY.get(str(kept.get("entity", late.get("entity"))), ())
    corrections = {name: int(kept.get(name, 0)) - int(late.get(name, 0)) for name in counts}
    return {name: amount for name, amount in corrections.items() if amount}


def late_write(job_id: str, image: Mapping[str, Any]) -> LateWrite | None:
    """The attempt a late image speaks for, and what it reported: a job row's attempt and its state's outcome,
    a run record's attempt and its outcome; None for any other item (a result: its row's record marks it)."""
    sk = image.get("sk")
    if sk == JOB_SK:
        attempt = int(image.get("attempt", 0))
        if attempt < 1:
            return None  # never claimed: no attempt ran
        at = image.get("updated_at")
        claimed = None
        if image["state"] == JobState.RUNNING and all(name in image for name in (
                "lease_owner", RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT)):
            claimed = (str(image["lease_owner"]), int(image[RUN_CLAIMED_AT]), int(image[RUN_LEASE_EXPIRES_AT]))
        return LateWrite(job_id, attempt, _REPORTED_BY_STATE[JobState(image["state"])],
                         None if at is None else int(at), claimed)
    if isinstance(sk, str) and sk.startswith(RUN_PREFIX):
        outcome = image.get("outcome")
        at = image.get("finished_at") or image.get("late_report_at") or image.get("claimed_at")
        reported = None if outcome is None or outcome == REGION_FAILOVER else RunOutcome(outcome)
        return LateWrite(job_id, int(image["attempt"]), reported, None if at is None else int(at))
    return None


def new_home_attempts(runs: Iterable[Mapping[str, Any]], epoch: int, late_attempt: int) -> list[int]:
    """The attempts of a job that ran in the new home (its run records written at `epoch` or later, other
    than the runs the adoption closed `region_failover`), but the late one: the attempts a late write's
    attempt overlapped, as both ran the job."""
    return sorted({int(run["attempt"]) for run in runs
                   if epoch_of(run) >= epoch and run.get("outcome") != REGION_FAILOVER
                   and run.get(FENCED_BY) is None and int(run["attempt"]) != late_attempt})

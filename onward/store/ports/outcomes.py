"""How the recorder's writes end: a commit's, a create's and a lease renewal's answers, the roles the items of
one write play, and `judge`, which says what a refused write means in one order for every recorder."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from onward.domain.clock import EpochMs
from onward.domain.errors import RegionFenced, RowNotAdopted, StoreInvariantViolation


class Role(StrEnum):
    """The part an item plays in one write; a failed condition is reported, and judged, by role."""

    JOB = "job"  # the job row: expected state, version and attempt (and, for a reap, a lapsed lease)
    RUN_OPENED = "run_opened"  # a new run record: absent (a claim writes none since issue 34: no action has it)
    # the run record an ending attempt closes (a completion writes the job's result on it): present, no outcome yet
    RUN_CLOSED = "run_closed"
    RUNNING = "running"  # the tenant's RUNNING counter, under the claim's Admission
    LIFT = "lift"  # a claim's lift on the counter it charges: below it (another claim raised it meanwhile)
    WAITING = "waiting"  # a tenant's WAITING counter: unconditional
    OUTBOX = "outbox"  # one event per version: absent
    STILL_AT_CAP = "still_at_cap"  # a flexing claim's check on another capped tenant
    IDEMPOTENCY = "idempotency"  # a create's Idempotency-Key: unused
    TENANT = "tenant"  # a tenant's settings and registry entry (a registration only if new: absent)
    UNIQUE = "unique"  # a create's unique key (issue 37): free (UniqueClaim's condition)
    UNIQUE_HOLDER = "unique_holder"  # a unique key's takeover: the previous holder's row finished or gone
    RATE = "rate"  # rate limits (issue 37): a GCRA bucket, still at the TAT the claim read
    # concurrency keys (issue 37): the key's item (a claim: below its limit; an end: `held` as read), and
    # the held job an end puts back (still held under the key)
    CONCURRENCY = "concurrency"
    HELD_RELEASE = "held_release"
    # region fence (issue 39): the job row's epoch is above the writer's (an adoption's: not below it), or
    # below it (a row the writer's home has not adopted)
    REGION = "region"
    UNADOPTED = "unadopted"


class CommitOutcome(StrEnum):
    """How a commit ended. Anything else a refused write could mean breaks an invariant
    (StoreInvariantViolation)."""

    COMMITTED = "committed"
    JOB_MOVED = "job_moved"  # the job row is no longer what the change was decided from: decide again
    CONFLICT = "conflict"  # a concurrent transaction on one of its items (DynamoDB): nothing written, again
    CAP_REACHED = "cap_reached"  # the Admission's condition on the RUNNING counter failed
    OTHER_BELOW_CAP = "other_below_cap"  # a flexing claim's tenant in others_at_cap is below its cap now
    LIFTED = "lifted"  # another claim served the returning tenant and raised its lift meanwhile: decide again
    RATE_MOVED = "rate_moved"  # rate limits (issue 37): a bucket the claim takes from moved: decide again
    KEY_AT_LIMIT = "key_at_limit"  # concurrency keys (issue 37): a claim's key has `limit` running
    KEY_MOVED = "key_moved"  # concurrency keys: an end's key item or held job changed since read: decide again


class CreateOutcome(StrEnum):
    CREATED = "created"
    KEY_USED = "key_used"  # the Idempotency-Key was taken (by an earlier or a concurrent create)
    CONFLICT = "conflict"  # a concurrent transaction on one of its items (DynamoDB): nothing written, again
    UNIQUE_HELD = "unique_held"  # the unique key is held (issue 37): nothing written; KEY_USED goes first


@dataclass(frozen=True)
class ManyCreated:
    """How a create_many ended: CREATED (every job written), or nothing written: KEY_USED (`keys_used`: the
    positions, in the writes given, of those whose Idempotency-Key is taken) or CONFLICT (a concurrent
    transaction on one of its items: again as it is)."""

    outcome: CreateOutcome
    keys_used: frozenset[int] = frozenset()
    # unique jobs (issue 37): with UNIQUE_HELD, the positions of the writes whose unique key is held
    unique_held: frozenset[int] = frozenset()


def judge(failed: Collection[Role], *, conflict: bool, refused: str, claim: bool = False) -> CommitOutcome:
    """What a refused transition write means, the same for every recorder: a conflict or a moved job row
    are lost races; else the Admission or the flex checks refused; anything else cannot happen
    (`refused` describes it). A job row of another region epoch raises RegionFenced (issue 39)."""
    if conflict:
        return CommitOutcome.CONFLICT
    if Role.REGION in failed:  # (region fence, issue 39: never tried again by this writer)
        raise RegionFenced(refused)
    if Role.UNADOPTED in failed:
        raise RowNotAdopted(refused)
    if Role.JOB in failed:
        return CommitOutcome.JOB_MOVED
    if Role.RATE in failed:
        return CommitOutcome.RATE_MOVED
    if Role.HELD_RELEASE in failed:
        return CommitOutcome.KEY_MOVED
    if Role.CONCURRENCY in failed:  # (a claim's: at its limit; an end's: `held` changed)
        return CommitOutcome.KEY_AT_LIMIT if claim else CommitOutcome.KEY_MOVED
    if Role.LIFT in failed:
        return CommitOutcome.LIFTED
    if Role.RUNNING in failed:
        return CommitOutcome.CAP_REACHED
    if Role.STILL_AT_CAP in failed:
        return CommitOutcome.OTHER_BELOW_CAP
    raise StoreInvariantViolation(refused)


@dataclass(frozen=True)
class RenewalAnswer:
    """The answer to a lease renewal (JobStore.renew_lease)."""

    held: bool  # False: fenced, the worker must stop and must not commit
    cancel_requested: bool
    lease_expires_at: EpochMs | None

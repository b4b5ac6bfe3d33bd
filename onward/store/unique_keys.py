"""Unique jobs (issue 37) in the store: the UniqueClaim a create writes, and what a create does when its
transaction finds the key held (onward.domain.uniqueness.judge_hold decides; this reads what it decides from
and carries it out). The key itself is only ever taken by the create's own transaction, on its condition, so
two concurrent creates with one key make one job whatever the interleaving."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from onward.domain import lifecycle
from onward.domain.clock import Clock
from onward.domain.errors import JobNotFound, UniqueKeyHeld
from onward.domain.lifecycle import Decision, Refusal, RefusalReason
from onward.domain.models import Job, NewJob
from onward.domain.states import JobState
from onward.domain.uniqueness import WAITING_STATES, UniqueHold, UniqueRule, Verdict, judge_hold
from onward.store.answers import Created
from onward.store.ports.job_log import JobLog
from onward.store.ports.unique_keys import UniqueClaim, UniqueKeyReads

# The store's read-decide-commit of one job (JobStore._transition): the replace's cancel goes through it.
Transition = Callable[[str, Callable[[Job], Decision]], Decision]


def unique_claim(job: Job, request: NewJob, now: int) -> UniqueClaim | None:
    """How a new job first takes its unique key: where no job holds it, or its window ended by `now`."""
    rule = request.unique
    if rule is None:
        return None
    return UniqueClaim(rule.key, UniqueHold(job.job_id, rule.held_until(job.created_at)), now)


def cancel_if_waiting(job: Job, now: int) -> Decision:
    """`replace`'s cancel: a holder that has not started (queued, retry_wait) is cancelled; one that has is
    left alone (a Refusal: the create finds the key still held and decides again)."""
    if job.state in WAITING_STATES:
        return lifecycle.cancel(job, now)
    return Refusal(RefusalReason.NOT_CLAIMABLE, job)


@dataclass(frozen=True)
class TryAgain:
    """Write the create again with `taking` (the key is free, or was freed by cancelling `replaced`)."""

    taking: UniqueClaim
    replaced: str | None = None


class UniqueKeys:
    """What a create does when its unique key is held. Thread-safe (it keeps nothing)."""

    def __init__(self, reads: UniqueKeyReads, log: JobLog, clock: Clock, transition: Transition) -> None:
        self._reads = reads
        self._log = log
        self._clock = clock
        self._transition = transition

    def resolve(self, tenant_id: str, rule: UniqueRule, taking: UniqueClaim) -> Created | TryAgain:
        """After a create found `rule.key` held: the holder (keep: Created with duplicate_of_unique), a UniqueClaim to
        write the create again with (the key is free now, or `replace` cancelled its waiting holder), or
        UniqueKeyHeld (reject; replace of a running holder). Two reads (the key's item, its holder's row)."""
        hold = self._reads.unique_hold(tenant_id, rule.key)
        holder = None if hold is None else self._log.job(hold.job_id)
        now = self._clock()
        verdict = judge_hold(rule, hold, None if holder is None else holder.job.state, now)
        if hold is None or hold.expired(now):  # gone or ended since the write: the first condition again
            return TryAgain(taking.at(now))
        if verdict is Verdict.TAKE:
            return TryAgain(taking.taking_over(hold.job_id))
        assert holder is not None
        if verdict is Verdict.DUPLICATE:
            return Created(holder.job, created=False, duplicate_of_unique=True)
        if verdict is Verdict.REJECT:
            raise UniqueKeyHeld(rule.key, hold.job_id, running=holder.job.state is JobState.RUNNING)
        # REPLACE: the cancel commits on the holder's row as read (state, version); if the holder started
        # meanwhile it is left alone, and the takeover's condition (the holder finished) refuses the create
        with contextlib.suppress(JobNotFound):  # its row went since the read (retention): the key is free
            self._transition(hold.job_id, lambda job: cancel_if_waiting(job, self._clock()))
        return TryAgain(taking.taking_over(hold.job_id), replaced=hold.job_id)

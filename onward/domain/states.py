"""The job state machine: states, run outcomes and the legal-transition table (pure)."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    QUARANTINED = "quarantined"


class RunOutcome(StrEnum):
    """How one attempt ended; written once on its run record (`fenced` marks a zombie's late report)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LEASE_EXPIRED = "lease_expired"
    RELEASED = "released"
    CANCELLED = "cancelled"
    FENCED = "fenced"
    SNOOZED = "snoozed"  # snooze (issue 37): the handler asked to run again later, no attempt charged
    # region fence (issue 39): the attempt's Region was failed over; closed by the new home, not charged
    REGION_FAILOVER = "region_failover"


class Transition(StrEnum):
    """The operations that move a job; each one is a single conditional transaction in the store."""

    CREATE = "create"
    CLAIM = "claim"
    EXHAUST = "exhaust"  # the claim found the attempts used up
    COMPLETE = "complete"
    FAIL = "fail"
    REAP = "reap"
    RELEASE = "release"
    REQUEST_CANCEL = "request_cancel"
    CANCEL = "cancel"
    REPLAY = "replay"
    SNOOZE = "snooze"  # snooze (issue 37): back to the queue, due later, not charged an attempt
    ADOPT = "adopt"  # region fence (issue 39): the new home restamps a row of an older epoch (a running one requeued)


TERMINAL_STATES: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.QUARANTINED}
)
CLAIMABLE_STATES: frozenset[JobState] = frozenset({JobState.QUEUED, JobState.RETRY_WAIT})
REPLAYABLE_STATES: frozenset[JobState] = frozenset({JobState.DEAD, JobState.QUARANTINED})
# What a cancel acts on: a waiting job ends cancelled at once, a running one is asked to stop.
CANCELLABLE_STATES: frozenset[JobState] = CLAIMABLE_STATES | {JobState.RUNNING}
# Ends that need a human to know why: a move into one must carry the job's last_error.
ENDS_WITH_ERROR: frozenset[JobState] = frozenset({JobState.DEAD, JobState.QUARANTINED})
# The states whose events and view show the job's last error (why it waits to retry, or why it ended)
SHOWS_ERROR: frozenset[JobState] = ENDS_WITH_ERROR | {JobState.RETRY_WAIT}

_Q, _R, _W = JobState.QUEUED, JobState.RUNNING, JobState.RETRY_WAIT

# (transition, from state) -> the states it may lead to. Anything absent is illegal.
TRANSITIONS: dict[tuple[Transition, JobState], frozenset[JobState]] = {
    (Transition.CLAIM, _Q): frozenset({_R}),
    (Transition.CLAIM, _W): frozenset({_R}),
    (Transition.EXHAUST, _Q): frozenset({JobState.DEAD, JobState.QUARANTINED}),
    (Transition.EXHAUST, _W): frozenset({JobState.DEAD, JobState.QUARANTINED}),
    (Transition.COMPLETE, _R): frozenset({JobState.SUCCEEDED}),
    # A cancel request ends the job at the next move that stops its attempt (completion still wins).
    (Transition.FAIL, _R): frozenset({_W, JobState.DEAD, JobState.CANCELLED}),
    (Transition.REAP, _R): frozenset({_Q, JobState.QUARANTINED, JobState.CANCELLED}),
    (Transition.RELEASE, _R): frozenset({_Q}),
    (Transition.REQUEST_CANCEL, _R): frozenset({_R}),
    (Transition.CANCEL, _Q): frozenset({JobState.CANCELLED}),
    (Transition.CANCEL, _W): frozenset({JobState.CANCELLED}),
    (Transition.CANCEL, _R): frozenset({JobState.CANCELLED}),  # the worker acknowledging a request
    (Transition.REPLAY, JobState.DEAD): frozenset({_Q}),
    (Transition.REPLAY, JobState.QUARANTINED): frozenset({_Q}),
    (Transition.SNOOZE, _R): frozenset({_Q}),  # snooze (issue 37)
}


class IllegalTransition(ValueError):
    """A transition the table does not allow (a bug in the caller, never a race)."""


def is_terminal(state: JobState) -> bool:
    return state in TERMINAL_STATES


def allowed_sources(transition: Transition) -> frozenset[JobState]:
    """The states a transition may start from: the store names them in its condition expression."""
    return frozenset(source for (kind, source) in TRANSITIONS if kind is transition)


def check_transition(transition: Transition, source: JobState, target: JobState) -> None:
    """Raise IllegalTransition unless `transition` may move a job from `source` to `target`."""
    if target not in TRANSITIONS.get((transition, source), frozenset()):
        raise IllegalTransition(f"{transition.value}: {source.value} -> {target.value} is not allowed")


# region fence (issue 39): an adoption keeps a waiting job's state; a running one is queued again (or cancelled,
# when its cancel was requested: its worker, in the lost Region, never acknowledges). An ended row's adoption is a
# restamp of its epoch and version, not a transition: terminal states stay absorbing (onward.domain.regions)
TRANSITIONS.update({(Transition.ADOPT, state): frozenset({state}) for state in (_Q, _W)})
TRANSITIONS[(Transition.ADOPT, _R)] = frozenset({_Q, JobState.CANCELLED})

"""The transition table (onward/domain/states.py). Without it, any component could write any state."""

import pytest

from onward.domain.states import (
    ENDS_WITH_ERROR,
    TERMINAL_STATES,
    TRANSITIONS,
    IllegalTransition,
    JobState,
    Transition,
    allowed_sources,
    check_transition,
    is_terminal,
)


def test_terminal_states_are_exactly_the_four_ends():
    assert {JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.QUARANTINED} == TERMINAL_STATES
    assert all(is_terminal(state) for state in TERMINAL_STATES)
    assert not any(is_terminal(state) for state in set(JobState) - TERMINAL_STATES)


def test_terminal_states_are_absorbing_except_operator_replay():
    """Only REPLAY may leave a terminal state, and only dead or quarantined (never succeeded/cancelled)."""
    for (transition, source), targets in TRANSITIONS.items():
        if is_terminal(source):
            assert transition is Transition.REPLAY, (transition, source)
            assert source in (JobState.DEAD, JobState.QUARANTINED)
            assert targets == {JobState.QUEUED}


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
@pytest.mark.parametrize("transition", [t for t in Transition if t is not Transition.REPLAY])
def test_no_automatic_transition_leaves_a_terminal_state(state, transition):
    for target in JobState:
        with pytest.raises(IllegalTransition):
            check_transition(transition, state, target)


def test_only_a_claim_makes_a_job_running():
    into_running = {(t, s) for (t, s), targets in TRANSITIONS.items() if JobState.RUNNING in targets}
    assert into_running == {
        (Transition.CLAIM, JobState.QUEUED),
        (Transition.CLAIM, JobState.RETRY_WAIT),
        (Transition.REQUEST_CANCEL, JobState.RUNNING),  # stays running, flag set
    }


def test_worker_reports_start_only_from_running():
    for transition in (Transition.COMPLETE, Transition.FAIL, Transition.RELEASE, Transition.REAP):
        assert allowed_sources(transition) == {JobState.RUNNING}


def test_legal_moves_pass():
    check_transition(Transition.CLAIM, JobState.QUEUED, JobState.RUNNING)
    check_transition(Transition.FAIL, JobState.RUNNING, JobState.RETRY_WAIT)
    check_transition(Transition.REAP, JobState.RUNNING, JobState.QUARANTINED)
    check_transition(Transition.REPLAY, JobState.DEAD, JobState.QUEUED)


def test_illegal_moves_raise():
    with pytest.raises(IllegalTransition):
        check_transition(Transition.COMPLETE, JobState.QUEUED, JobState.SUCCEEDED)
    with pytest.raises(IllegalTransition):
        check_transition(Transition.FAIL, JobState.RUNNING, JobState.SUCCEEDED)
    with pytest.raises(IllegalTransition):
        check_transition(Transition.REPLAY, JobState.SUCCEEDED, JobState.QUEUED)


def test_a_cancel_request_may_end_the_job_at_every_move_that_stops_the_attempt():
    """Without these entries a failure or a reap after a cancel request could only retry or requeue the job,
    and it would run again after the tenant cancelled it (completion still wins: COMPLETE stays succeeded)."""
    for transition in (Transition.FAIL, Transition.REAP, Transition.CANCEL):  # a release acknowledges: CANCEL
        assert JobState.CANCELLED in TRANSITIONS[(transition, JobState.RUNNING)], transition
    assert TRANSITIONS[(Transition.COMPLETE, JobState.RUNNING)] == {JobState.SUCCEEDED}


def test_the_ends_that_need_a_reason_are_dead_and_quarantined():
    assert {JobState.DEAD, JobState.QUARANTINED} == ENDS_WITH_ERROR and ENDS_WITH_ERROR <= TERMINAL_STATES

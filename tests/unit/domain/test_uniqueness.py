"""Unique jobs (issue 37), the pure rules (onward/domain/uniqueness.py): what `unique` accepts, until when a job
holds its key, and what a create does about a held key for each mode, holder state and `on_conflict`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.domain.uniqueness import MAX_WINDOW_S, UniqueHold, UniqueRule, Verdict, judge_hold

NOW = 1_800_000_000_000
WAITING_ONES = (JobState.QUEUED, JobState.RETRY_WAIT)
FINISHED = (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.QUARANTINED)


def rule(on_conflict: str = "keep", window_s: int | None = None) -> UniqueRule:
    return UniqueRule.model_validate({"key": "k", "on_conflict": on_conflict,
                                      **({} if window_s is None else {"window_s": window_s})})


@pytest.mark.parametrize("unique", [
    {"key": ""}, {"key": "x" * 201}, {"key": "tab\there"}, {"key": "k", "window_s": 0},
    {"key": "k", "window_s": MAX_WINDOW_S + 1}, {"key": "k", "window_s": 1.5}, {"key": "k", "window_s": "60"},
    {"key": "k", "on_conflict": "ignore"}, {"key": "k", "until": "finished"}, {"window_s": 60},
])
def test_a_bad_unique_is_refused_naming_its_field(unique: dict[str, object]) -> None:
    """Each is a 422 over HTTP; an unbounded window or a key of any length would reach the store."""
    with pytest.raises(ValidationError) as refused:
        NewJob.model_validate({"type": "demo.echo", "unique": unique})
    assert all(error["loc"][0] == "unique" for error in refused.value.errors())


def test_a_window_counts_from_the_holders_creation_and_no_window_holds_until_finished() -> None:
    assert rule(window_s=60).held_until(NOW) == NOW + 60_000 and rule().held_until(NOW) is None
    assert UniqueHold("j", NOW).expired(NOW) and not UniqueHold("j", NOW + 1).expired(NOW)
    assert not UniqueHold("j", None).expired(NOW + 10**12)


@pytest.mark.parametrize("on_conflict", ["keep", "reject", "replace"])
def test_a_free_key_is_taken_whatever_the_conflict_rule(on_conflict: str) -> None:
    """No item, a window that ended, a holder whose row is gone, an "until finished" holder that ended."""
    assert judge_hold(rule(on_conflict), None, None, NOW) is Verdict.TAKE
    assert judge_hold(rule(on_conflict), UniqueHold("j", NOW - 1), JobState.QUEUED, NOW) is Verdict.TAKE
    assert judge_hold(rule(on_conflict), UniqueHold("j", NOW + 1), None, NOW) is Verdict.TAKE
    for state in FINISHED:
        assert judge_hold(rule(on_conflict), UniqueHold("j", None), state, NOW) is Verdict.TAKE


def test_a_held_key_is_answered_as_on_conflict_says() -> None:
    """keep answers the holder, reject refuses; replace cancels a waiting holder, refuses a running one and
    takes over from a finished one still in its window (a window holds whatever becomes of the holder)."""
    held = UniqueHold("j", NOW + 1)
    for state in (*WAITING_ONES, JobState.RUNNING, *FINISHED):
        assert judge_hold(rule("keep"), held, state, NOW) is Verdict.DUPLICATE
        assert judge_hold(rule("reject"), held, state, NOW) is Verdict.REJECT
    for state in WAITING_ONES:
        assert judge_hold(rule("replace"), held, state, NOW) is Verdict.REPLACE
        assert judge_hold(rule("replace"), UniqueHold("j", None), state, NOW) is Verdict.REPLACE
    assert judge_hold(rule("replace"), held, JobState.RUNNING, NOW) is Verdict.REJECT
    for state in FINISHED:
        assert judge_hold(rule("replace"), held, state, NOW) is Verdict.TAKE

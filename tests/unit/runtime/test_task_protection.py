"""ECS task scale-in protection (onward.runtime.task_protection) with a fake agent and a manual clock: a task
holding a job is protected, an idle one is not (after a short grace), a task busy without end still gives a
deployment its chance (stretches, then a breather), and a failed request is retried, not lost."""

from __future__ import annotations

import pytest

from onward.runtime.task_protection import TaskProtection

pytestmark = pytest.mark.fast

MINUTE = 60.0


class FakeAgent:
    def __init__(self) -> None:
        self.requests: list[tuple[bool, int]] = []
        self.failing = False

    def set_protection(self, enabled: bool, minutes: int) -> bool:
        self.requests.append((enabled, minutes))
        return not self.failing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def protection(agent: FakeAgent, clock: Clock, **options: float) -> TaskProtection:
    return TaskProtection(agent, stretch_s=options.get("stretch_s", 60 * MINUTE),
                          breather_s=options.get("breather_s", MINUTE), idle_grace_s=5.0, clock=clock)


def test_a_task_holding_a_job_is_protected_and_an_idle_one_is_not() -> None:
    """Breaks without the protection (ECS may stop the busy task on a scale-in: its 10-minute job released and
    run again) and without dropping it (the idle task would never be chosen first)."""
    agent, clock = FakeAgent(), Clock()
    keeper = protection(agent, clock)
    assert keeper.update([clock.now + 10 * MINUTE]) is True
    assert keeper.protected and agent.requests == [(True, 70)]  # the stretch and one such job after it
    assert keeper.update([clock.now + 10 * MINUTE, clock.now + 9 * MINUTE]) is True
    assert len(agent.requests) == 1  # a second job inside the protection asks nothing more
    clock.now += 2
    keeper.update([])
    assert keeper.protected  # idle for less than the grace: between two jobs, no request pair per job
    clock.now += 5
    keeper.update([])
    assert not keeper.protected and agent.requests[-1] == (False, 1)


def test_a_job_with_a_later_deadline_extends_the_protection() -> None:
    """Breaks if the protection asked once per stretch whatever came: a job longer than the first would be
    left unprotected past the first one's reach."""
    agent, clock = FakeAgent(), Clock()
    keeper = protection(agent, clock, stretch_s=10 * MINUTE)
    keeper.update([clock.now + 5 * MINUTE])
    keeper.update([clock.now + 5 * MINUTE, clock.now + 8 * 60 * MINUTE])  # an 8-hour job
    assert agent.requests == [(True, 15), (True, 490)]


def test_a_task_never_idle_pauses_its_claims_after_a_stretch_and_breathes_unprotected() -> None:
    """A deployment waits for protected tasks: breaks (the deployment waits for ever) if a task always busy
    kept claiming and stayed protected."""
    agent, clock = FakeAgent(), Clock()
    keeper = protection(agent, clock, stretch_s=10 * MINUTE)
    assert keeper.update([clock.now + MINUTE]) is True
    clock.now += 10 * MINUTE
    assert keeper.update([clock.now + MINUTE]) is False  # the stretch is over: the running job ends first
    assert keeper.protected
    clock.now += MINUTE
    assert keeper.update([]) is False  # idle: unprotected at once, no claims for the breather
    assert not keeper.protected
    clock.now += 30
    assert keeper.update([]) is False
    clock.now += 31
    assert keeper.update([]) is True  # not stopped in its breather: a new stretch
    assert keeper.update([clock.now + MINUTE]) is True and keeper.protected


def test_a_refused_request_is_retried_later_not_hammered() -> None:
    """Breaks if a failure were taken for success (a task believed protected that is not) or retried on every
    tick (a request a second to an agent that refuses)."""
    agent, clock = FakeAgent(), Clock()
    keeper = protection(agent, clock)
    agent.failing = True
    keeper.update([clock.now + MINUTE])
    keeper.update([clock.now + MINUTE])
    assert not keeper.protected and len(agent.requests) == 1
    agent.failing = False
    clock.now += 10
    keeper.update([clock.now + MINUTE])
    assert keeper.protected and len(agent.requests) == 2

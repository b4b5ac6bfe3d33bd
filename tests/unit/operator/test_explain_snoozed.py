"""explain's `snoozed` reason (issue 37): a job its handler snoozed says so, until when, not "scheduled"."""

from __future__ import annotations

from onward.domain import lifecycle
from onward.domain.lifecycle import Change
from onward.domain.models import NewJob
from onward.operator import explain
from onward.operator.explain import WaitReason
from tests.unit.operator.test_explain import _waiting

NOW = 1_800_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"


def _snoozed(seconds: int):
    job = lifecycle.create(JOB_ID, "acme", NewJob(type="demo.echo"), NOW).after
    claim = lifecycle.claim(job, "w1", 30_000, NOW)
    assert isinstance(claim, Change)
    snooze = lifecycle.snooze(claim.after, 1, "w1", seconds * 1000, max_snoozes=5, retry_delay_ms=1, now=NOW)
    assert isinstance(snooze, Change)
    return snooze.after


def test_a_snoozed_job_is_explained_as_snoozed_until_it_is_due_again() -> None:
    """Without the reason a snoozed job reads as "scheduled: due at its run_at", which it never had."""
    answer = explain.explain(_snoozed(90), NOW, _waiting())
    assert (answer.reason, answer.until) == (WaitReason.SNOOZED, NOW + 90_000)
    assert answer.detail.startswith("snoozed until 2027-01-15T08:01:30")


def test_once_due_a_snoozed_job_waits_as_any_due_job() -> None:
    """The snooze ends by itself: past `until` the job waits for workers, not for its handler."""
    answer = explain.explain(_snoozed(90), NOW + 90_000, _waiting(tenant_claims=1, platform_claims=1))
    assert answer.reason is WaitReason.WAITING_FOR_SHARE

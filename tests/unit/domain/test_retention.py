"""Retention as policy (onward/domain/retention.py): precedence, units, validation, the bounds the projector
uses."""

from __future__ import annotations

import pytest

from onward.domain.retention import DAY_S, InvalidRetentionPolicy, Outcome, RetentionPolicy

FALLBACK_S = 30 * DAY_S
DOCUMENT = """{"default": {"succeeded": 7, "cancelled": 7, "dead": 30, "quarantined": 30},
               "tenants": {"acme": {"succeeded": 14, "dead": 60}},
               "types": {"export.report": {"dead": 90}, "ping": {"succeeded": 0.5}}}"""


def test_a_type_rule_beats_the_tenant_default_which_beats_the_platform_default():
    """Without the order a type's 90 days for dead exports would lose to acme's 60 (or the platform's 30)."""
    policy = RetentionPolicy.from_document(DOCUMENT, FALLBACK_S)
    assert policy.retention_s("acme", "export.report", "dead") == 90 * DAY_S  # type
    assert policy.retention_s("acme", "export.report", "succeeded") == 14 * DAY_S  # type silent: tenant
    assert policy.retention_s("acme", "other", "dead") == 60 * DAY_S  # tenant
    assert policy.retention_s("beta", "other", "quarantined") == 30 * DAY_S  # platform
    assert policy.retention_s("beta", "ping", "succeeded") == DAY_S // 2  # decimals of days


def test_an_outcome_the_default_leaves_out_takes_job_retention_days():
    """Backwards compatible: with no document, or one that is silent on an outcome, JobRetentionDays holds."""
    policy = RetentionPolicy.from_document('{"default": {"dead": 90}}', FALLBACK_S)
    assert policy.retention_s("t", "x", Outcome.SUCCEEDED) == FALLBACK_S
    assert policy.retention_s("t", "x", Outcome.DEAD) == 90 * DAY_S
    uniform = RetentionPolicy.uniform(FALLBACK_S)
    assert {uniform.retention_s("t", "x", outcome) for outcome in Outcome} == {FALLBACK_S}


def test_shortest_and_longest_cover_every_rule():
    """The projector checks events older than the shortest; a live row's horizon uses the longest."""
    policy = RetentionPolicy.from_document(DOCUMENT, FALLBACK_S)
    assert (policy.shortest_s, policy.longest_s) == (DAY_S // 2, 90 * DAY_S)


def test_a_running_job_keeps_the_longest_of_its_outcomes():
    """A run record written while the job goes on must not go before the job's row, whatever its outcome."""
    policy = RetentionPolicy.from_document(DOCUMENT, FALLBACK_S)
    assert policy.for_job("acme", "export.report", "running") == 90 * DAY_S
    assert policy.for_job("beta", "other", "queued") == 30 * DAY_S
    assert policy.for_job("beta", "other", "succeeded") == 7 * DAY_S


def test_seconds_documents_and_scaling_round_trip():
    """The local stack scales the policy and passes it in seconds: the product reads it back unchanged."""
    policy = RetentionPolicy.from_document(DOCUMENT, FALLBACK_S).scaled(0.0002)
    again = RetentionPolicy.from_document(policy.to_document(), FALLBACK_S)
    assert again.retention_s("acme", "export.report", "dead") == round(90 * DAY_S * 0.0002)
    assert again.shortest_s >= 1


@pytest.mark.parametrize(("document", "reason"), [
    ('{"default": {"failed": 3}}', "failed"),
    ('{"default": {"dead": 0}}', "greater than 0"),
    ('{"default": {"dead": -1}}', "greater than 0"),
    ('{"tenants": {"acme": {"dead": 1}}, "kinds": {}}', "kinds"),
    ('{"unit": "weeks"}', "unit"),
    ("not json", "not JSON"),
])
def test_a_bad_document_is_refused_with_the_reason(document, reason):
    """Without validation a typo would silently keep jobs for the default (or expire them at once)."""
    with pytest.raises(InvalidRetentionPolicy, match=reason):
        RetentionPolicy.from_document(document, FALLBACK_S)

"""`--retention-scale` of `onward endpoint` and `onward up`, and the policy it builds
(infra/onward_infra/moto_fixes/retention.py)."""

from __future__ import annotations

import pytest

from onward.cli.main import build_parser
from onward_infra.commands import MIN_RETENTION_SCALE
from onward_infra.moto_fixes.retention import MIN_SCALE, MIN_SWEEP_PERIOD_S, RetentionPolicy


@pytest.mark.parametrize("command", ["endpoint", "up"])
def test_the_default_is_awss_own_retention(command):
    """Without the default of 1 a local stack would keep, or drop, data on other schedules than AWS's."""
    assert build_parser().parse_args([command]).retention_scale == 1.0
    assert build_parser().parse_args([command, "--retention-scale", "0.001"]).retention_scale == 0.001


@pytest.mark.parametrize("command", ["endpoint", "up"])
@pytest.mark.parametrize(("value", "reason"), [
    ("0", "out of range"), ("-1", "out of range"), ("1.5", "out of range"), ("1e-9", "out of range"),
    ("nan", "out of range"), ("inf", "out of range"), ("a lot", "is not a number"), ("", "is not a number"),
])
def test_a_scale_that_cannot_work_is_refused_at_start_with_the_rule(command, value, reason, capsys):
    """Without the check 0 would trim every record as it is written (the relay re-publishing the outbox in a
    loop), a negative or NaN scale would keep nothing or everything, and a word would fail deep in the
    endpoint's thread instead of at the command line."""
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, "--retention-scale", value])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "--retention-scale" in error and reason in error


def test_the_policy_refuses_what_the_flag_refuses_and_scales_every_period():
    """Without the policy's own check an EmbeddedEndpoint built in code could take a scale the CLI refuses;
    the CLI's bound is a copy (it must not load moto), kept equal here."""
    assert MIN_RETENTION_SCALE == MIN_SCALE
    for bad in (0, -0.5, 2, float("nan"), float("inf"), MIN_SCALE / 2):
        with pytest.raises(ValueError, match="retention scale"):
            RetentionPolicy(bad)
    aws = RetentionPolicy()
    assert (aws.dynamodb_stream_retention_s, aws.sweep_period_s) == (86_400, 60)
    drill = RetentionPolicy(0.001)
    assert drill.dynamodb_stream_retention_s == pytest.approx(86.4)
    assert drill.sweep_period_s == pytest.approx(0.06)
    assert RetentionPolicy(MIN_SCALE).sweep_period_s == MIN_SWEEP_PERIOD_S
    # an item written at t=1000 with a TTL of 1000 + 3600 s: 3.6 s later at scale 0.001; expired ones at once
    assert drill.expires_at(1000, 4600) == pytest.approx(1003.6)
    assert drill.expires_at(1000, 10) == 1000
    assert aws.expires_at(1000, 4600) == 4600

"""Configuration a person types is refused at start with the reason (onward/cli/main.py, onward/api/auth.py,
onward/domain/clock.py), never met later as a 500 on every request, a spinning core or a wrong selection."""

from __future__ import annotations

import pytest

from onward.api.auth import InvalidTokens, Principal, TokenAuthenticator, parse_tokens
from onward.cli.main import build_parser, main
from onward.domain.clock import iso, parse_instant


@pytest.mark.parametrize(("pairs", "reason"), [
    (["acme=a,b"], "without spaces or commas"),  # before: every request of every tenant was a 500
    (["acme=x", "globex=x"], "same token as tenant 'acme'"),  # before: acme's token acted as globex
    (["Bad Tenant=x"], "not a tenant id"),  # before: it started, then every create was a 400
    (["acme=x", "acme=y"], "more than one token"),
    (["acme="], "visible ASCII"),
    (["acme"], "not TENANT=SECRET"),
    (["acme=op"], "same token as the operator"),
])
def test_token_configurations_that_cannot_work_are_refused_without_echoing_a_secret(pairs, reason):
    with pytest.raises(InvalidTokens, match=reason) as refused:
        parse_tokens(pairs, operator_token="op")
    for pair in pairs:
        secret = pair.partition("=")[2]
        if len(secret) > 2:
            assert secret not in str(refused.value)


def test_valid_tokens_parse_and_the_environment_follows_the_same_rules():
    assert parse_tokens(["acme=a=b", "x.y-z=K~!"], "op") == {"acme": "a=b", "x.y-z": "K~!"}
    with pytest.raises(InvalidTokens, match="ONWARD_TOKENS"):
        TokenAuthenticator.from_environment({"ONWARD_TOKENS": "acme=a1,globex=a1"})
    authenticator = TokenAuthenticator.from_environment({"ONWARD_TOKENS": "acme=a1", "ONWARD_OPERATOR_TOKEN": "o1"})
    assert authenticator.authenticate({"headers": {"authorization": "Bearer a1"}}) == Principal("acme")


@pytest.mark.parametrize(("argv", "message"), [
    (["--token", "acme=a,b"], "without spaces or commas"),
    (["--token", "acme=x", "--token", "globex=x"], "same token"),
    (["--token", "Bad Tenant=x"], "not a tenant id"),
    (["--heartbeat-s", "0"], "--heartbeat-s: 0 is out of range"),  # before: a heartbeat loop spun a core
    (["--heartbeat-s", "nan"], "out of range"),
    (["--lease-s", "-1"], "--lease-s: -1 is out of range"),
    (["--stale-after-s", "0"], "out of range"),
    (["--workers", "-2"], "out of range"),
    (["--http-port", "70000"], "out of range"),
])
def test_onward_up_refuses_bad_configuration_before_starting_anything(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["up", *argv])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_onward_up_help_shows_every_flag_with_its_default():
    subcommands = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]  # argparse internals
    text = subcommands.choices["up"].format_help()  # type: ignore[index]  # choices: the subcommands' parsers
    for flag, default in (("--lease-s", "3.0"), ("--heartbeat-s", "5.0"), ("--workers", "4"),
                          ("--stale-after-s", "30.0"), ("--http-port", "8000"), ("--port", "4566")):
        assert flag in text and f"(default: {default})" in " ".join(text.split()), flag
    assert "repeat for each tenant" in " ".join(text.split())


@pytest.mark.parametrize(("typed", "expected"), [
    ("2026-11-30T08:00:00Z", "2026-11-30T08:00:00.000Z"),
    ("2026-11-30T10:00:00+02:00", "2026-11-30T08:00:00.000Z"),
    ("2026-11-30T03:30:00.250-04:30", "2026-11-30T08:00:00.250Z"),
])
def test_typed_times_are_canonicalized_by_their_zone(typed, expected):
    assert iso(parse_instant(typed)) == expected


@pytest.mark.parametrize(("typed", "reason"), [
    ("2026-11-30T08:00:00", "no zone"), ("2026-11-30", "is a date"), ("yesterday", "not an ISO-8601 time"),
])
def test_times_without_a_zone_are_refused(typed, reason):
    with pytest.raises(ValueError, match=reason):
        parse_instant(typed)


def test_onward_replay_refuses_a_time_without_a_zone(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["replay", "--since", "2026-11-30T08:00:00"])
    assert stopped.value.code == 2 and "no zone" in capsys.readouterr().err

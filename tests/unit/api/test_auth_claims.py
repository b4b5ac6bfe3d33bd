"""The JWT claims that make a caller a tenant or an operator (onward/api/auth.py JwtClaimsAuthenticator):
the operator claim as a string or a list (Cognito's `cognito:groups`), scopes as a space-separated string, a
prefixed scope (`<resource server>/onward-operator`), and the refusal of a verified token that names no tenant.

Each test says how it would break: e.g. matching the operator value as a substring would make `onward-operators`
an operator; reading only `scope` would miss an issuer's `scp`; accepting the bare scope when a prefix is
configured would let another resource server's scope pass."""

from __future__ import annotations

from typing import Any

import pytest

from onward.api.auth import JwtClaimsAuthenticator, NoTenant, Principal, authenticator_from_environment

COGNITO = JwtClaimsAuthenticator("custom:tenant", "cognito:groups", "onward")


def event(claims: dict[str, Any]) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": None}}}}


def test_the_operator_claim_may_be_a_string_or_a_list() -> None:
    """Cognito ID tokens carry `cognito:groups` as a list; API Gateway hands it on flattened to "[a b]"."""
    for groups in (["onward-operator"], ["admins", "onward-operator"], "[admins onward-operator]",
                   "onward-operator", "admins,onward-operator"):
        assert COGNITO.authenticate(event({"cognito:groups": groups})) == Principal(None, operator=True), groups


def test_the_operator_claim_must_hold_the_exact_value() -> None:
    """A group or scope that only resembles the role is no role: a substring test would accept these."""
    for groups in (["onward-operators"], "[xonward-operator]", ["admins"], "", [], None, 7, {"onward-operator": 1}):
        assert not COGNITO.is_operator({"cognito:groups": groups}), groups
    # the role in another claim than the configured one does not count
    assert not COGNITO.is_operator({"groups": ["onward-operator"]})


def test_a_tenant_with_a_wrong_operator_value_is_a_tenant_only() -> None:
    assert COGNITO.authenticate(event({"custom:tenant": "acme", "cognito:groups": ["acme-admins"]})) == Principal(
        "acme", operator=False)


def test_prefixed_scopes_in_a_space_separated_string_make_an_operator() -> None:
    """Cognito access tokens of the client-credentials flow: `scope` is "onward/onward-operator other/x"."""
    assert COGNITO.authenticate(event({"scope": "other/read onward/onward-operator"})) == Principal(None, operator=True)
    assert COGNITO.authenticate(event({"scp": ["onward/onward-operator"]})) == Principal(None, operator=True)
    assert COGNITO.is_operator({"scope": "onward/onward-operator"})
    # with a prefix configured, the bare scope or another server's scope is no role
    for scope in ("onward-operator", "billing/onward-operator", "onward/onward-operator-x", "onward/"):
        assert not COGNITO.is_operator({"scope": scope}), scope


def test_without_a_prefix_the_bare_scope_counts() -> None:
    plain = JwtClaimsAuthenticator()
    assert plain.is_operator({"scope": "jobs onward-operator"})
    assert not plain.is_operator({"scope": "onward/onward-operator"})


def test_a_verified_token_without_a_tenant_or_role_is_refused_by_name() -> None:
    """403 rather than 401 (the token is valid; it grants nothing); the refusal names the claim, not a value."""
    for claims in ({"sub": "u1"}, {"custom:tenant": ""}, {"cognito:groups": ["admins"]}):
        with pytest.raises(NoTenant, match="custom:tenant"):
            COGNITO.authenticate(event(claims))
    with pytest.raises(NoTenant, match="not a tenant id") as refused:
        COGNITO.authenticate(event({"custom:tenant": "a b/../c"}))
    assert "a b/../c" not in str(refused.value)
    assert COGNITO.authenticate({"requestContext": {}}) is None  # no verified claims at all: 401


def test_an_operator_with_an_unreadable_tenant_is_refused_not_widened() -> None:
    """Dropping a bad tenant claim would turn an operator bound to one tenant into one bound to none, who sees
    every tenant's data: the token is refused instead."""
    for tenant in ("a b", ["acme"], 7):
        with pytest.raises(NoTenant):
            COGNITO.authenticate(event({"custom:tenant": tenant, "cognito:groups": ["onward-operator"]}))


def test_the_environment_configures_the_claims() -> None:
    configured = authenticator_from_environment({"ONWARD_AUTH": "jwt", "ONWARD_TENANT_CLAIM": "custom:tenant",
                                                 "ONWARD_OPERATOR_CLAIM": "cognito:groups",
                                                 "ONWARD_OPERATOR_SCOPE_PREFIX": "onward"})
    assert configured.authenticate(event({"custom:tenant": "acme", "cognito:groups": ["onward-operator"]})) == \
        Principal("acme", operator=True)
    assert configured.authenticate(event({"scope": "onward/onward-operator"})) == Principal(None, operator=True)

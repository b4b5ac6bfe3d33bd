"""onward/api/auth.py: the tenant and the operator role behind a request's credential."""

from __future__ import annotations

from typing import Any

import pytest

from onward.api.auth import (
    JwtClaimsAuthenticator,
    NoTenant,
    Principal,
    TokenAuthenticator,
    authenticator_from_environment,
)


def _jwt_event(claims: dict[str, Any]) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": None}}}}


def _bearer(token: str, scheme: str = "Bearer") -> dict[str, Any]:
    return {"headers": {"Authorization": f"{scheme} {token}"}}


def test_jwt_claims_name_the_tenant_and_the_operator_role() -> None:
    jwt = JwtClaimsAuthenticator("custom:tenant")
    assert jwt.authenticate(_jwt_event({"custom:tenant": "acme"})) == Principal("acme")
    assert jwt.authenticate(_jwt_event({"custom:tenant": "acme", "scope": "jobs onward-operator"})) == Principal(
        "acme", operator=True)
    assert jwt.authenticate(_jwt_event({"groups": "[onward-operator other]"})) == Principal(None, operator=True)
    assert jwt.authenticate(_jwt_event({"groups": ["onward-operator"]})) == Principal(None, operator=True)
    for nobody in ({"sub": "x"}, {"custom:tenant": ""}):  # verified, but no tenant and no role: 403, not 401
        with pytest.raises(NoTenant):
            jwt.authenticate(_jwt_event(nobody))
    assert jwt.authenticate({"requestContext": {}}) is None
    assert authenticator_from_environment({"ONWARD_TENANT_CLAIM": "org"}).authenticate(
        _jwt_event({"org": "globex"})) == Principal("globex")


def test_tokens_name_their_tenant_and_nothing_else_is_accepted() -> None:
    tokens = TokenAuthenticator({"acme": "s-acme", "globex": "s-globex"}, operator_token="s-op")
    assert tokens.authenticate(_bearer("s-acme")) == Principal("acme")
    assert tokens.authenticate(_bearer("s-globex")) == Principal("globex")
    assert tokens.authenticate(_bearer("s-op")) == Principal(None, operator=True)
    assert tokens.authenticate(_bearer("s-acme", scheme="bearer")) == Principal("acme")  # the scheme is caseless
    for refused in (_bearer("s-acm"), _bearer("s-acme", scheme="Basic"), _bearer(""), {"headers": {}}, {}):
        assert tokens.authenticate(refused) is None


def test_the_token_list_is_parsed_strictly_and_never_echoed() -> None:
    parsed = TokenAuthenticator.from_environment({"ONWARD_TOKENS": " acme = a1 , globex=g1,"})
    assert parsed.authenticate(_bearer("a1")) == Principal("acme")
    assert parsed.authenticate(_bearer("g1")) == Principal("globex")
    with pytest.raises(ValueError, match="tenant=secret") as refused:
        TokenAuthenticator.from_environment({"ONWARD_TOKENS": "acme:hunter2"})
    assert "hunter2" not in str(refused.value)


def test_the_mode_follows_onward_auth_then_the_variables_present() -> None:
    assert isinstance(authenticator_from_environment({"ONWARD_TOKENS": "acme=a"}), TokenAuthenticator)
    assert isinstance(authenticator_from_environment({"ONWARD_OPERATOR_TOKEN": "op"}), TokenAuthenticator)
    assert isinstance(authenticator_from_environment({}), JwtClaimsAuthenticator)
    assert isinstance(authenticator_from_environment({"ONWARD_AUTH": "jwt", "ONWARD_TOKENS": "acme=a"}),
                      JwtClaimsAuthenticator)

"""The HTTP API behind a JWT authorizer, over HTTP, with tokens shaped like Cognito's: ID tokens carrying
`custom:tenant` and `cognito:groups`, client-credentials access tokens carrying `scope` with the resource server's
prefix (`onward/onward-operator`) and `client_id` instead of `aud`.

No Cognito and no API Gateway run here. The test issues RS256 tokens with its own key, and a stand-in for the
HTTP API's JWT authorizer (`JwtAuthorizer`, in front of the same handler, served by the local gateway) verifies
them as API Gateway does (signature, issuer, expiry, `aud` or `client_id` among the audiences; 401
{"message": "Unauthorized"} otherwise) and hands the claims on as HTTP APIs do (strings; an array as
"[a b]"). What is under test is what the API decides from those claims (onward/api/auth.py with
ONWARD_TENANT_CLAIM=custom:tenant, ONWARD_OPERATOR_CLAIM=cognito:groups, ONWARD_OPERATOR_SCOPE_PREFIX=onward, as
the template sets them when it creates the pool).

How it breaks: read the tenant from another claim than the configured one and the job lands in no tenant (403);
accept a scope without its prefix and the foreign server's token becomes an operator; match the group as a
substring and `onward-operators` sees every tenant's loads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from onward.api import app as api
from onward.store.service import JobStore
from onward_infra.gateway import LocalGateway
from tests.integration.api_support import http_call

pytestmark = pytest.mark.integration

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_TestPool"
USERS_CLIENT = "users-client-7h2k"
OPERATOR_CLIENT = "operator-client-4q9x"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def id_token(tenant: str | None, groups: list[str] | None = None, *, key: Any = KEY, audience: str = USERS_CLIENT,
             expires_in_s: int = 3600) -> str:
    """What Cognito issues a signed-in user (token_use=id): aud is the app client."""
    now = int(time.time())
    claims: dict[str, Any] = {"sub": "0b7c-user", "iss": ISSUER, "aud": audience, "token_use": "id",
                              "auth_time": now, "iat": now, "exp": now + expires_in_s, "email": "user@example.com",
                              "cognito:username": "0b7c-user"}
    if tenant is not None:
        claims["custom:tenant"] = tenant
    if groups is not None:
        claims["cognito:groups"] = groups
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "test-key"})


def access_token(scope: str, client_id: str = OPERATOR_CLIENT) -> str:
    """What Cognito issues a client-credentials client (token_use=access): no aud, client_id and scope."""
    now = int(time.time())
    claims = {"sub": client_id, "iss": ISSUER, "client_id": client_id, "token_use": "access", "scope": scope,
              "iat": now, "exp": now + 3600, "jti": "7a1e"}
    return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "test-key"})


class JwtAuthorizer:
    """A stand-in for API Gateway's JWT authorizer in front of a Lambda handler (see the module docstring)."""

    def __init__(self, handler: Any, issuer: str, audiences: list[str]) -> None:
        self._handler, self._issuer, self._audiences = handler, issuer, audiences

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event["rawPath"] in {"/", "/health", "/openapi.json"}:
            return self._handler(event, context)  # the open routes (Authorizer: NONE)
        headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        try:
            claims = jwt.decode(token, KEY.public_key(), algorithms=["RS256"], issuer=self._issuer,
                                options={"verify_aud": False, "require": ["exp", "iss"]})
        except jwt.PyJWTError:
            claims = None
        if (scheme.lower() != "bearer" or claims is None
                or not ({claims.get("aud"), claims.get("client_id")} & set(self._audiences))):
            return {"statusCode": 401, "headers": {"content-type": "application/json"},
                    "body": json.dumps({"message": "Unauthorized"})}
        flattened = {name: f"[{' '.join(map(str, value))}]" if isinstance(value, list) else str(value)
                     for name, value in claims.items()}
        scopes = str(claims["scope"]).split() if "scope" in claims else None
        event = {**event, "requestContext": {**event["requestContext"],
                                             "authorizer": {"jwt": {"claims": flattened, "scopes": scopes}}}}
        return self._handler(event, context)


@pytest.fixture
def gateway(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("ONWARD_TOKENS", "ONWARD_OPERATOR_TOKEN", "ONWARD_JOB_TYPES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.setenv("ONWARD_TENANT_CLAIM", "custom:tenant")
    monkeypatch.setenv("ONWARD_OPERATOR_CLAIM", "cognito:groups")
    monkeypatch.setenv("ONWARD_OPERATOR_SCOPE_PREFIX", "onward")
    front = JwtAuthorizer(api.handler, ISSUER, [USERS_CLIENT, OPERATOR_CLIENT])
    with LocalGateway(front, port=0) as local:
        yield local.url


def whoami(url: str, token: str) -> Any:
    answer = http_call(url, "GET", "/whoami", token=token)
    return answer.status, answer.body


def test_a_users_id_token_names_its_tenant_and_the_job_is_that_tenants(gateway: str, settings, dynamodb) -> None:
    token = id_token("acme", groups=["acme-admins"])
    assert whoami(gateway, token) == (200, {"tenant_id": "acme", "operator": False})
    created = http_call(gateway, "POST", "/jobs", token=token, body={"type": "demo.echo", "params": {}})
    assert created.status == 202, created
    job_id = created.body["job_id"]
    assert JobStore(settings, client=dynamodb).get(job_id).tenant_id == "acme"
    assert http_call(gateway, "GET", f"/jobs/{job_id}", token=token).status == 200
    # another tenant's user cannot see it
    assert http_call(gateway, "GET", f"/jobs/{job_id}", token=id_token("globex")).status == 404
    # a group that is not exactly onward-operator gives no operator route
    assert http_call(gateway, "GET", "/ops/tenants", token=id_token("acme", ["onward-operators"])).status == 403


def test_the_operator_group_makes_an_operator_bound_to_the_users_tenant(gateway: str) -> None:
    token = id_token("acme", groups=["staff", "onward-operator"])
    assert whoami(gateway, token) == (200, {"tenant_id": "acme", "operator": True})
    refused = http_call(gateway, "GET", "/ops/tenants", token=token)  # every tenant's data: not for a bound one
    assert refused.status == 403 and refused.body["status"] == 403


def test_a_client_credentials_token_with_the_prefixed_scope_is_a_platform_operator(gateway: str) -> None:
    token = access_token("onward/onward-operator")
    assert whoami(gateway, token) == (200, {"tenant_id": None, "operator": True})
    assert http_call(gateway, "GET", "/ops/tenants", token=token).status == 200


def test_a_verified_token_without_tenant_or_role_is_a_403_problem(gateway: str) -> None:
    for token in (access_token("billing/onward-operator"), access_token("onward-operator"), id_token(None)):
        answer = http_call(gateway, "GET", "/jobs?limit=1", token=token)
        assert answer.status == 403, answer
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.body["type"].endswith("/no-tenant") and "custom:tenant" in answer.body["detail"]


def test_tokens_the_authorizer_refuses_never_reach_the_api(gateway: str) -> None:
    """The stand-in refuses what API Gateway would (so the tests above are not passing on unverified tokens)."""
    for token in (id_token("acme", key=OTHER_KEY), id_token("acme", audience="another-client"),
                  id_token("acme", expires_in_s=-60), access_token("onward/onward-operator", client_id="x")):
        answer = http_call(gateway, "GET", "/whoami", token=token)
        assert (answer.status, answer.body) == (401, {"message": "Unauthorized"})

"""Who is calling the HTTP API: the tenant (and operator role) behind a request's credential.

Two authenticators, chosen by ONWARD_AUTH: local bearer tokens (`onward up` prints them), and on AWS the
claims API Gateway's JWT authorizer already verified. Neither logs or echoes a token.

With JWTs the tenant is one claim (ONWARD_TENANT_CLAIM, e.g. `custom:tenant` of a Cognito ID token, which
only an administrator can set), and the operator role is either a value of the operator claim
(ONWARD_OPERATOR_CLAIM, e.g. `cognito:groups` containing `onward-operator`) or the scope
`<ONWARD_OPERATOR_SCOPE_PREFIX>/onward-operator` in the `scope` (or `scp`) claim, e.g. a Cognito access token
of the client-credentials flow with the resource server `onward`'s scope `onward/onward-operator`.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from onward.domain.text_patterns import SECRET, TENANT_ID

OPERATOR_ROLE = "onward-operator"


class InvalidTokens(ValueError):
    """The local token configuration cannot work; the message says why without echoing a secret."""


def parse_tokens(pairs: Iterable[str], operator_token: str | None = None) -> dict[str, str]:
    """Tenant -> secret from TENANT=SECRET pairs, refused (InvalidTokens) unless every tenant id is valid and
    named once, every secret is visible ASCII without commas, and no two credentials share a secret (one
    secret for two tenants would act as whichever was checked last)."""
    tokens: dict[str, str] = {}
    owners: dict[str, str] = {}
    if operator_token is not None:
        if not SECRET.matches(operator_token):
            raise InvalidTokens("the operator token must be 1 to 512 visible ASCII characters without commas")
        owners[operator_token] = "the operator"
    for number, pair in enumerate(pairs, start=1):
        tenant, sep, secret = pair.partition("=")
        tenant = tenant.strip()
        if not sep:
            raise InvalidTokens(f"token {number} is not TENANT=SECRET")
        if not TENANT_ID.matches(tenant):
            raise InvalidTokens(f"token {number}: {tenant!r} is not a tenant id (letters, digits, '_', '.', '-'; "
                                "1 to 64, starting with a letter or digit)")
        if tenant in tokens:
            raise InvalidTokens(f"tenant {tenant!r} is given more than one token")
        if not SECRET.matches(secret):
            raise InvalidTokens(f"the token of tenant {tenant!r} must be 1 to 512 visible ASCII characters "
                                "without spaces or commas")
        if secret in owners:
            raise InvalidTokens(f"tenant {tenant!r} has the same token as {owners[secret]}: each credential "
                                "needs its own")
        owners[secret] = f"tenant {tenant!r}"
        tokens[tenant] = secret
    return tokens


@dataclass(frozen=True)
class Principal:
    tenant_id: str | None  # None: an operator credential bound to no tenant
    operator: bool = False


class Authenticator(Protocol):
    def authenticate(self, event: Mapping[str, Any]) -> Principal | None:
        """The caller behind this request, None when it presented no valid credential (401); NoTenant when a
        valid one gives neither a tenant nor the operator role (403)."""


def bearer_token(event: Mapping[str, Any]) -> str | None:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class TokenAuthenticator:
    """Local credentials: ONWARD_TOKENS="tenant=secret,tenant2=secret2" and ONWARD_OPERATOR_TOKEN."""

    def __init__(self, tokens: Mapping[str, str], operator_token: str | None = None) -> None:
        self._tokens = [(secret, tenant) for tenant, secret in tokens.items()]
        self._operator = operator_token or None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> TokenAuthenticator:
        """From ONWARD_TOKENS (a comma list of tenant=secret) and ONWARD_OPERATOR_TOKEN, by parse_tokens' rules
        (InvalidTokens names the variable; no value is echoed)."""
        source = os.environ if environ is None else environ
        operator = source.get("ONWARD_OPERATOR_TOKEN") or None
        pairs = [part.strip() for part in source.get("ONWARD_TOKENS", "").split(",") if part.strip()]
        try:
            tokens = parse_tokens([tenant.strip() + sep + secret.strip()
                                   for tenant, sep, secret in (pair.partition("=") for pair in pairs)], operator)
        except InvalidTokens as error:
            raise InvalidTokens(f"ONWARD_TOKENS is a comma list of tenant=secret: {error}") from None
        return cls(tokens, operator)

    def authenticate(self, event: Mapping[str, Any]) -> Principal | None:
        token = bearer_token(event)
        if token is None:
            return None
        found: Principal | None = None
        for secret, tenant in self._tokens:  # compare with every secret, in constant time each
            if hmac.compare_digest(token.encode(), secret.encode()):
                found = Principal(tenant)
        if self._operator is not None and hmac.compare_digest(token.encode(), self._operator.encode()):
            found = Principal(None, operator=True)
        return found


class NoTenant(Exception):
    """A verified token that names no valid tenant and carries no operator role: the caller is known but may do
    nothing (the API answers 403). The message names the claim, never its value."""


SCOPE_CLAIMS = ("scope", "scp")  # OAuth's space-separated scopes; `scp` as some issuers name it


class JwtClaimsAuthenticator:
    """On AWS: API Gateway's JWT authorizer verified the token. Its `tenant_claim` names the tenant; the caller
    is an operator when `operator_claim` (a string or a list of strings) contains OPERATOR_ROLE, or when a scope
    claim contains `<scope_prefix>/onward-operator` (`onward-operator` when there is no prefix). A claim with a
    similar value (`onward-operator-x`, a scope of another prefix) does not count."""

    def __init__(self, tenant_claim: str = "tenant", operator_claim: str = "groups", scope_prefix: str = "") -> None:
        self._claim = tenant_claim
        self._operator_claim = operator_claim
        self._operator_scope = f"{scope_prefix.rstrip('/')}/{OPERATOR_ROLE}" if scope_prefix else OPERATOR_ROLE

    def is_operator(self, claims: Mapping[str, Any]) -> bool:
        """Whether the claims give the operator role (by the operator claim or by a scope)."""
        if OPERATOR_ROLE in _claim_values(claims.get(self._operator_claim)):
            return True
        return any(self._operator_scope in _claim_values(claims.get(name)) for name in SCOPE_CLAIMS)

    def authenticate(self, event: Mapping[str, Any]) -> Principal | None:
        """None without verified claims (401); NoTenant when they name no valid tenant and give no operator
        role (403)."""
        claims = (((event.get("requestContext") or {}).get("authorizer") or {}).get("jwt") or {}).get("claims")
        if not isinstance(claims, Mapping) or not claims:  # a verified token always has claims (iss, exp, ...)
            return None
        operator = self.is_operator(claims)
        tenant = claims.get(self._claim)
        if tenant is not None and not TENANT_ID.matches(tenant):
            raise NoTenant(f"the token's {self._claim!r} claim is not a tenant id")
        if not tenant and not operator:
            raise NoTenant(f"the token has no {self._claim!r} claim (the tenant) and no operator role")
        return Principal(tenant or None, operator=operator)


def _claim_values(value: Any) -> list[str]:
    if isinstance(value, str):  # "a b" (OAuth scope) or "[a b]" (how HTTP APIs flatten arrays)
        return value.strip().removeprefix("[").removesuffix("]").replace(",", " ").split()
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def authenticator_from_environment(environ: Mapping[str, str] | None = None) -> Authenticator:
    """ONWARD_AUTH=tokens|jwt; by default tokens when ONWARD_TOKENS or ONWARD_OPERATOR_TOKEN is set. With jwt:
    ONWARD_TENANT_CLAIM (default "tenant"), ONWARD_OPERATOR_CLAIM (default "groups") and
    ONWARD_OPERATOR_SCOPE_PREFIX (default none: the bare scope onward-operator)."""
    source = os.environ if environ is None else environ
    mode = source.get("ONWARD_AUTH") or (
        "tokens" if source.get("ONWARD_TOKENS") or source.get("ONWARD_OPERATOR_TOKEN") else "jwt")
    if mode == "tokens":
        return TokenAuthenticator.from_environment(source)
    return JwtClaimsAuthenticator(source.get("ONWARD_TENANT_CLAIM") or "tenant",
                                  source.get("ONWARD_OPERATOR_CLAIM") or "groups",
                                  source.get("ONWARD_OPERATOR_SCOPE_PREFIX") or "")



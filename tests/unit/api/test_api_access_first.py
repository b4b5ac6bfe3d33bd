"""Who may call a route is decided before the resolver validates what the request holds (onward/api/routing.py:
the route's dependencies are resolved before Powertools' request validation, which is otherwise the first step
of every route's middleware stack).

How it breaks: with the caller checked inside the route, or as a dependency Powertools resolves after its
validation, a request without a credential would be answered 400, 404, 415 or 422 and learn the route's
shape (its parameters, their patterns, its body's fields) before being told it needs a token; a tenant's
credential would learn an operator route's body; a tenant naming another tenant would be told its limit is
wrong rather than that the tenant is not its own. Every answer here is the one the API gave before the resolver
validated requests."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from onward.api import app as api
from onward.api.app import openapi_document
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext

TENANT, OPERATOR = "acme-secret", "operator-secret"
# Every query parameter any route takes, each malformed, and a body that is neither declared JSON nor JSON.
MALFORMED_QUERY = "limit=0&status=bogus&type=Bad%0A&id_prefix=XYZ&source=nope&cursor=" + "x" * 3000
MALFORMED_BODY = [("Content-Type", "text/plain")], b"[not json"


@pytest.fixture(autouse=True)
def local_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONWARD_TOKENS", f"acme={TENANT}")
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", OPERATOR)
    monkeypatch.delenv("ONWARD_AUTH", raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def answer(method: str, path: str, token: str | None = None) -> tuple[int, dict[str, Any]]:
    headers, body = MALFORMED_BODY
    if token is not None:
        headers = [*headers, ("Authorization", f"Bearer {token}")]
    reply = api.handler(build_event(method, path, headers, body), LocalLambdaContext("onward-api"))
    return reply["statusCode"], json.loads(reply["body"])


def secured_operations() -> list[tuple[str, str]]:
    """Each operation the document says needs a bearer token, its path parameters malformed ("no!such")."""
    return [(method.upper(), re.sub(r"\{\w+\}", "no!such", path))
            for path, item in openapi_document()["paths"].items()
            for method, operation in item.items() if operation.get("security")]


def test_every_secured_route_is_covered() -> None:
    assert len(secured_operations()) > 20


@pytest.mark.parametrize(("method", "path"), secured_operations())
def test_a_request_without_a_credential_is_401_whatever_its_shape(method: str, path: str) -> None:
    status, problem = answer(method, f"{path}?{MALFORMED_QUERY}")
    assert (status, problem["title"]) == (401, "Unauthorized"), problem


@pytest.mark.parametrize(("method", "path", "token", "slug"), [
    ("POST", "/ops/bulk/replay", TENANT, "operators-only"),  # a tenant learns nothing of an operator's body
    ("POST", "/ops/replay", TENANT, "forbidden"),
    ("POST", "/jobs/no!such/replay", TENANT, "forbidden"),  # not "no such job": replay is an operator's
    ("GET", "/ops/parked", TENANT, "operators-only"),
    ("GET", "/ops/replayable", TENANT, "operators-only"),
    ("POST", "/jobs", OPERATOR, "forbidden"),  # an operator's token names no tenant to create jobs for
    ("POST", "/jobs/batch", OPERATOR, "forbidden"),
    ("GET", "/jobs?tenant=globex", TENANT, "other-tenant"),  # its tenant is refused before its limit is read
    ("GET", "/schedules?tenant=globex", TENANT, "other-tenant"),
    ("POST", "/schedules?tenant=globex", TENANT, "other-tenant"),
    ("DELETE", "/schedules/no!such?tenant=globex", TENANT, "other-tenant"),
])
def test_a_credential_not_allowed_here_is_403_before_its_request_is_validated(method: str, path: str, token: str,
                                                                             slug: str) -> None:
    separator = "&" if "?" in path else "?"
    status, problem = answer(method, f"{path}{separator}{MALFORMED_QUERY}", token)
    assert (status, problem["type"].rsplit("/", 1)[1]) == (403, slug), problem


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/jobs", 400),  # then the query
    ("GET", "/jobs/no!such", 404),  # a path no job can have: a missing job
    ("DELETE", "/schedules/no!such", 404),
    ("POST", "/jobs", 415),  # then the body
    ("POST", "/schedules", 415),
])
def test_an_allowed_caller_then_hears_what_is_wrong_with_its_request(method: str, path: str, status: int) -> None:
    separator = "&" if "?" in path else "?"
    assert answer(method, f"{path}{separator}{MALFORMED_QUERY}", TENANT)[0] == status

"""A refused query parameter is answered 400 with the parameter's rule in words (onward/api/request.py's
QUERY_RULES) and the value given, as the API answered before the resolver validated queries.

How it breaks: without the rules the 400 is Powertools' and pydantic's wording ("String should match pattern
'^[0-9a-f]{1,32}$'"), which the status page shows to a person as is, and which changes with pydantic."""

from __future__ import annotations

import json

import pytest

from onward.api import app as api
from onward.api.request import QUERY_RULES
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext

TOKEN = "acme-secret"


@pytest.fixture(autouse=True)
def local_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONWARD_TOKENS", f"acme={TOKEN}")
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", "operator-secret")
    monkeypatch.delenv("ONWARD_AUTH", raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def refusal(path: str, token: str = TOKEN) -> tuple[int, str]:
    reply = api.handler(build_event("GET", path, [("Authorization", f"Bearer {token}")], b""),
                        LocalLambdaContext("onward-api"))
    return reply["statusCode"], json.loads(reply["body"])["detail"]


@pytest.mark.parametrize(("query", "name", "given"), [
    ("limit=0", "limit", "'0'"),
    ("limit=many", "limit", "'many'"),
    ("id_prefix=xyz", "id_prefix", "'xyz'"),
    ("status=queued,bogus", "status", "'bogus'"),
    ("type=Bad%0A", "type", "'Bad\\n'"),
])
def test_a_refused_job_listing_query_names_its_rule_and_the_value(query: str, name: str, given: str) -> None:
    assert refusal(f"/jobs?{query}") == (400, f"{QUERY_RULES[name]}; given {given}")


def test_each_refused_parameter_is_named_once_and_a_cursor_is_not_echoed() -> None:
    status, detail = refusal("/jobs?limit=0&id_prefix=xyz&cursor=" + "x" * 3000)
    assert status == 400
    assert sorted(detail.split("; ")) == sorted([QUERY_RULES["cursor"], QUERY_RULES["id_prefix"], "given 'xyz'",
                                                 QUERY_RULES["limit"], "given '0'"])


def test_an_operator_routes_query_names_its_rule() -> None:
    assert refusal("/ops/parked?source=kinesis", "operator-secret") == (400, f"{QUERY_RULES['source']}; given "
                                                                             "'kinesis'")


@pytest.mark.parametrize("body", [b"[]", b"null", b'"text"', b"3"])
@pytest.mark.parametrize("path", ["/jobs", "/jobs/batch", "/schedules"])
def test_a_body_that_is_not_a_json_object_is_told_so(path: str, body: bytes) -> None:
    """A body that is JSON but not an object is a 422 saying so, as before the resolver validated bodies: without
    the rule `null` read "body: Field required" and `[]` named a dictionary "to extract fields from"."""
    reply = api.handler(build_event("POST", path, [("Authorization", f"Bearer {TOKEN}"),
                                                   ("Content-Type", "application/json")], body),
                        LocalLambdaContext("onward-api"))
    problem = json.loads(reply["body"])
    assert (reply["statusCode"], problem["detail"]) == (422, "the body must be a JSON object")


def test_the_document_names_the_idempotency_header_as_callers_send_it() -> None:
    """Powertools lowers a header parameter's name in the document it generates; a client generated from it
    would then send `idempotency-key` (harmless on the wire, but the document and docs/api.md say another
    name than the API's own answers and prose)."""
    from onward.api.app import openapi_document

    parameters = openapi_document()["paths"]["/jobs"]["post"]["parameters"]
    assert [(parameter["name"], parameter["in"]) for parameter in parameters] == [
        ("Idempotency-Key", "header"), ("traceparent", "header"), ("tracestate", "header")]  # W3C's are lowercase

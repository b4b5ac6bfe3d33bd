"""Hostile input at the HTTP API, over real HTTP (local gateway -> onward.api.app.handler -> embedded stack).

Every refusal here is a 4xx application/problem+json that writes nothing; each test says what answered
before the fix (a 500, a silent change, another request's answer, another tenant's jobs).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from onward.api import app as api
from onward.bootstrap import ApiDeployment
from onward.domain.models import NewJob
from onward.store.service import JobStore
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.api_support import HttpAnswer, http_call, serve_api

pytestmark = pytest.mark.integration

TOKENS = {f"tenant{n}": f"secret-{n}-5d1c" for n in range(6)}
OPERATOR = "operator-secret-77aa"
ACME = "tenant0"


@pytest.fixture
def gateway(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield url


def _count(dynamodb: Any, table: str) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"))


def _is_problem(answer: HttpAnswer, status: int) -> None:
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.body["status"] == status and answer.body["title"] and answer.body["detail"]
    assert answer.headers["cache-control"] == "no-store"


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# The body of POST /jobs as raw JSON text, with what DynamoDB cannot store inside params. Before: a 500
# (numbers boto3 refuses, lone surrogates botocore cannot encode, recursion), or stored silently changed
# (NaN and Infinity became null), or stored as a record the stream consumers could not read (an empty key).
UNSTORABLE_PARAMS = {
    "39 significant digits": '{"n": 123456789012345678901234567890123456789}',
    "1e200": '{"n": 1e200}',
    "1e-200": '{"n": 1e-200}',
    "a lone surrogate": '{"s": "\\ud800"}',
    "a lone surrogate in a key": '{"\\udc00": 1}',
    "an empty key": '{"": 1}',
    "an empty key inside": '{"a": [{"": 1}]}',
    "nesting past 32 levels": _nested(40),
}
NOT_JSON = {
    "NaN": '{"n": NaN}',
    "Infinity": '{"n": Infinity}',
    "-Infinity": '{"n": -Infinity}',
    "nesting past the parser's recursion limit": "[" * 100_000 + "]" * 100_000,  # 200 KB: under the limit
}


@pytest.mark.parametrize("params", UNSTORABLE_PARAMS.values(), ids=UNSTORABLE_PARAMS.keys())
def test_params_dynamodb_cannot_store_are_a_422_naming_the_place(gateway, settings, dynamodb, params):
    JobStore(settings, client=dynamodb).create(ACME, NewJob(type="demo.echo"))  # the tenant is registered
    before = [_count(dynamodb, table) for table in (settings.jobs_table, settings.outbox_table)]
    raw = f'{{"type": "demo.echo", "params": {params}}}'.encode()
    answer = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME], raw=raw)
    _is_problem(answer, 422)
    assert answer.body["errors"] and answer.body["errors"][0]["loc"] == ["params"]
    assert "params" in answer.body["detail"]
    assert [_count(dynamodb, table) for table in (settings.jobs_table, settings.outbox_table)] == before


@pytest.mark.parametrize("body", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_bodies_that_are_not_json_are_a_400(gateway, settings, dynamodb, body):
    before = _count(dynamodb, settings.jobs_table)
    answer = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME],
                       raw=f'{{"type": "demo.echo", "params": {body}}}'.encode())
    _is_problem(answer, 400)
    assert _count(dynamodb, settings.jobs_table) == before


def test_numbers_dynamodb_can_store_are_kept_exactly(gateway, settings, dynamodb):
    """The edges of DynamoDB's number range are accepted and round-trip: 38 digits, 10**125, 1e-130, and
    10**40 (one significant digit, which boto3's serializer refused before: a 500). A whole number is sent as
    an integer: DynamoDB has one number type, so a float without a fraction (1e125) would come back an int, and
    is refused (tests/integration/api/test_input_as_documented.py)."""
    raw = (b'{"type": "demo.echo", "params": {"a": 12345678901234567890123456789012345678, "b": 1' + b"0" * 125
           + b', "c": 1e-130, "d": 10000000000000000000000000000000000000000, "e": "\\u00e9\\ud83d\\ude00"}}')
    answer = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME], raw=raw)
    assert answer.status == 202, answer.body
    job = JobStore(settings, client=dynamodb).get(answer.body["job_id"])
    assert job.params == {"a": 12345678901234567890123456789012345678, "b": 10**125, "c": 1e-130, "d": 10**40,
                          "e": "\u00e9\U0001F600"}


def test_a_body_not_declared_json_is_a_415(gateway, settings, dynamodb):
    """Before: any Content-Type was parsed as JSON (a form post or text/plain from another page included)."""
    before = _count(dynamodb, settings.jobs_table)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/jsonx", ""):
        answer = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME], raw=b'{"type": "demo.echo"}',
                           headers={"Content-Type": content_type})
        _is_problem(answer, 415)
    assert _count(dynamodb, settings.jobs_table) == before
    accepted = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME], raw=b'{"type": "demo.echo"}',
                         headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert accepted.status == 202


def test_a_wrong_method_is_a_405_with_allow_and_answers_are_never_cached(gateway, settings, dynamodb):
    """Before: a 404 'no such route' for a route that exists, and no Cache-Control: a shared cache could
    keep one tenant's job list."""
    job_id = JobStore(settings, client=dynamodb).create(ACME, NewJob(type="demo.echo")).job.job_id
    for method, path, allowed in (("DELETE", f"/jobs/{job_id}", "GET"), ("PUT", "/jobs", "GET, POST"),
                                  ("GET", f"/jobs/{job_id}/cancel", "POST"), ("POST", "/health", "GET")):
        answer = http_call(gateway, method, path, token=TOKENS[ACME])
        _is_problem(answer, 405)
        assert answer.headers["allow"] == allowed
    _is_problem(http_call(gateway, "GET", "/nope", token=TOKENS[ACME]), 404)
    for path in ("/jobs", f"/jobs/{job_id}", f"/jobs/{job_id}/runs", "/view", "/health"):
        assert http_call(gateway, "GET", path, token=TOKENS[ACME]).headers["cache-control"] == "no-store"


def test_a_tampered_cursor_of_deep_json_is_a_400(gateway):
    """Before: json.loads of the decoded cursor raised RecursionError, a 500."""
    deep = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode()[:2000]
    for cursor in (deep, base64.urlsafe_b64encode(b"[" * 1400).decode(), "x" * 5000):
        _is_problem(http_call(gateway, "GET", f"/jobs?cursor={cursor}", token=TOKENS[ACME]), 400)


def test_an_idempotency_key_outside_printable_ascii_is_a_400(gateway, settings, dynamodb):
    before = _count(dynamodb, settings.jobs_table)
    for key in ("x" * 129, "caf\u00e9"):
        answer = http_call(gateway, "POST", "/jobs", token=TOKENS[ACME], body={"type": "demo.echo"},
                           headers={"Idempotency-Key": key})
        _is_problem(answer, 400)
    assert _count(dynamodb, settings.jobs_table) == before


def test_runs_answer_times_as_iso_like_every_other_route(gateway, settings, dynamodb):
    """Before: /runs answered epoch milliseconds while every other time of the API was ISO-8601."""
    store = JobStore(settings, client=dynamodb)
    job_id = store.create(ACME, NewJob(type="demo.echo")).job.job_id
    store.complete(store.claim("w-1", 30), {"ok": True})
    run = http_call(gateway, "GET", f"/jobs/{job_id}/runs", token=TOKENS[ACME]).body["runs"][0]
    for name in ("claimed_at", "lease_expires_at", "finished_at"):
        assert isinstance(run[name], str) and run[name].endswith("Z"), run
    lag = http_call(gateway, "GET", "/view", token=TOKENS[ACME]).body
    assert "measured_at" in lag and "as_of" not in lag  # a status's as_of is when it became true; not this


def _jwt_event(method: str, path: str, claims: dict[str, Any]) -> dict[str, Any]:
    event = build_event(method, path, [], b"")
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def test_an_operator_bound_to_a_tenant_lists_only_that_tenant(stack_environment, settings, dynamodb, monkeypatch,
                                                              pipeline):
    """Before: GET /jobs?tenant=globex with the claims {"tenant": "acme", "scope": "onward-operator"} listed
    globex's jobs (the list route let any operator name any tenant)."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.delenv("ONWARD_TOKENS", raising=False)
    store = JobStore(settings, client=dynamodb)
    acme = store.create("acme", NewJob(type="demo.echo")).job.job_id
    store.create("globex", NewJob(type="demo.echo"))
    pipeline.drain()

    def listing(query: str, claims: dict[str, Any]) -> tuple[int, Any]:
        reply = api.handler(_jwt_event("GET", f"/jobs{query}", claims), LocalLambdaContext("onward-api"))
        return reply["statusCode"], json.loads(reply["body"])

    bound = {"tenant": "acme", "scope": "onward-operator"}
    status, body = listing("?tenant=globex", bound)
    assert status == 403 and "globex" not in json.dumps(body)
    assert [job["job_id"] for job in listing("?tenant=acme", bound)[1]["jobs"]] == [acme]
    assert [job["job_id"] for job in listing("", bound)[1]["jobs"]] == [acme]
    unbound = {"groups": "[onward-operator]"}
    assert listing("?tenant=globex", unbound)[0] == 200 and listing("", unbound)[0] == 400


def _slowed(function: Callable[..., Any]) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.005)  # a request that takes a little longer (a cold client, a slow read)
        return function(*args, **kwargs)

    return slow


class _SlowlyCheckedTypes(frozenset[str]):
    """Job types whose membership check takes as long as a slow step of a request."""

    __contains__ = _slowed(frozenset.__contains__)


def test_concurrent_requests_each_see_only_their_own_event(gateway, settings, dynamodb, monkeypatch):
    """The local gateway serves each request on its own thread, and Powertools' resolver keeps the current
    event on a class attribute shared by all of them. Before the handler ran one invocation at a time, a
    request could be answered with another's headers, body or credential: a create answered 409 for a
    fresh Idempotency-Key, or a tenant read another tenant's job (or 404 for its own). Two steps of each
    request are slowed by 5 ms (as a slow read would), which makes the interleaving happen every run."""
    deployment = ApiDeployment.from_environment()  # the API's: the environment the `gateway` fixture set
    authenticator = deployment.authenticator
    monkeypatch.setattr(authenticator, "authenticate", _slowed(authenticator.authenticate))
    monkeypatch.setattr(deployment, "job_types", _SlowlyCheckedTypes(deployment.job_types))
    store = JobStore(settings, client=dynamodb)
    own = {tenant: store.create(tenant, NewJob(type="demo.echo", params={"owner": tenant})).job.job_id
           for tenant in TOKENS}
    wrong: list[str] = []
    rounds = 12

    def client(tenant: str) -> None:
        for n in range(rounds):
            created = http_call(gateway, "POST", "/jobs", token=TOKENS[tenant],
                                body={"type": "demo.echo", "params": {"owner": tenant, "n": n}},
                                headers={"Idempotency-Key": f"{tenant}-{n}"})
            if created.status != 202:
                wrong.append(f"{tenant} create {n}: {created.status} {created.body}")
            read = http_call(gateway, "GET", f"/jobs/{own[tenant]}", token=TOKENS[tenant])
            if read.status != 200 or read.body["job_id"] != own[tenant]:
                wrong.append(f"{tenant} read: {read.status} {read.body}")

    threads = [threading.Thread(target=client, args=(tenant,)) for tenant in TOKENS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong[:5]
    for tenant, token in TOKENS.items():  # each create landed in its own tenant with its own params
        for n in range(rounds):
            again = http_call(gateway, "POST", "/jobs", token=token,
                              body={"type": "demo.echo", "params": {"owner": tenant, "n": n}},
                              headers={"Idempotency-Key": f"{tenant}-{n}"})
            assert again.status == 200, again.body
            assert store.get(again.body["job_id"], tenant).params == {"owner": tenant, "n": n}

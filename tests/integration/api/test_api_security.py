"""Security of the HTTP API, beyond tests/integration/api/test_api.py (which checks 401 on every route, the
basic cross-tenant 404s after the view caught up, and one error path's logs):
- no route tells another tenant's job from a missing one, in every state of the job (not projected yet,
  finished, dead) and for every credential kind (tenant token, operator bound to a tenant);
- replay needs the operator role, by token and by JWT claims (scope or groups);
- no credential reaches any log, at DEBUG, on any route, even with POWERTOOLS_LOGGER_LOG_EVENT=true.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from onward.api import app as api
from onward.domain.models import ErrorSummary, NewJob
from onward.store.service import JobStore
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.api_support import http_call, serve_api

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-sec-7f3a9c", "globex": "globex-sec-51d2e8"}
OPERATOR = "operator-sec-a04b6e"
MISSING = "f" * 32


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def call(url: str, method: str, path: str, token: str | None, body: Any = None) -> Answer:
    answer = http_call(url, method, path, token=token, body=body)
    return Answer(answer.status, answer.body, answer.headers)


@pytest.fixture
def gateway(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield url


def _same_answer(foreign: Answer, missing: Answer, foreign_id: str) -> None:
    """Status, headers that matter and body are identical once the id in the text is the same."""
    assert foreign.status == missing.status
    assert json.loads(json.dumps(foreign.body).replace(foreign_id, MISSING)) == missing.body
    for name in ("content-type", "content-length", "www-authenticate", "retry-after"):
        assert foreign.headers.get(name) == missing.headers.get(name), name


JOB_ROUTES = [("GET", ""), ("GET", "/runs"), ("POST", "/cancel"), ("POST", "/replay")]


def test_another_tenants_job_is_answered_like_a_missing_one_in_every_state(gateway, settings, dynamodb):
    """Without the tenant scope on the job-table fallback (a job the view has not seen yet), on runs, on
    cancel of a finished job (409 'already completed' would confirm it exists) and on replay, a tenant
    could probe job ids of others. Each answer here equals the one for an id that never existed."""
    store = JobStore(settings, client=dynamodb)
    finished = store.create("globex", NewJob(type="demo.echo")).job.job_id
    dead = store.create("globex", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    for _ in range(2):
        lease = store.claim("w", 30)
        assert lease is not None
        if lease.job_id == finished:
            store.complete(lease, {"ok": 1})
        else:
            store.fail(lease, ErrorSummary.of("Boom", "no"), permanent=True)
    queued = store.create("globex", NewJob(type="demo.echo")).job.job_id  # not projected: no view row

    for job_id in (queued, finished, dead):
        for method, suffix in JOB_ROUTES:
            foreign = call(gateway, method, f"/jobs/{job_id}{suffix}", TOKENS["acme"])
            missing = call(gateway, method, f"/jobs/{MISSING}{suffix}", TOKENS["acme"])
            assert foreign.status in (403, 404), (method, suffix, foreign)
            _same_answer(foreign, missing, job_id)
    assert store.get(finished).version == 3 and store.get(queued).version == 1, "nothing was changed"
    # the owner sees them
    assert call(gateway, "GET", f"/jobs/{queued}", TOKENS["globex"]).body["visible"] is False
    assert call(gateway, "POST", f"/jobs/{finished}/cancel", TOKENS["globex"]).status == 409


def test_listing_is_scoped_to_the_callers_tenant_whatever_it_asks(gateway, settings, dynamodb, pipeline):
    """A tenant's ?tenant= naming another tenant is refused (only an operator bound to no tenant names one),
    and a cursor minted for another tenant is refused like a forged one: without both, a listing would reveal
    another tenant's jobs."""
    store = JobStore(settings, client=dynamodb)
    for _ in range(3):
        store.create("globex", NewJob(type="demo.echo"))
    mine = store.create("acme", NewJob(type="demo.echo")).job.job_id
    pipeline.drain()

    assert call(gateway, "GET", "/jobs?tenant=globex&limit=1", TOKENS["acme"]).status == 403
    listed = call(gateway, "GET", "/jobs?tenant=acme&limit=1", TOKENS["acme"])
    assert [job["job_id"] for job in listed.body["jobs"]] == [mine]
    theirs = call(gateway, "GET", "/jobs?tenant=globex&limit=1", OPERATOR)
    assert theirs.status == 200 and theirs.body["cursor"]
    stolen = call(gateway, "GET", f"/jobs?limit=1&cursor={theirs.body['cursor']}", TOKENS["acme"])
    forged = call(gateway, "GET", "/jobs?limit=1&cursor=bm90LWEtY3Vyc29y", TOKENS["acme"])
    assert stolen.status == forged.status == 400 and stolen.body == forged.body


def _jwt_event(method: str, path: str, claims: dict[str, Any]) -> dict[str, Any]:
    event = build_event(method, path, [], b"")
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def test_replay_needs_the_operator_role_by_jwt_claims_and_a_bound_operator_stays_in_its_tenant(
        stack_environment, settings, dynamodb, monkeypatch):
    """On AWS the JWT authorizer's claims decide. Without the role check a tenant's token could requeue
    its dead jobs at will (a replay is an operator's decision after review); without the tenant bound to
    an operator's credential, a tenant's operator could replay other tenants' jobs."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.delenv("ONWARD_TOKENS", raising=False)
    store = JobStore(settings, client=dynamodb)
    acme_dead = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    globex_dead = store.create("globex", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    for _ in range(2):
        store.fail(store.claim("w", 30), ErrorSummary.of("Boom", "no"), permanent=True)

    def replay(job_id: str, claims: dict[str, Any]) -> dict[str, Any]:
        reply = api.handler(_jwt_event("POST", f"/jobs/{job_id}/replay", claims), LocalLambdaContext("onward-api"))
        return {"status": reply["statusCode"], "body": json.loads(reply["body"])}

    assert replay(acme_dead, {"tenant": "acme"})["status"] == 403
    assert replay(acme_dead, {"tenant": "acme", "scope": "jobs.write"})["status"] == 403
    bound = {"tenant": "acme", "scope": "onward-operator"}
    foreign, missing = replay(globex_dead, bound), replay(MISSING, bound)
    assert foreign["status"] == missing["status"] == 404
    assert json.loads(json.dumps(foreign["body"]).replace(globex_dead, MISSING)) == missing["body"]
    assert replay(acme_dead, bound)["status"] == 202
    assert replay(globex_dead, {"groups": "[onward-operator]"})["status"] == 202  # bound to no tenant
    assert store.get(acme_dead).state.value == store.get(globex_dead).state.value == "queued"


def test_no_credential_reaches_any_log_on_any_route_even_at_debug(gateway, settings, dynamodb, monkeypatch,
                                                                 caplog):
    """Every log line of the API, the core and the libraries under them, at DEBUG, while every route is
    called with every kind of credential (valid, operator, wrong) and with POWERTOOLS_LOGGER_LOG_EVENT=true
    (which would log the whole event, Authorization header included, if the handler let it)."""
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    structured = io.StringIO()
    for name in [name for name in logging.Logger.manager.loggerDict if name.startswith("onward")]:
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "level", logging.DEBUG)
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler):
                monkeypatch.setattr(handler, "stream", structured)
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-sec-c0ffee"
    job_id = JobStore(settings, client=dynamodb).create("acme", NewJob(type="demo.echo")).job.job_id
    routes = [("GET", "/health"), ("GET", "/view"), ("GET", "/jobs"), ("POST", "/jobs"),
              ("GET", f"/jobs/{job_id}"), ("GET", f"/jobs/{job_id}/runs"), ("POST", f"/jobs/{job_id}/replay"),
              ("POST", f"/jobs/{job_id}/cancel"), ("GET", "/nope"), ("POST", "/jobs/not-an-id/cancel")]
    for token in (TOKENS["acme"], OPERATOR, wrong):
        for method, path in routes:
            body = {"type": "demo.echo", "params": {"token": "x"}} if (method, path) == ("POST", "/jobs") else None
            call(gateway, method, path, token, body)

    text = structured.getvalue() + "\n".join(record.getMessage() + repr(record.__dict__) for record in caplog.records)
    assert text.strip(), "the capture saw the logs (else this test would pass vacuously)"
    for secret in (*TOKENS.values(), OPERATOR, wrong):
        assert secret not in text

"""Input the API takes exactly as documented, over real HTTP (local gateway -> onward.handlers.api.handler ->
embedded stack), every answer held to the OpenAPI document (tests/integration/documented_client.py):

- a trailing newline is never read away: `re.match("^...$")` accepts "acme\\n" (`$` matches before a final
  newline) and the models refused it later (a 500), and the router read `/schedules/keep-me%0A` as
  `/schedules/keep-me` (the wrong schedule deleted). One pattern helper (onward/text_patterns.py) matches
  whole everywhere, the routes included.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.models import NewJob
from onward.states import JobState
from onward.store import JobStore
from tests.integration.api_support import http_call, serve_api
from tests.integration.documented_client import Client, Reply, call_with_claims

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-input-secret", "globex": "globex-input-secret"}
OPERATOR = "operator-input-secret"
SCHEDULE = {"name": "keep-me", "type": "demo.echo", "rate": "5 minutes"}


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


@pytest.fixture
def jobs(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb)


def _refused(reply: Reply, status: int, place: str | None = None) -> None:
    assert reply.status == status, reply.body
    if place is not None:
        assert [error["loc"] for error in reply.body["errors"]] == [place.split(".")], reply.body
        assert place in reply.body["detail"]


# --- a trailing newline --------------------------------------------------------------------------------------

def test_a_query_value_with_a_trailing_newline_is_a_400(client: Client) -> None:
    """Catches `?tenant=acme%0A` passing the tenant check (`re.match` with `$`) and reaching a model that
    refuses it: POST /schedules answered 500. The other query patterns (type, id_prefix) had the same hole and
    answered a listing of nothing instead of the 400 for a malformed filter."""
    _refused(client.call("POST", "/schedules?tenant=acme%0A", OPERATOR, body=SCHEDULE), 400)
    _refused(client.call("GET", "/schedules?tenant=acme%0A", OPERATOR), 400)
    _refused(client.call("GET", "/jobs?tenant=acme%0A", OPERATOR), 400)
    _refused(client.call("GET", "/jobs?type=demo.echo%0A", TOKENS["acme"]), 400)
    _refused(client.call("GET", "/jobs?id_prefix=ab%0A", TOKENS["acme"]), 400)
    _refused(client.call("GET", "/jobs/counts?type=demo.echo%0A", TOKENS["acme"]), 400)
    assert client.call("POST", "/schedules?tenant=acme", OPERATOR, body=SCHEDULE).status == 201


def test_a_path_with_a_trailing_newline_names_no_resource(client: Client, jobs: JobStore) -> None:
    """Catches the router reading `/schedules/keep-me%0A` as `/schedules/keep-me` (its `^...$` route pattern):
    the DELETE answered 204 and deleted keep-me. Every route is matched whole: a 404, and nothing changed."""
    assert client.call("POST", "/schedules", TOKENS["acme"], body=SCHEDULE).status == 201
    _refused(client.call("DELETE", "/schedules/keep-me%0A", TOKENS["acme"]), 404)  # before: 204, keep-me deleted
    assert [s["name"] for s in client.get("/schedules", TOKENS["acme"]).body["schedules"]] == ["keep-me"]
    job_id = jobs.create("acme", NewJob(type="demo.echo")).job.job_id
    for method, path in (("GET", f"/jobs/{job_id}%0A"), ("GET", f"/jobs/{job_id}/params%0A"),
                         ("GET", "/whoami%0A"), ("POST", f"/jobs/{job_id}/cancel%0A")):
        answer = http_call(client.url, method, path, token=TOKENS["acme"])  # no route of the document matches
        assert (answer.status, answer.headers["content-type"]) == (404, "application/problem+json"), path
    assert jobs.get(job_id).state is JobState.QUEUED
    assert http_call(client.url, "DELETE", "/schedules/keep-me", token=TOKENS["acme"]).status == 204


def test_a_jwt_tenant_claim_with_a_trailing_newline_is_a_403(stack_environment, monkeypatch) -> None:
    """Catches a verified token whose tenant claim is "acme\\n" passing the claim check: GET /whoami and POST
    /schedules answered 500 (the answer's model refused the tenant), POST /jobs 400 (the store refused it).
    A claim that is not a tenant id grants nothing: the 403 no-tenant, on every route."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.setenv("ONWARD_TENANT_CLAIM", "tenant")
    claims = {"sub": "user", "tenant": "acme\n"}
    for method, path, body in (("GET", "/whoami", None), ("POST", "/schedules", SCHEDULE),
                               ("POST", "/jobs", {"type": "demo.echo"}), ("GET", "/jobs", None)):
        reply = call_with_claims(method, path, claims, body)
        assert reply.status == 403, (path, reply.body)
        assert reply.body["type"].endswith("/no-tenant") and "'tenant'" in reply.body["detail"]
    assert call_with_claims("GET", "/whoami", {"sub": "user", "tenant": "acme"}).body == {
        "tenant_id": "acme", "operator": False}

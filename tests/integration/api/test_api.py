"""The HTTP API over real HTTP: local gateway (infra/onward_infra/gateway.py) -> onward.api.app.handler ->
embedded stack.

Every response is checked against the OpenAPI document: its status code must be documented for that route."""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from onward.api import app as api
from onward.api.app import openapi_document
from onward.api.contract import ANSWERS
from onward.bootstrap import ApiDeployment, Deployment
from onward.domain.models import ErrorSummary
from onward.store.service import JobStore, ReportStatus
from onward_infra.gateway import build_event
from tests.integration.api_support import http_call, serve_api
from tests.support import ManualClock

TOKENS = {"acme": "acme-secret", "globex": "globex-secret"}
OPERATOR = "operator-secret"
MISSING = "0" * 32


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def _template(path: str) -> str:
    path = path.split("?", 1)[0]
    return re.sub(r"^/jobs/[^/]+", "/jobs/{job_id}", path) if path.startswith("/jobs/") else path


CONTRACT = {model.__name__: model for model in ANSWERS}
DOCUMENT = openapi_document()


def _conforms(documented: dict[str, Any], content_type: str, body: Any) -> None:
    """The answer is what the document says, parsed by the very model the schema was generated from: the
    document and the code cannot drift apart unnoticed."""
    schema = documented["content"][content_type]["schema"]
    refs = [schema] if "$ref" in schema else schema.get("anyOf", [])
    if refs:
        errors = []
        for ref in refs:
            try:
                CONTRACT[ref["$ref"].rsplit("/", 1)[1]].model_validate_json(json.dumps(body))
                return
            except ValidationError as error:
                errors.append(error)
        raise AssertionError(f"the answer matches none of {[r['$ref'] for r in refs]}: {errors}")


class Client:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, *, token: str | None = None, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> Reply:
        answer = http_call(self.url, method, path, token=token, body=body, raw=raw, headers=headers)
        status, reply_headers = answer.status, answer.headers
        reply = Reply(status, reply_headers, answer.body)
        documented = DOCUMENT["paths"][_template(path)][method.lower()]["responses"]
        assert str(status) in documented, f"{method} {path} answered {status}, not in the OpenAPI document"
        _conforms(documented[str(status)], reply_headers["content-type"], answer.body)
        if status >= 400:
            assert reply_headers["content-type"] == "application/problem+json"
            assert {"type", "title", "status", "detail"} <= set(reply.body)
            assert reply.body["status"] == status
        return reply

    def create(self, tenant: str = "acme", type_: str = "demo.echo", **fields: Any) -> str:
        reply = self.call("POST", "/jobs", token=TOKENS[tenant], body={"type": type_, "params": {}, **fields})
        assert reply.status == 202, reply.body
        return reply.body["job_id"]


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _count_items(dynamodb, table: str) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"))


def _finish(settings, dynamodb, job_id: str, *, fail: bool) -> None:
    """Run the job's attempt to its end as a worker would (real clock, like the API's store)."""
    store = JobStore(settings, client=dynamodb)
    lease = store.claim("test-worker", 30)
    assert lease is not None and lease.job_id == job_id
    if fail:
        store.fail(lease, ErrorSummary.of("Boom", "failed for good"), permanent=True)
    else:
        store.complete(lease, {"echo": 1})


# --- create and idempotency ------------------------------------------------------------------------------------

def test_create_then_retry_with_same_key_returns_same_job_and_other_body_conflicts(client: Client, settings,
                                                                                   dynamodb) -> None:
    body = {"type": "demo.echo", "params": {"n": 1}}
    first = client.call("POST", "/jobs", token=TOKENS["acme"], body=body, headers={"Idempotency-Key": "k-1"})
    assert first.status == 202
    assert first.body["status"] == "queued" and first.body["version"] == 1
    assert first.headers["location"] == f"/jobs/{first.body['job_id']}"
    jobs = _count_items(dynamodb, settings.jobs_table)
    again = client.call("POST", "/jobs", token=TOKENS["acme"], body=body, headers={"Idempotency-Key": "k-1"})
    assert again.status == 200 and again.body == first.body
    assert _count_items(dynamodb, settings.jobs_table) == jobs
    other = client.call("POST", "/jobs", token=TOKENS["acme"], body={**body, "params": {"n": 2}},
                        headers={"Idempotency-Key": "k-1"})
    assert other.status == 409 and other.body["title"] == "Idempotency conflict"
    # the same key of another tenant is another key
    globex = client.call("POST", "/jobs", token=TOKENS["globex"], body=body, headers={"Idempotency-Key": "k-1"})
    assert globex.status == 202 and globex.body["job_id"] != first.body["job_id"]


# --- reading -------------------------------------------------------------------------------------------------

def test_get_reads_the_view_with_freshness_after_the_pipeline_drains(client: Client, pipeline, settings,
                                                                      dynamodb) -> None:
    """A status is shown as of its commit time, and vouched for once a beat committed after it has been
    projected on every open shard of the events stream. Without a beat (events move no watermark) the lag
    would be unknown and the view stale; with as_of the decision time, a transition committed after a beat
    would look covered by it."""
    job_id = client.create()
    before = client.call("GET", f"/jobs/{job_id}", token=TOKENS["acme"])
    assert before.status == 200
    assert before.body["visible"] is False and "status" not in before.body  # not shown from another source
    assert before.body["view"]["stale"] is True  # nothing projected yet
    _finish(settings, dynamodb, job_id, fail=False)
    pipeline.drain()
    unconfirmed = client.call("GET", f"/jobs/{job_id}", token=TOKENS["acme"]).body
    assert unconfirmed["visible"] is True and unconfirmed["version"] == 3  # projected, but no beat vouches for it
    assert unconfirmed["freshness"]["view_lag_s"] is None and unconfirmed["freshness"]["stale"] is True
    pipeline.drain(beat=True)
    reply = client.call("GET", f"/jobs/{job_id}", token=TOKENS["acme"])
    assert reply.status == 200
    body = reply.body
    assert body["visible"] is True
    assert (body["job_id"], body["type"], body["status"], body["version"], body["attempt"]) == (
        job_id, "demo.echo", "succeeded", 3, 1)
    assert body["result"] == {"size_bytes": len(b'{"echo":1}'), "inline": {"echo": 1}}
    fresh = body["freshness"]
    view = Deployment.from_environment().status_view.get(job_id)
    assert fresh["as_of"] == view.committed_at >= body["updated_at"] == view.occurred_at  # committed after decided
    assert fresh["as_of"] < fresh["watermark"]  # the heartbeat after it vouches for it
    assert 0 <= fresh["age_s"] < 30
    assert fresh["view_lag_s"] is not None and 0 <= fresh["view_lag_s"] < 30
    assert fresh["stale"] is False


def test_list_is_newest_first_filters_by_status_and_pages_with_a_cursor(client: Client, pipeline, settings,
                                                                       dynamodb) -> None:
    created = [client.create() for _ in range(5)]
    client.create("globex")
    assert client.call("POST", f"/jobs/{created[1]}/cancel", token=TOKENS["acme"]).status == 202
    pipeline.drain()
    everything = client.call("GET", "/jobs?limit=100", token=TOKENS["acme"]).body
    assert everything["cursor"] is None
    listed = [job["job_id"] for job in everything["jobs"]]
    assert sorted(listed) == sorted(created)
    times = [job["updated_at"] for job in everything["jobs"]]
    assert times == sorted(times, reverse=True)
    assert all("freshness" in job for job in everything["jobs"])

    pages, cursor = [], None
    while True:
        reply = client.call("GET", "/jobs?limit=2" + (f"&cursor={cursor}" if cursor else ""), token=TOKENS["acme"])
        pages.append([job["job_id"] for job in reply.body["jobs"]])
        cursor = reply.body["cursor"]
        if cursor is None:
            break
    assert [job_id for page in pages for job_id in page] == listed
    assert all(len(page) <= 2 for page in pages)

    cancelled = client.call("GET", "/jobs?status=cancelled", token=TOKENS["acme"]).body["jobs"]
    assert [job["job_id"] for job in cancelled] == [created[1]]
    queued = client.call("GET", "/jobs?status=queued&limit=2", token=TOKENS["acme"]).body
    assert len(queued["jobs"]) == 2 and all(job["status"] == "queued" for job in queued["jobs"])

    for bad in ("limit=0", "limit=abc", "status=bogus", "cursor=bm90LWEtY3Vyc29y"):
        assert client.call("GET", f"/jobs?{bad}", token=TOKENS["acme"]).status == 400
    # a cursor of another tenant is refused, not followed
    foreign = base64.urlsafe_b64encode(json.dumps({"job_id": {"S": MISSING}, "tenant_id": {"S": "globex"},
                                                   "occurred_at": {"S": "2026"}}).encode()).decode()
    assert client.call("GET", f"/jobs?cursor={foreign}", token=TOKENS["acme"]).status == 400


def test_runs_come_from_the_authoritative_table(client: Client, settings, dynamodb) -> None:
    job_id = client.create()
    assert client.call("GET", f"/jobs/{job_id}/runs", token=TOKENS["acme"]).body == {"job_id": job_id, "runs": []}
    _finish(settings, dynamodb, job_id, fail=False)
    runs = client.call("GET", f"/jobs/{job_id}/runs", token=TOKENS["acme"]).body["runs"]
    assert [(run["attempt"], run["outcome"], run["worker_id"]) for run in runs] == [(1, "succeeded", "test-worker")]


# --- cancel and replay ---------------------------------------------------------------------------------------

def test_cancel_a_queued_job_then_cancel_again_is_already_completed(client: Client) -> None:
    job_id = client.create()
    reply = client.call("POST", f"/jobs/{job_id}/cancel", token=TOKENS["acme"])
    assert reply.status == 202 and reply.body["status"] == "cancelled"
    again = client.call("POST", f"/jobs/{job_id}/cancel", token=TOKENS["acme"])
    assert again.status == 409 and again.body["title"] == "Already completed"


def test_cancel_a_running_job_is_a_request(client: Client, settings, dynamodb) -> None:
    job_id = client.create()
    assert JobStore(settings, client=dynamodb).claim("w", 30) is not None
    reply = client.call("POST", f"/jobs/{job_id}/cancel", token=TOKENS["acme"])
    assert reply.status == 202 and reply.body["status"] == "cancel_requested"


def test_replay_is_for_operators_and_only_for_dead_or_quarantined_jobs(client: Client, settings,
                                                                      dynamodb) -> None:
    job_id = client.create(max_attempts=1)
    not_dead = client.call("POST", f"/jobs/{job_id}/replay", token=OPERATOR)
    assert not_dead.status == 409 and not_dead.body["title"] == "Not replayable"
    _finish(settings, dynamodb, job_id, fail=True)
    assert client.call("POST", f"/jobs/{job_id}/replay", token=TOKENS["acme"]).status == 403
    reply = client.call("POST", f"/jobs/{job_id}/replay", token=OPERATOR)
    assert reply.status == 202 and reply.body["status"] == "queued"
    assert client.call("POST", f"/jobs/{MISSING}/replay", token=OPERATOR).status == 404
    # the operator (bound to no tenant) reads any job and lists a named tenant's, but creates none
    assert client.call("POST", "/jobs", token=OPERATOR, body={"type": "demo.echo"}).status == 403
    assert client.call("GET", "/jobs", token=OPERATOR).status == 400
    assert client.call("GET", "/jobs?tenant=acme", token=OPERATOR).status == 200
    read = client.call("GET", f"/jobs/{job_id}", token=OPERATOR)  # no pipeline runs here: not in the view
    assert read.status == 200 and read.body == {**read.body, "visible": False, "job_id": job_id}


# --- authentication and tenant isolation -----------------------------------------------------------------------

ROUTES = [("POST", "/jobs"), ("GET", "/jobs"), ("GET", "/jobs/{id}"), ("GET", "/jobs/{id}/runs"),
          ("POST", "/jobs/{id}/cancel"), ("POST", "/jobs/{id}/replay")]


def test_every_endpoint_without_a_valid_token_is_401(client: Client, settings, dynamodb) -> None:
    job_id = client.create()
    for method, path in ROUTES:
        body = {"type": "demo.echo"} if method == "POST" else None
        for token in (None, "wrong", ""):
            reply = client.call(method, path.replace("{id}", job_id), token=token, body=body)
            assert reply.status == 401, (method, path, token)
            assert reply.headers["www-authenticate"].startswith("Bearer")
    assert client.call("GET", "/health").body == {"status": "ok", "authority": "home", "writes": "accepted",
                                                  "writes_refused_because": None}
    assert _count_items(dynamodb, settings.jobs_table) > 0


def test_a_tenant_cannot_see_or_touch_another_tenants_job(client: Client, pipeline) -> None:
    theirs = client.create("globex")
    pipeline.drain()
    for method, suffix in (("GET", ""), ("GET", "/runs"), ("POST", "/cancel")):
        foreign = client.call(method, f"/jobs/{theirs}{suffix}", token=TOKENS["acme"])
        missing = client.call(method, f"/jobs/{MISSING}{suffix}", token=TOKENS["acme"])
        assert foreign.status == 404
        assert foreign.body == {**missing.body, "detail": missing.body["detail"].replace(MISSING, theirs)}
    foreign = client.call("POST", f"/jobs/{theirs}/replay", token=TOKENS["acme"])
    missing = client.call("POST", f"/jobs/{MISSING}/replay", token=TOKENS["acme"])
    assert foreign.status == missing.status == 403 and foreign.body == missing.body
    assert client.call("GET", "/jobs", token=TOKENS["acme"]).body["jobs"] == []
    assert client.call("GET", f"/jobs/{theirs}", token=TOKENS["globex"]).body["status"] == "queued"
    assert client.call("GET", f"/jobs/{theirs}", token=TOKENS["globex"]).body["visible"] is True


# --- refusals write nothing -------------------------------------------------------------------------------------

def test_bad_requests_are_refused_with_problem_json_and_write_nothing(client: Client, settings, dynamodb) -> None:
    client.create()  # the tenant is registered; from here on nothing may be written
    tables = (settings.jobs_table, settings.outbox_table)
    before = [_count_items(dynamodb, table) for table in tables]
    token = TOKENS["acme"]
    cases = [
        (b'{"type": "demo.echo",', 400),
        (b"\xff\xfe not utf-8", 400),
        (json.dumps({"type": "demo.echo", "tenant_id": "globex"}).encode(), 422),
        (json.dumps({"type": "demo.echo", "max_attempts": "3"}).encode(), 422),
        (json.dumps({"type": "demo.echo", "params": []}).encode(), 422),
        (json.dumps({"type": 7}).encode(), 422),
        (json.dumps(["demo.echo"]).encode(), 422),
        (json.dumps({"type": "demo.nope"}).encode(), 422),
        (json.dumps({"type": "demo.echo", "params": {"blob": "x" * 300 * 1024}}).encode(), 413),
    ]
    for raw, status in cases:
        reply = client.call("POST", "/jobs", token=token, raw=raw, headers={"Idempotency-Key": "refused"})
        assert reply.status == status, (raw[:60], reply.body)
    bad_key = client.call("POST", "/jobs", token=token, body={"type": "demo.echo"},
                          headers={"Idempotency-Key": "x" * 200})
    assert bad_key.status == 400
    assert [_count_items(dynamodb, table) for table in tables] == before
    unknown = client.call("POST", "/jobs", token=token, raw=json.dumps({"type": "demo.nope"}).encode()).body
    assert "demo.echo" in unknown["detail"]


# --- the OpenAPI document ----------------------------------------------------------------------------------------

def _app_routes() -> set[tuple[str, str]]:
    routes = api.app._static_routes + api.app._dynamic_routes
    return {(route.method.lower(), re.sub(r"<(\w+)>", r"{\1}", route.path)) for route in routes}


def test_openapi_document_lists_exactly_the_apps_routes(client: Client) -> None:
    served = client.call("GET", "/openapi.json")
    job_types = ApiDeployment.from_environment().job_types  # the API's: the environment `client` set
    assert served.status == 200 and served.body == json.loads(json.dumps(openapi_document(job_types)))
    new_job = served.body["components"]["schemas"]["NewJob"]
    assert new_job["properties"]["type"]["examples"] == sorted(job_types)
    documented = {(method, path) for path, item in DOCUMENT["paths"].items() for method in item}
    assert documented == _app_routes()
    secured = {(method, path) for path, item in DOCUMENT["paths"].items() for method, op in item.items()
               if op.get("security")}
    assert all("401" in DOCUMENT["paths"][path][method]["responses"] for method, path in secured)


def test_unknown_route_is_a_problem_404(client: Client) -> None:
    request = urllib.request.Request(client.url + "/nope", headers={"Authorization": f"Bearer {TOKENS['acme']}"})
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 404
    assert raised.value.headers["content-type"] == "application/problem+json"


# --- the gateway's event shape and the JWT authenticator (no stack needed) ---------------------------------------

def test_gateway_builds_an_http_api_v2_event() -> None:
    event = build_event("POST", "/jobs/abc?status=queued&x=1&x=2",
                        [("Authorization", "Bearer t"), ("X-Thing", "a"), ("x-thing", "b")], b"\xff",
                        "10.0.0.1")
    assert event["version"] == "2.0" and event["routeKey"] == "$default"
    assert event["rawPath"] == "/jobs/abc" and event["rawQueryString"] == "status=queued&x=1&x=2"
    assert event["headers"] == {"authorization": "Bearer t", "x-thing": "a,b"}
    assert event["queryStringParameters"] == {"status": "queued", "x": "1,2"}
    assert event["requestContext"]["http"] == {"method": "POST", "path": "/jobs/abc", "protocol": "HTTP/1.1",
                                               "sourceIp": "10.0.0.1", "userAgent": ""}
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == b"\xff"
    assert "pathParameters" not in event and "authorizer" not in event["requestContext"]


def test_tokens_never_reach_the_logs(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    logged = io.StringIO()
    for log_handler in api.logger.handlers:
        monkeypatch.setattr(log_handler, "stream", logged)
    store = ApiDeployment.from_environment().job_store  # the API's
    monkeypatch.setattr(store, "create", lambda *args, **kwargs: 1 / 0)  # forces the unexpected-error path
    assert client.call("POST", "/jobs", token=TOKENS["acme"], body={"type": "demo.echo"}).status == 500
    client.call("GET", "/jobs", token="a-wrong-secret")
    text = logged.getvalue()
    assert "unhandled error" in text
    for secret in (*TOKENS.values(), OPERATOR, "a-wrong-secret"):
        assert secret not in text


# --- one source per answer (issue 12) --------------------------------------------------------------------------

def test_no_answer_is_older_than_one_given_before(client: Client, settings, dynamodb) -> None:
    """The job table runs ahead of the view. Before, GET /jobs/{id} answered from the job table while the view
    had no row (v3 succeeded), then from the view once its first event was projected (v1 queued): a status
    that went backwards. Now a job the view has not seen is answered without a status (`visible: false`)
    and every status comes from the view, read consistently: the versions shown never go down."""
    from onward.bootstrap import Deployment

    job_id = client.create()
    _finish(settings, dynamodb, job_id, fail=False)  # v3 succeeded in the job table; nothing projected
    projector = Deployment.from_environment().status_projector
    shown: list[int] = []

    def read() -> None:
        body = client.call("GET", f"/jobs/{job_id}", token=TOKENS["acme"]).body
        shown.append(body["version"] if body["visible"] else 0)
        listed = client.call("GET", "/jobs", token=TOKENS["acme"]).body["jobs"]
        shown.append(listed[0]["version"] if listed else 0)

    read()
    for event in JobStore(settings, client=dynamodb).events(job_id):  # the view catches up one event at a time
        projector.project(event)
        read()
    assert shown == sorted(shown) and shown[0] == 0 and shown[-1] == 3, shown


def test_runs_say_which_attempts_overlapped(client: Client, settings, dynamodb) -> None:
    """A zombie (attempt 1, reaped while it still worked) reports after attempt 2 was claimed: the store
    records the overlap on both runs (onward.domain.overlaps), and GET /jobs/{id}/runs answers it in the documented
    shape (`overlapped_with`), so a user sees which side effects may have happened twice. Without the field
    in the answer the page and API users could not tell it from an attempt that merely lost its lease."""
    job_id = client.create()
    clock = ManualClock()
    store = JobStore(settings, client=dynamodb, clock=clock)
    zombie = store.claim("w-old", 1)
    assert zombie is not None and zombie.job_id == job_id
    clock.advance(2)
    assert [job.job_id for job in store.reap()] == [job_id]
    successor = store.claim("w-new", 60)
    assert successor is not None and successor.attempt == 2
    clock.advance(1)
    assert store.complete(zombie).status is ReportStatus.FENCED
    runs = client.call("GET", f"/jobs/{job_id}/runs", token=TOKENS["acme"]).body["runs"]
    assert [(run["attempt"], run["overlapped_with"]) for run in runs] == [(1, [2]), (2, [1])]

"""Input the API takes exactly as documented, over real HTTP (local gateway -> onward.api.app.handler ->
embedded stack), every answer held to the OpenAPI document (tests/integration/documented_client.py):

- a trailing newline is never read away: `re.match("^...$")` accepts "acme\\n" (`$` matches before a final
  newline) and the models refused it later (a 500), and the router read `/schedules/keep-me%0A` as
  `/schedules/keep-me` (the wrong schedule deleted). One pattern helper (onward/domain/text_patterns.py) matches
  whole everywhere, the routes included;
- numbers come back exactly as sent, or are refused naming the place: DynamoDB has one number type, so a
  whole float (2.0, 1e20, -0.0) came back an int, and 1e-400 (a float 0.0 once parsed) came back 0;
- a flag that changes data is a JSON boolean: `"dry_run": "false"` read as false made a bulk action act;
- cron, rate and time zone are what the documentation says: ASCII digits (Python's int() reads "٣" and "１")
  and IANA zone names (not the host's `localtime`, `Factory`, `posixrules`, `right/UTC`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore
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


# --- numbers -------------------------------------------------------------------------------------------------

KEPT = ('{"small": 0.1, "tiny": 1.5e-7, "negative": -3, "fraction": -2.5, "exact": 0.30000000000000004, '
        '"digits38": 12345678901234567890123456789012345678, "big": 10000000000000000000000000000000000000000, '
        '"edge": 1e-130, "nested": [1, 2.25, {"z": 0}], "zero": 0}')
CHANGED = {  # what a float that DynamoDB cannot give back as sent came back as, before
    "2.0": "2", "1e20": "100000000000000000000", "-0.0": "0", "0.0": "0", "1e125": "1000...0 (an int)",
    "1e-400": "0 (the float it parses to)", "-1e-400": "0", "1e400": "Infinity (refused as such)",
}


def test_params_numbers_come_back_exactly_as_sent(client: Client, jobs: JobStore) -> None:
    """What comes back to the caller (GET /jobs/{id}/params) and to the handler (the claimed job's params) is
    the JSON that was sent, number for number and type for type: ints stay ints (38 digits, 10**40), floats
    stay floats. Fails if a float is stored by a path that makes it an int or rounds it."""
    created = client.call("POST", "/jobs", TOKENS["acme"], raw=f'{{"type": "demo.echo", "params": {KEPT}}}'.encode())
    assert created.status == 202, created.body
    sent = json.loads(KEPT)
    shown = client.get(f"/jobs/{created.body['job_id']}/params", TOKENS["acme"]).body["params"]
    assert json.dumps(shown) == json.dumps(sent)
    lease = jobs.claim("input-test", 30)
    assert lease is not None and json.dumps(lease.job.params) == json.dumps(sent)


@pytest.mark.parametrize("number", list(CHANGED))
def test_a_number_that_would_come_back_changed_is_a_422_naming_it(client: Client, jobs: JobStore,
                                                                   number: str) -> None:
    """Catches a whole float stored as DynamoDB's one number type (it came back an int: `2.0` as `2`, `1e20`
    as 100000000000000000000, `-0.0` as `0`) and a literal Python's float cannot hold (`1e-400` parsed to 0.0,
    stored as 0): accepted silently before. Each is refused with the place, in a job, a batch entry and a
    schedule, and nothing is written."""
    raw = f'{{"type": "demo.echo", "params": {{"a": [1, {{"b": {number}}}]}}}}'.encode()
    _refused(client.call("POST", "/jobs", TOKENS["acme"], raw=raw), 422, "params")
    assert "params.a[1].b" in client.call("POST", "/jobs", TOKENS["acme"], raw=raw).body["detail"]
    batch = client.call("POST", "/jobs/batch", TOKENS["acme"], raw=b'{"jobs": [' + raw + b"]}")
    assert batch.status == 200 and batch.body["results"][0]["status"] == 422, batch.body
    schedule = client.call("POST", "/schedules", TOKENS["acme"],
                           raw=f'{{"name": "n", "type": "demo.echo", "rate": "1 hour", "params": {{"b": {number}}}}}'
                           .encode())
    _refused(schedule, 422, "params")
    assert jobs.claim("input-test", 30) is None and client.get("/schedules", TOKENS["acme"]).body["schedules"] == []


# --- strict types where a request changes data ----------------------------------------------------------------

@pytest.mark.parametrize(("field", "value"), [("dry_run", "false"), ("dry_run", 0), ("max_jobs", "5"),
                                         ("max_jobs", 5.0), ("since", 0), ("until", "1700000000")])
def test_a_bulk_action_takes_its_flags_and_numbers_as_json_types(client: Client, jobs: JobStore, field: str,
                                                                  value: Any) -> None:
    """Catches a bulk cancel reading `"dry_run": "false"` (or 0) as false and acting, `"5"` as max_jobs 5 and a
    bare number as a time (1970 plus seconds): pydantic's lax mode converted them. A 422 naming the field."""
    waiting = jobs.create("acme", NewJob(type="demo.echo")).job.job_id
    reply = client.call("POST", "/ops/bulk/cancel", OPERATOR, body={"tenant": "acme", field: value})
    _refused(reply, 422, field)
    assert jobs.get(waiting).state is JobState.QUEUED
    assert client.call("POST", "/ops/bulk/cancel", OPERATOR, body={"tenant": "acme", "dry_run": True}).status == 200


# --- cron, rate and time zones -------------------------------------------------------------------------------

WIDER_THAN_DOCUMENTED = [
    ("cron", "\u0663 * * * *"),  # ARABIC-INDIC DIGIT THREE: int() reads it as 3
    ("cron", "0 \uff11 * * *"),  # FULLWIDTH DIGIT ONE
    ("cron", "0 0 * * \u017fun"),  # LATIN SMALL LETTER LONG S: "ſun".upper() is "SUN"
    ("cron", "0\u20030 * * *"),  # EM SPACE: str.split() splits on it
    ("rate", "\uff11 minute"),
    ("rate", "5 minute\u017f"),  # "minuteſ" matched "minutes" ignoring case
    ("rate", "5\u00a0minutes"),  # NO-BREAK SPACE matched \s
    ("timezone", "localtime"),  # the host's zone, whatever it is
    ("timezone", "Factory"),
    ("timezone", "posixrules"),
    ("timezone", "right/UTC"),
    ("timezone", "posix/Europe/Paris"),
]


@pytest.mark.parametrize(("field", "value"), WIDER_THAN_DOCUMENTED, ids=[repr(v) for _, v in WIDER_THAN_DOCUMENTED])
def test_cron_rate_and_zone_are_only_what_the_documentation_says(client: Client, field: str, value: str) -> None:
    """Catches non-ASCII digits, letters and spaces in a cron or a rate (Python's \\d, int(), str.split() and
    upper() take Unicode) and time zones that are files of the host's zone database rather than IANA zone names:
    each was accepted (201) and stored. A 422 naming the field."""
    timing = {"cron": "0 * * * *"} if field == "timezone" else {}
    body = {"name": "wide", "type": "demo.echo", **timing, field: value}
    _refused(client.call("POST", "/schedules", TOKENS["acme"], body=body), 422, field)
    assert client.get("/schedules", TOKENS["acme"]).body["schedules"] == []


def test_documented_cron_rate_and_zones_are_accepted(client: Client) -> None:
    for index, timing in enumerate([{"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris"},
                                    {"cron": "*/15\t* * * *", "timezone": "America/Argentina/Buenos_Aires"},
                                    {"rate": "5 minutes"}, {"rate": "1 Hour"}, {"cron": "0 0 1 * *", "timezone": "UTC"},
                                    {"cron": "30 2 * * sun", "timezone": "Etc/GMT+5"}]):
        reply = client.call("POST", "/schedules", TOKENS["acme"], body={"name": f"s{index}", "type": "demo.echo",
                                                                        **timing})
        assert reply.status == 201, (timing, reply.body)

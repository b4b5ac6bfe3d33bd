"""Another tenant's job is answered exactly like a job that never existed, on every per-job route, and it COSTS
the same: the same 404 body (but the id it names) and the same DynamoDB requests in the same order. A route
that stops at a read finding another tenant's row, where a missing job goes on to a fallback read, answers
the two 404s in measurably different times (4 ms against 7 ms on GET /jobs/{id}, 87% of 150 pairs): an
oracle of which job ids exist. Requests are compared, not times (the machine is noisy).

Three ids per route: another tenant's job the status view holds, another tenant's job the view has not seen
yet (only the job table knows it), and an id no job ever had."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.bootstrap import ApiDeployment
from onward.domain.states import JobState
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client, Reply, call_with_claims
from tests.support import RequestLog, dead

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-oracle-secret", "globex": "globex-oracle-secret"}
OPERATOR = "operator-oracle-secret"
MISSING = "c" * 32
PER_JOB_ROUTES = [("GET", "/jobs/{}"), ("GET", "/jobs/{}/runs"), ("GET", "/jobs/{}/params"),
                  ("GET", "/jobs/{}/explain"), ("POST", "/jobs/{}/cancel")]


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


@pytest.fixture
def requests_made() -> Iterator[RequestLog]:
    log = RequestLog(ApiDeployment.from_environment().client("dynamodb"))
    yield log
    log.close()


def _answer(reply: Reply, job_id: str, log: RequestLog) -> tuple[int, str, list[tuple[str, str | None]]]:
    """A 404 as the caller can compare it: status, detail with the id taken out, and the requests it cost."""
    return reply.status, reply.body["detail"].replace(job_id, "<id>"), log.take()


def test_another_tenants_job_costs_the_requests_of_a_missing_one_on_every_route(
        client: Client, pipeline, requests_made: RequestLog) -> None:
    """Catches GET /jobs/{id} answering another tenant's job from its view row alone (one GetItem) while a
    missing id went on to the watermarks and the job table (a GetItem, a Query, a GetItem), and any per-job
    route whose two 404s read differently; and a cancel that touches another tenant's job."""
    in_view = client.call("POST", "/jobs", TOKENS["globex"], body={"type": "demo.echo"}).body["job_id"]
    pipeline.drain()
    not_in_view = client.call("POST", "/jobs", TOKENS["globex"], body={"type": "demo.echo"}).body["job_id"]
    assert client.get(f"/jobs/{in_view}", TOKENS["globex"]).body["visible"] is True
    assert client.get(f"/jobs/{not_in_view}", TOKENS["globex"]).body["visible"] is False

    for method, route in PER_JOB_ROUTES:
        client.call(method, route.format(MISSING), TOKENS["acme"])  # caches warmed: every answer below alike
        requests_made.take()
        answers = {job_id: _answer(client.call(method, route.format(job_id), TOKENS["acme"]), job_id, requests_made)
                   for job_id in (in_view, not_in_view, MISSING)}
        assert answers[MISSING][0] == 404 and answers[MISSING][2], (route, answers[MISSING])
        assert answers[in_view] == answers[MISSING], (route, answers)
        assert answers[not_in_view] == answers[MISSING], (route, answers)
    assert client.get(f"/jobs/{in_view}/params", TOKENS["globex"]).status == 200
    assert ApiDeployment.from_environment().job_store.get(in_view).state is JobState.QUEUED  # not cancelled


def test_a_bound_operators_replay_of_another_tenants_job_costs_what_a_missing_one_does(
        stack_environment, settings, dynamodb, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches the replay routes telling another tenant's dead job from a missing id by what they read, for an
    operator bound to a tenant (the only operator confined to one), and a replay of another tenant's job."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.delenv("ONWARD_TOKENS", raising=False)
    monkeypatch.delenv("ONWARD_OPERATOR_TOKEN", raising=False)
    (theirs,) = dead(JobStore(settings, client=dynamodb), "globex")
    bound = {"tenant": "acme", "scope": "onward-operator"}
    log = RequestLog(ApiDeployment.from_environment().client("dynamodb"))

    def replay_one(job_id: str) -> tuple[int, str, list[tuple[str, str | None]]]:
        reply = call_with_claims("POST", f"/jobs/{job_id}/replay", bound)
        return _answer(reply, job_id, log)

    def replay_listed(job_id: str) -> tuple[int, str, list[tuple[str, str | None]]]:
        (result,) = call_with_claims("POST", "/ops/replay", bound, body={"job_ids": [job_id]}).body["results"]
        return result["status"], result["problem"]["detail"].replace(job_id, "<id>"), log.take()

    try:
        for replay in (replay_one, replay_listed):
            replay(MISSING)  # caches warmed
            foreign, missing = replay(theirs), replay(MISSING)
            assert missing[0] == 404 and missing[2], missing
            assert foreign == missing, (replay.__name__, foreign, missing)
    finally:
        log.close()
    assert JobStore(settings, client=dynamodb).get(theirs).state is JobState.DEAD

"""The routes the status page's list and job detail read, over real HTTP (local gateway -> onward.api.app ->
embedded stack), every answer held to the OpenAPI document: the list's filters (statuses, type, id prefix)
with paging, counts by status, a job's params, and who a credential is. Each one: bad input is a 4xx with
problem details, and no tenant sees another's jobs.

What breaks without which code:
- a filtered page cut short of a query's matches continues after the last job SHOWN (onward.pipeline.view._index_key);
  continuing from the query's LastEvaluatedKey instead skips the matches that did not fit
  (test_filters_combine_and_a_filtered_listing_pages_without_skipping_or_repeating);
- the tenant scope on counts and params (`_listed_tenant`, `job_store.get(..., scope)`): without it a tenant
  reads another's counts or params (test_counts_..., test_params_...).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-list-secret", "globex": "globex-list-secret"}
OPERATOR = "operator-list-secret"
MISSING = "0" * 32


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _ids(reply) -> list[str]:
    return [job["job_id"] for job in reply.body["jobs"]]


def test_filters_combine_and_a_filtered_listing_pages_without_skipping_or_repeating(client, settings, dynamodb,
                                                                                    pipeline) -> None:
    store = JobStore(settings, client=dynamodb)
    echoes = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(5)]
    sleeps = [store.create("acme", NewJob(type="demo.sleep")).job.job_id for _ in range(2)]
    theirs = store.create("globex", NewJob(type="demo.echo")).job.job_id
    store.cancel(echoes[1])
    pipeline.drain()
    token = TOKENS["acme"]
    everything = _ids(client.get("/jobs?limit=100", token))
    assert sorted(everything) == sorted(echoes + sleeps)

    assert _ids(client.get("/jobs?status=cancelled", token)) == [echoes[1]]
    both = _ids(client.get("/jobs?status=queued,cancelled&limit=100", token))
    assert both == everything  # newest first, as unfiltered
    assert sorted(_ids(client.get("/jobs?type=demo.sleep", token))) == sorted(sleeps)
    assert _ids(client.get("/jobs?type=demo.echo&status=cancelled", token)) == [echoes[1]]
    assert _ids(client.get("/jobs?type=demo.sleep&status=cancelled", token)) == []
    assert _ids(client.get(f"/jobs?id_prefix={sleeps[0]}", token)) == [sleeps[0]]
    by_prefix = _ids(client.get(f"/jobs?id_prefix={echoes[2][:3]}", token))
    assert echoes[2] in by_prefix and all(job_id.startswith(echoes[2][:3]) for job_id in by_prefix)

    # one echo per page: each query reads several matches, the page keeps one, the cursor resumes after it
    pages, cursor = [], None
    while True:
        reply = client.get("/jobs?type=demo.echo&limit=1" + (f"&cursor={cursor}" if cursor else ""), token)
        pages += _ids(reply)
        cursor = reply.body["cursor"]
        if cursor is None:
            break
    assert pages == [job_id for job_id in everything if job_id in echoes]

    # another tenant's job is not found by any filter, and naming the tenant is refused
    assert _ids(client.get(f"/jobs?id_prefix={theirs}", token)) == []
    assert client.get("/jobs?tenant=globex", token).status == 403
    assert _ids(client.get(f"/jobs?tenant=globex&id_prefix={theirs}", OPERATOR)) == [theirs]


BAD_FILTERS = ["status=bogus", "status=queued,bogus", "status=", "type=Demo.Echo", "type=demo..echo",
               "id_prefix=XYZ", "id_prefix=" + "a" * 33, "id_prefix=", "limit=0", "limit=101", "tenant=no%20spaces",
               "cursor=bm90LWEtY3Vyc29y"]


def test_bad_filters_are_400_problems_that_say_why(client) -> None:
    for query in BAD_FILTERS:
        reply = client.get(f"/jobs?{query}", TOKENS["acme"])
        assert reply.status == 400, (query, reply.body)
        assert reply.body["title"] == "Bad request" and reply.body["detail"], query
    detail = client.get("/jobs?status=queued,bogus", TOKENS["acme"]).body["detail"]
    assert "'bogus'" in detail and "retry_wait" in detail  # names the bad value and the good ones


def test_counts_by_status_are_the_tenants_own_every_status_listed(client, settings, dynamodb, pipeline) -> None:
    store = JobStore(settings, client=dynamodb)
    echoes = [store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(3)]
    store.create("acme", NewJob(type="demo.sleep"))
    store.cancel(echoes[0])
    for _ in range(4):
        store.create("globex", NewJob(type="demo.echo"))
    pipeline.drain()

    counts = client.get("/jobs/counts", TOKENS["acme"]).body
    assert counts["counts"] == {**{state.value: 0 for state in JobState}, "queued": 3, "cancelled": 1}
    assert counts["complete"] is True and counts["examined"] == 4
    typed = client.get("/jobs/counts?type=demo.echo", TOKENS["acme"]).body["counts"]
    assert (typed["queued"], typed["cancelled"]) == (2, 1)
    assert client.get("/jobs/counts", TOKENS["globex"]).body["counts"]["queued"] == 4
    assert client.get("/jobs/counts?tenant=globex", TOKENS["acme"]).status == 403
    assert client.get("/jobs/counts", OPERATOR).status == 400  # an operator names the tenant
    assert client.get("/jobs/counts?tenant=globex", OPERATOR).body["counts"]["queued"] == 4
    assert client.get("/jobs/counts?type=NOT", TOKENS["acme"]).status == 400
    assert client.get("/jobs/counts").status == 401


def test_counts_read_a_bounded_number_of_entries_and_say_so(settings, dynamodb, pipeline) -> None:
    from onward.bootstrap import Deployment

    store = JobStore(settings, client=dynamodb)
    for _ in range(5):
        store.create("acme", NewJob(type="demo.echo"))
    pipeline.drain()
    reader = Deployment.from_environment().status_view
    partial = reader.count_by_status("acme", max_examined=3)
    assert (partial.counts, partial.examined, partial.complete) == ({"queued": 3}, 3, False)
    assert reader.count_by_status("acme").complete is True


def test_params_are_the_owners_and_another_tenants_job_is_a_missing_one(client, settings, dynamodb) -> None:
    store = JobStore(settings, client=dynamodb)
    mine = store.create("acme", NewJob(type="demo.echo", params={"to": "you", "n": [1, 2]}, max_attempts=4,
                                       priority=2)).job
    theirs = store.create("globex", NewJob(type="demo.echo", params={"secret": 1})).job.job_id
    reply = client.get(f"/jobs/{mine.job_id}/params", TOKENS["acme"])
    assert reply.status == 200
    assert {key: reply.body[key] for key in ("job_id", "type", "params", "max_attempts", "priority")} == {
        "job_id": mine.job_id, "type": "demo.echo", "params": {"to": "you", "n": [1, 2]}, "max_attempts": 4,
        "priority": 2}
    assert reply.body["created_at"].endswith("Z")
    foreign = client.get(f"/jobs/{theirs}/params", TOKENS["acme"])
    missing = client.get(f"/jobs/{MISSING}/params", TOKENS["acme"])
    assert foreign.status == missing.status == 404
    assert foreign.body == {**missing.body, "detail": missing.body["detail"].replace(MISSING, theirs)}
    assert client.get(f"/jobs/{theirs}/params", OPERATOR).body["params"] == {"secret": 1}
    assert client.get("/jobs/not-an-id/params", TOKENS["acme"]).status == 404
    assert client.get(f"/jobs/{mine.job_id}/params").status == 401


def test_whoami_says_the_tenant_and_the_role(client) -> None:
    assert client.get("/whoami", TOKENS["globex"]).body == {"tenant_id": "globex", "operator": False}
    assert client.get("/whoami", OPERATOR).body == {"tenant_id": None, "operator": True}
    assert client.get("/whoami", "wrong").status == 401

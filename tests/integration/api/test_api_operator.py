"""The operator's routes (/ops/...) over real HTTP, every answer held to the OpenAPI document: tenants with
their weight, cap, running and waiting jobs and their recent claims; the view's lag per events-stream shard;
parked records and projection conflicts with their reasons; dead and quarantined jobs, and their bulk replay.

Who may call what: a tenant's token is refused every one (403), as is no credential (401). What shows every
tenant's data (tenants, parked records, conflicts) needs an operator bound to no tenant; an operator bound to a
tenant (a JWT with both claims) lists and replays only that tenant's jobs. A bad body replays nothing.

What breaks without which code:
- counting every `running` event as a claim would count a cancel request on a running job as one
  (test_tenants_...: the cancel request after the claims);
- a bulk replay that did not go through the one replay path (`_replay`: the tenant scope, then the store)
  would let a bound operator replay another tenant's job (test_a_bound_operator_...).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import iso, system_clock
from onward.domain.dispatch import TenantPolicy
from onward.domain.models import ErrorSummary, NewJob, OutboxEvent
from onward.domain.states import JobState
from onward.store.service import JobStore, Tenant
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client, call_with_claims

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-ops-secret", "globex": "globex-ops-secret"}
OPERATOR = "operator-ops-secret"
MISSING = "e" * 32
OPS_READS = ["/ops/tenants", "/ops/lag", "/ops/parked", "/ops/conflicts", "/ops/replayable"]


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _dead(store: JobStore, tenant: str, count: int = 1) -> list[str]:
    """Jobs of `tenant` ended dead (their one attempt failed for good); no other job may be due meanwhile."""
    job_ids = [store.create(tenant, NewJob(type="demo.fail", max_attempts=1)).job.job_id for _ in range(count)]
    for _ in job_ids:
        lease = store.claim("ops-test", 30)
        assert lease is not None and lease.job_id in job_ids
        store.fail(lease, ErrorSummary.of("Boom", "failed for good"), permanent=True)
    return job_ids


def test_every_operator_route_refuses_tenants_and_strangers(client) -> None:
    for path in OPS_READS:
        assert client.get(path).status == 401, path
        refused = client.get(path, TOKENS["acme"])
        assert refused.status == 403 and refused.body["title"] == "Forbidden", path
        assert client.get(path, OPERATOR).status == 200, path
    refused = client.call("POST", "/ops/replay", TOKENS["acme"], body={"job_ids": [MISSING]})
    assert refused.status == 403 and refused.body["detail"] == "replay is for operators"
    assert client.call("POST", "/ops/replay", None, body={"job_ids": [MISSING]}).status == 401


def test_tenants_show_settings_counters_and_claims_minute_by_minute(client, settings, dynamodb) -> None:
    store = JobStore(settings, client=dynamodb)
    store.register_tenant(Tenant("acme", TenantPolicy(weight=2.0, cap=3)))
    acme = [store.create("acme", NewJob(type="demo.sleep")).job.job_id for _ in range(2)]
    store.create("globex", NewJob(type="demo.sleep"))
    for _ in range(3):
        assert store.claim("ops-test", 30) is not None
    store.cancel(acme[0])  # a cancel request: a `running` event that is no claim
    store.create("acme", NewJob(type="demo.sleep"))  # waiting

    answer = client.get("/ops/tenants", OPERATOR).body
    rows = {row["tenant_id"]: row for row in answer["tenants"]}
    assert set(rows) == {"acme", "globex"}
    acme_row, globex_row = rows["acme"], rows["globex"]
    assert (acme_row["weight"], acme_row["cap"], acme_row["running"], acme_row["waiting"]) == (2.0, 3, 2, 1)
    assert (globex_row["weight"], globex_row["cap"], globex_row["running"], globex_row["waiting"]) == (1.0, None, 1, 0)
    assert len(acme_row["claims"]) == 5 and sum(acme_row["claims"]) == acme_row["claims"][-1] == 2
    assert sum(globex_row["claims"]) == 1
    assert (acme_row["claim_share"], globex_row["claim_share"]) == (0.6667, 0.3333)
    window = answer["window"]
    assert window["bucket_s"] == 60 and window["complete"] is True and window["since"] < window["until"]


def test_lag_per_shard_is_unknown_until_a_beat_is_projected_on_each(client, pipeline, endpoint) -> None:
    before = client.get("/ops/lag", OPERATOR).body
    assert before["view"]["stale"] is True and before["relay"] is None
    assert before["shards"] and all(row["bounded_by"] == "unknown" and row["lag_s"] is None
                                    for row in before["shards"])
    pipeline.drain(beat=True)
    after = client.get("/ops/lag", OPERATOR).body
    stream = Deployment.from_environment().settings.require("events_stream")
    open_shards = {shard["ShardId"] for shard in endpoint.client("kinesis").list_shards(StreamName=stream)["Shards"]
                   if "EndingSequenceNumber" not in shard["SequenceNumberRange"]}
    assert {row["shard_id"] for row in after["shards"]} == open_shards
    for row in after["shards"]:
        assert row["bounded_by"] == "own" and row["stale"] is False and 0 <= row["lag_s"] < 30
        assert row["confirmed_through"] and row["processed_at"] and row["slots"] >= 16
    assert after["view"]["view_lag_s"] == max(row["lag_s"] for row in after["shards"])  # the worst shard's
    assert after["relay"]["confirmed_through"] and after["relay"]["lag_s"] < 30


def test_parked_records_and_conflicts_say_why(client) -> None:
    deployment = Deployment.from_environment()
    deployment.parked_records.park("projector", "shardId-000000000001", "4711", b'{"schema": 1, "job_id": \xff',
                                   "not JSON: Expecting value: line 1 column 26 (char 25)")
    deployment.parked_records.park("relay", "shardId-000000000002", "99", b"x" * 1000, "an item no event is made of")
    now = iso(system_clock())
    first = OutboxEvent(event_id=f"{MISSING}:2", job_id=MISSING, tenant_id="acme", type="demo.echo", version=2,
                        status=JobState.RUNNING, attempt=1, occurred_at=now)
    projector = deployment.status_projector
    assert projector.project(first).value == "applied"
    assert projector.project(first.model_copy(update={"status": JobState.CANCELLED})).value == "conflict"

    parked = client.get("/ops/parked", OPERATOR).body
    assert parked["more"] is False
    by_source = {row["source"]: row for row in parked["records"]}
    assert by_source["projector"]["reason"].startswith("not JSON")
    assert by_source["projector"]["preview"] == '{"schema": 1, "job_id": \\xff'  # escaped, not dropped
    assert (by_source["projector"]["shard_id"], by_source["projector"]["sequence_number"]) == (
        "shardId-000000000001", "4711")
    assert by_source["relay"]["raw_size"] == 1000 and by_source["relay"]["preview"].endswith("…")
    assert [row["source"] for row in client.get("/ops/parked?source=relay", OPERATOR).body["records"]] == ["relay"]
    limited = client.get("/ops/parked?limit=1&source=projector", OPERATOR).body
    assert len(limited["records"]) == 1 and limited["more"] is False

    (conflict,) = client.get("/ops/conflicts", OPERATOR).body["conflicts"]
    assert (conflict["job_id"], conflict["tenant_id"], conflict["version"]) == (MISSING, "acme", 2)
    assert conflict["differences"] == [{"field": "status", "in_view": "running", "incoming": "cancelled"}]
    assert conflict["reason"] == ('version 2 arrived again with other content: status ("running" in the view, '
                                  '"cancelled" incoming)')

    for bad in ("/ops/parked?source=worker", "/ops/parked?limit=0", "/ops/conflicts?limit=many",
                "/ops/replayable?limit=101", "/ops/replayable?tenant=bad%20id"):
        reply = client.get(bad, OPERATOR)
        assert reply.status == 400 and reply.body["detail"], bad


def test_replayable_lists_dead_and_quarantined_per_tenant(client, settings, dynamodb, pipeline) -> None:
    store = JobStore(settings, client=dynamodb)
    acme_dead = _dead(store, "acme", 2)
    globex_dead = _dead(store, "globex")
    store.create("acme", NewJob(type="demo.echo"))  # queued: not listed
    pipeline.drain()
    listed = client.get("/ops/replayable", OPERATOR).body
    by_tenant = {group["tenant_id"]: [job["job_id"] for job in group["jobs"]] for group in listed["tenants"]}
    assert {tenant: sorted(jobs) for tenant, jobs in by_tenant.items()} == {"acme": sorted(acme_dead),
                                                                            "globex": globex_dead}
    times = [job["updated_at"] for job in listed["tenants"][0]["jobs"]]
    assert times == sorted(times, reverse=True)  # newest first
    assert all(job["error"]["error_type"] == "Boom" for group in listed["tenants"] for job in group["jobs"])
    one = client.get("/ops/replayable?tenant=acme&limit=1", OPERATOR).body["tenants"]
    assert [group["tenant_id"] for group in one] == ["acme"] and len(one[0]["jobs"]) == 1 and one[0]["cursor"]
    rest = client.get(f"/jobs?tenant=acme&status=dead,quarantined&cursor={one[0]['cursor']}", OPERATOR).body
    assert [job["job_id"] for job in one[0]["jobs"] + rest["jobs"]] == by_tenant["acme"]


def test_bulk_replay_answers_each_job_as_its_own_route_would(client, settings, dynamodb) -> None:
    store = JobStore(settings, client=dynamodb)
    dead = _dead(store, "acme", 2)
    queued = store.create("acme", NewJob(type="demo.echo")).job.job_id
    reply = client.call("POST", "/ops/replay", OPERATOR, body={"job_ids": [dead[0], queued, MISSING, dead[1]]})
    assert reply.status == 200 and reply.body["replayed"] == 2
    results = reply.body["results"]
    assert [(r["job_id"], r["status"]) for r in results] == [(dead[0], 202), (queued, 409), (MISSING, 404),
                                                               (dead[1], 202)]
    assert results[0]["job"] == {"job_id": dead[0], "status": "queued", "version": 4}
    single = client.call("POST", f"/jobs/{queued}/replay", OPERATOR).body
    assert results[1]["problem"] == single  # the same answer as the job's own route
    assert results[2]["problem"]["title"] == "Not found"
    assert {store.get(job_id).state for job_id in dead} == {JobState.QUEUED}
    again = client.call("POST", "/ops/replay", OPERATOR, body={"job_ids": [dead[0]]}).body["results"]
    assert again[0]["status"] == 409 and again[0]["problem"]["title"] == "Not replayable"


def _outbox_items(dynamodb, settings) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(
        TableName=settings.outbox_table, Select="COUNT"))


def test_a_bad_bulk_replay_is_refused_whole_and_replays_nothing(client, settings, dynamodb) -> None:
    store = JobStore(settings, client=dynamodb)
    (dead,) = _dead(store, "acme")
    events = _outbox_items(dynamodb, settings)
    bodies: list[Any] = [
        {}, {"job_ids": []}, {"job_ids": [dead, dead]}, {"job_ids": [dead] + ["a" * 32] * 100},
        {"job_ids": [dead, "not-a-job-id"]}, {"job_ids": [dead], "force": True}, {"job_ids": dead}, [dead],
    ]
    for body in bodies:
        reply = client.call("POST", "/ops/replay", OPERATOR, body=body)
        assert reply.status == 422, (body, reply.body)
        assert reply.body["errors"], body
    assert "name each job once" in client.call("POST", "/ops/replay", OPERATOR,
                                               body={"job_ids": [dead, dead]}).body["detail"]
    assert client.call("POST", "/ops/replay", OPERATOR, raw=b'{"job_ids": [').status == 400
    assert client.call("POST", "/ops/replay", OPERATOR, raw=b"job_ids=" + dead.encode(),
                       headers={"Content-Type": "application/x-www-form-urlencoded"}).status == 415
    assert client.call("POST", "/ops/replay", TOKENS["acme"], body={"job_ids": [dead]}).status == 403
    assert store.get(dead).state is JobState.DEAD and _outbox_items(dynamodb, settings) == events


def test_a_bound_operator_sees_and_replays_only_its_tenants_jobs(stack_environment, settings, dynamodb,
                                                                  monkeypatch) -> None:
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.delenv("ONWARD_TOKENS", raising=False)
    monkeypatch.delenv("ONWARD_OPERATOR_TOKEN", raising=False)
    store = JobStore(settings, client=dynamodb)
    (acme_dead,) = _dead(store, "acme")
    (globex_dead,) = _dead(store, "globex")
    bound = {"tenant": "acme", "scope": "onward-operator"}
    for path in ("/ops/tenants", "/ops/parked", "/ops/conflicts"):
        refused = call_with_claims("GET", path, bound)
        assert refused.status == 403 and "bound to no tenant" in refused.body["detail"], path
    assert call_with_claims("GET", "/ops/lag", bound).status == 200
    assert call_with_claims("GET", "/ops/replayable?tenant=globex", bound).status == 403
    assert call_with_claims("GET", "/ops/replayable", bound).status == 200  # (no view here: nothing listed)

    reply = call_with_claims("POST", "/ops/replay", bound, body={"job_ids": [globex_dead, acme_dead]})
    assert [(r["job_id"], r["status"]) for r in reply.body["results"]] == [(globex_dead, 404), (acme_dead, 202)]
    assert reply.body["results"][0]["problem"]["detail"] == f"no job {globex_dead!r}"  # as if it never existed
    assert store.get(globex_dead).state is JobState.DEAD and store.get(acme_dead).state is JobState.QUEUED
    tenant_only = call_with_claims("POST", "/ops/replay", {"tenant": "globex"}, body={"job_ids": [globex_dead]})
    assert tenant_only.status == 403 and store.get(globex_dead).state is JobState.DEAD
    unbound = call_with_claims("POST", "/ops/replay", {"groups": "[onward-operator]"}, body={"job_ids": [globex_dead]})
    assert unbound.body["replayed"] == 1

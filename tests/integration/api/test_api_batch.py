"""POST /jobs/batch over real HTTP, every answer held to the OpenAPI document: up to 100 jobs in one request,
each entry answered in order as POST /jobs would answer it alone (202 created, 200 found by its
idempotency_key, or its problem), a refused entry refusing only itself, and a body that is not 1 to 100
objects refusing the whole request with nothing written. The store's side is JobStore.create_batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from onward.domain.clock import iso
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-batch-secret", "globex": "globex-batch-secret"}
OPERATOR = "operator-batch-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _batch(client: Client, jobs: Any, token: str = TOKENS["acme"], **call: Any):
    return client.call("POST", "/jobs/batch", token, body={"jobs": jobs}, **call)


def _count(dynamodb, table: str) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"))


def test_three_good_entries_and_a_bad_one_create_three_and_say_why_not_the_fourth(client: Client, settings,
                                                                                   dynamodb) -> None:
    """Catches a bad entry refusing the whole batch (or the entries after it), answers out of order, and a
    refused entry without the problem POST /jobs would give (its place in the body, its field)."""
    reply = _batch(client, [
        {"type": "demo.echo", "params": {"n": 1}},
        {"type": "demo.echo", "max_attempts": "3"},
        {"type": "demo.sleep", "priority": 9},
        {"type": "demo.echo", "delay_s": 60},
    ])
    assert reply.status == 200, reply.body
    results = reply.body["results"]
    assert [result["status"] for result in results] == [202, 422, 202, 202]
    assert reply.body["created"] == 3
    problem = results[1]["problem"]
    assert (problem["status"], problem["title"]) == (422, "Invalid request")
    assert [error["loc"] for error in problem["errors"]] == [["jobs", 1, "max_attempts"]]
    assert "job_id" not in results[1] and "problem" not in results[0]
    store = JobStore(settings, client=dynamodb)
    created = [store.get(results[index]["job_id"], "acme") for index in (0, 2, 3)]
    assert [(job.type, job.params, job.priority) for job in created] == [
        ("demo.echo", {"n": 1}, 0), ("demo.sleep", {}, 9), ("demo.echo", {}, 0)]
    assert created[2].run_at is not None and created[2].not_before == created[2].run_at  # as POST /jobs does
    listed = client.get(f"/jobs/{results[3]['job_id']}/params", TOKENS["acme"]).body
    assert listed["run_at"] == iso(created[2].run_at)


def test_a_replayed_batch_answers_200_with_the_same_jobs_and_writes_nothing(client: Client, settings,
                                                                             dynamodb) -> None:
    """Catches a retried batch creating its jobs twice, and keys kept per batch rather than per entry (the same
    key in a single POST /jobs with the same job finds the job too)."""
    entries = [{"type": "demo.echo", "params": {"n": n}, "idempotency_key": f"key-{n}"} for n in range(3)]
    first = _batch(client, entries)
    assert [result["status"] for result in first.body["results"]] == [202, 202, 202]
    items = _count(dynamodb, settings.jobs_table), _count(dynamodb, settings.outbox_table)
    again = _batch(client, entries)
    assert again.status == 200 and again.body["created"] == 0
    assert [(r["status"], r["job_id"]) for r in again.body["results"]] == [
        (200, r["job_id"]) for r in first.body["results"]]
    assert (_count(dynamodb, settings.jobs_table), _count(dynamodb, settings.outbox_table)) == items
    single = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.echo", "params": {"n": 1}},
                         headers={"Idempotency-Key": "key-1"})
    assert (single.status, single.body["job_id"]) == (200, first.body["results"][1]["job_id"])


def test_each_entry_gets_the_refusal_post_jobs_would_give(client: Client) -> None:
    """Catches a store refusal (a key used for another job) failing the batch, an unknown type reaching the
    store, and another tenant's key mistaken for this one's."""
    assert _batch(client, [{"type": "demo.echo", "idempotency_key": "once"}]).body["results"][0]["status"] == 202
    reply = _batch(client, [
        {"type": "demo.echo", "params": {"other": True}, "idempotency_key": "once"},
        {"type": "demo.nope"},
        {"type": "demo.echo", "idempotency_key": "x" * 129},
        {"type": "demo.echo", "tenant_id": "globex"},
        {"type": "demo.echo"},
    ])
    results = reply.body["results"]
    assert [result["status"] for result in results] == [409, 422, 422, 422, 202]
    assert results[0]["problem"]["title"] == "Idempotency conflict"
    assert results[1]["problem"]["title"] == "Unknown job type" and "demo.echo" in results[1]["problem"]["detail"]
    assert results[2]["problem"]["errors"][0]["loc"] == ["jobs", 2, "idempotency_key"]
    assert results[3]["problem"]["errors"][0]["loc"] == ["jobs", 3, "tenant_id"]
    theirs = _batch(client, [{"type": "demo.echo", "idempotency_key": "once"}], TOKENS["globex"])
    assert theirs.body["results"][0]["status"] == 202


@pytest.mark.parametrize("body", [
    {"jobs": [{"type": "demo.echo"}] * 101},
    {"jobs": []},
    {"jobs": [{"type": "demo.echo"}, 7]},
    {"jobs": {"type": "demo.echo"}},
    [{"type": "demo.echo"}],
    {"jobs": [{"type": "demo.echo"}], "atomic": True},
])
def test_a_body_that_is_not_1_to_100_objects_is_refused_whole(client: Client, settings, dynamodb, body) -> None:
    """Catches a 101st entry created (or the first 100), and a malformed list half created."""
    reply = client.call("POST", "/jobs/batch", TOKENS["acme"], body=body)
    assert reply.status == 422, reply.body
    assert _count(dynamodb, settings.jobs_table) == 0


def test_a_batch_is_a_tenants_and_keys_each_entry_not_the_request(client: Client, settings, dynamodb) -> None:
    """Catches an operator (no tenant) creating jobs, and an Idempotency-Key header silently ignored (a client
    retrying with it would create the batch twice)."""
    assert _batch(client, [{"type": "demo.echo"}], OPERATOR).status == 403
    assert _batch(client, [{"type": "demo.echo"}], "not-a-token").status == 401
    keyed = _batch(client, [{"type": "demo.echo"}], headers={"Idempotency-Key": "whole"})
    assert keyed.status == 400 and "idempotency_key" in keyed.body["detail"]
    assert _count(dynamodb, settings.jobs_table) == 0
    full = _batch(client, [{"type": "demo.echo", "params": {"n": n}} for n in range(100)])
    assert full.status == 200 and full.body["created"] == 100
    assert len({result["job_id"] for result in full.body["results"]}) == 100

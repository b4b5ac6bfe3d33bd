"""Retry policies per job type and snooze over real HTTP (issue 37), every answer held to the OpenAPI document:
GET /job-types lists what workers declared, a create without max_attempts gets its type's, and
GET /jobs/{job_id}/explain says "snoozed" and carries the policy in force.

The declaring worker is a JobStore of the test's own (onward.runtime.declared_types does the same at a pool's
start); the API reads the declarations through its store's cache (onward.store.job_types.CACHE_S), so the
test polls for them for a little longer than that.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.domain.retry_policy import RetryPolicy
from onward.store.job_types import CACHE_S
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-types-secret"}
OPERATOR = "operator-types-secret"
DECLARED = RetryPolicy(max_attempts=6, base_s=2, cap_s=120, jitter="full", permanent=("ValueError",))


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


@pytest.fixture
def worker_store(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb)


def _declared(client: Client, job_type: str) -> dict[str, Any]:
    deadline = time.monotonic() + CACHE_S * 3
    while True:
        reply = client.get("/job-types", TOKENS["acme"])
        assert reply.status == 200, reply.body
        found = {declared["type"]: declared for declared in reply.body["types"]}
        if job_type in found or time.monotonic() > deadline:
            assert job_type in found, reply.body
            return found[job_type]
        time.sleep(0.5)


def test_the_declared_types_are_listed_and_give_a_create_its_max_attempts(client, worker_store) -> None:
    """Without the published declaration GET /job-types would not list the type and a create without
    max_attempts would get the platform's 3; a job that names its own keeps it."""
    worker_store.type_catalog.declare([("demo.flaky", DECLARED)], "test-host:1")

    declared = _declared(client, "demo.flaky")
    assert declared["retry"] == {"max_attempts": 6, "base_s": 2, "cap_s": 120, "jitter": "full",
                                 "permanent": ["ValueError"], "max_snoozes": 100}
    assert declared["declared_by"] == "test-host:1"

    plain = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.flaky"}).body["job_id"]
    own = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.flaky", "max_attempts": 2}).body["job_id"]
    assert client.get(f"/jobs/{plain}/params", TOKENS["acme"]).body["max_attempts"] == 6
    assert client.get(f"/jobs/{own}/params", TOKENS["acme"]).body["max_attempts"] == 2

    explained = client.get(f"/jobs/{plain}/explain", TOKENS["acme"]).body
    assert explained["retry_policy"]["declared"] is True
    assert (explained["retry_policy"]["max_attempts"], explained["retry_policy"]["permanent"]) == (6, ["ValueError"])


def test_a_snoozed_job_is_explained_as_snoozed_with_its_count(client, worker_store) -> None:
    """Without the snoozed reason the job would read "scheduled" (it has no run_at); without the policy block
    the page could not show how many snoozes it took of how many."""
    job_id = worker_store.create("acme", NewJob(type="demo.echo")).job.job_id
    lease = worker_store.claim("w-types", 30)
    assert lease is not None and lease.job_id == job_id
    worker_store.snooze(lease, 600, max_snoozes=100)

    explained = client.get(f"/jobs/{job_id}/explain", TOKENS["acme"]).body
    assert explained["reason"] == "snoozed" and explained["detail"].startswith("snoozed until")
    assert explained["until"] is not None
    assert (explained["retry_policy"]["snoozes"], explained["retry_policy"]["attempts_used"]) == (1, 0)

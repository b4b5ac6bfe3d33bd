"""The new home answers writes 503 until its adoption is done (issue 39's gaps, onward.api.failover_gate), over
HTTP on the embedded endpoint, every answer held to the OpenAPI document: once this Region's epoch item names it
home at epoch 1 and before `adopted_at` is recorded, a create, a batch create, a cancel and a schedule are
answered 503 "Failover in progress" with Retry-After, reads answer, and `/health` says `writes: refused`; once
the adoption is recorded, the same create is accepted (202) within the epoch cache's period.

How it breaks: without the gate the create is accepted during adoption (its row enters the queue entries the
counters' rebuild then sets anew, and a cancel of an unadopted job is refused with a 500-like error); without
the cache's expiry the 503s would never end; without the Region check another Region's replicated epoch item
would stop this Region's writes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from onward.domain.models import NewJob
from onward.settings import Settings
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-gate-secret"}
OPERATOR = "operator-gate-secret"
TOKEN = TOKENS["acme"]


@pytest.fixture
def several_regions(stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """This Region in a deployment of several (a witness in the jobs table), the epoch item read every 0.2 s."""
    settings = Settings.from_environment(stack_environment)
    assert settings.region
    monkeypatch.setenv("AWS_REGION", settings.region)
    monkeypatch.setenv("ONWARD_WITNESS", f"table:{settings.region}")
    monkeypatch.setenv("ONWARD_HOME_REGION", "ap-southeast-4")  # the old home: another Region
    monkeypatch.setenv("ONWARD_AUTHORITY_LEASE_S", "1")
    monkeypatch.setenv("ONWARD_AUTHORITY_CHECK_S", "0.2")  # the epoch cache's period too (epoch_cache_s)
    return settings


@pytest.fixture
def client(several_regions: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client) -> int:
    return client.call("POST", "/jobs", TOKEN, body={"type": "demo.echo"}).status


def _eventually(check, within_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_writes_are_refused_while_the_new_home_adopts_and_accepted_after(client: Client, several_regions: Settings,
                                                                         dynamodb) -> None:
    store = JobStore(several_regions, client=dynamodb)
    existing = store.create("acme", NewJob(type="demo.echo")).job.job_id  # created before the failover (epoch 0)
    assert _create(client) == 202  # a deployment of several Regions, never failed over: writes accepted
    assert client.get("/health").body["writes"] == "accepted"

    store.raise_region_epoch(1, home=several_regions.region or "", previous_home="ap-southeast-4",
                             reason="drill", decided_by="test")
    assert _eventually(lambda: _create(client) == 503)
    refused = client.call("POST", "/jobs", TOKEN, body={"type": "demo.echo"})
    assert refused.status == 503 and refused.headers["retry-after"] == "10"
    assert refused.body["type"].endswith("/failover-in-progress") and refused.body["title"] == "Failover in progress"
    assert "failover to" in refused.body["detail"] and "region epoch 1" in refused.body["detail"]
    for method, path, body in (("POST", "/jobs/batch", {"jobs": [{"type": "demo.echo"}]}),
                               ("POST", f"/jobs/{existing}/cancel", None),
                               ("POST", "/schedules", {"name": "nightly", "cron": "0 3 * * *",
                                                       "job": {"type": "demo.echo"}})):
        assert client.call(method, path, TOKEN, body=body).status == 503, path
    assert client.get(f"/jobs/{existing}", TOKEN).status == 200  # reads answer
    assert client.call("POST", "/jobs", None, body={"type": "demo.echo"}).status == 401  # who first, then the gate
    health = client.get("/health").body
    assert health["writes"] == "refused" and "adopting" in health["writes_refused_because"]

    store.mark_adopted(1)
    assert _eventually(lambda: _create(client) == 202)
    assert client.get("/health").body["writes"] == "accepted"


def test_another_regions_epoch_item_refuses_nothing_here(client: Client, several_regions: Settings,
                                                         dynamodb) -> None:
    """The epoch item replicates: the old home holds the new home's item too. Its API is not the one adopting."""
    JobStore(several_regions, client=dynamodb).raise_region_epoch(
        1, home="ap-southeast-4", previous_home=several_regions.region, reason="drill", decided_by="test")
    time.sleep(0.3)  # (past the epoch cache's period, whatever this process read before)
    assert _create(client) == 202
    assert client.get("/health").body["writes"] == "accepted"


def test_health_answers_200_when_the_epoch_item_cannot_be_read(client: Client,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Route 53's health check of the home reads /health: a DynamoDB error reading the epoch item must not turn
    it into a 500 (the failover record would move the API's domain by itself)."""
    from onward.api.routes import about

    def unreadable(deployment: object) -> None:
        raise RuntimeError("ProvisionedThroughputExceededException")

    monkeypatch.setattr(about, "refusal_now", unreadable)
    health = client.get("/health")
    assert health.status == 200 and health.body["writes"] == "unknown"
    assert "could not be read" in health.body["writes_refused_because"]

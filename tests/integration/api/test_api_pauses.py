"""Pause, resume and the drain switch over HTTP on the embedded endpoint, every answer held to the OpenAPI
document (documented_client.Client): operators pause a tenant, a type of every tenant, or one tenant's type; a
tenant its own jobs; refusals name the field; a tenant cannot touch another's pauses or the platform's; a claim
(a JobStore of the test's own, as a worker's) starts nothing paused, and explain says `paused`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.store.pauses import FLOW_CACHE_MS
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-pause-secret", "globex": "globex-pause-secret"}
OPERATOR = "operator-pause-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, tenant: str, job_type: str = "demo.echo") -> str:
    reply = client.call("POST", "/jobs", TOKENS[tenant], body={"type": job_type})
    assert reply.status == 202, reply.body
    return str(reply.body["job_id"])


def _started(worker: JobStore) -> list[tuple[str, str]]:
    started = []
    while (lease := worker.claim("w", 30)) is not None:
        started.append((lease.job.tenant_id, lease.job.type))
        worker.complete(lease)
    return started


def test_an_operator_pauses_a_tenant_explain_says_paused_and_resume_lets_it_run(client: Client, settings,
                                                                              dynamodb) -> None:
    """Catches a pause the claims do not honour, an explain that does not say `paused`, or a resume that leaves
    the tenant's jobs behind."""
    job_id = _create(client, "acme")
    _create(client, "globex")
    paused = client.call("POST", "/ops/pause", OPERATOR, body={"tenant": "acme"})
    assert paused.status == 200 and paused.body["changed"] and paused.body["in_force"]
    assert paused.body["takes_effect_within_s"] == FLOW_CACHE_MS / 1000
    assert not client.call("POST", "/ops/pause", OPERATOR, body={"tenant": "acme"}).body["changed"]
    assert client.get("/ops/pauses", OPERATOR).body == {"pauses": [{"tenant": "acme", "type": None}],
                                                        "draining": False}
    worker = JobStore(settings, client=dynamodb)  # (a process that has not read the switches yet)
    assert _started(worker) == [("globex", "demo.echo")]
    explained = client.get(f"/jobs/{job_id}/explain", TOKENS["acme"]).body
    assert explained["reason"] == "paused" and "tenant acme is paused" in explained["detail"]
    assert explained["status"] == "queued"
    assert client.call("POST", "/ops/resume", OPERATOR, body={"tenant": "acme"}).body["changed"]
    worker.flow.current()  # (the worker's cache read again: what FLOW_CACHE_MS later does)
    assert _started(worker) == [("acme", "demo.echo")]


def test_a_tenant_pauses_its_own_type_and_sees_only_what_holds_its_jobs(client: Client, settings, dynamodb) -> None:
    """Catches a tenant's pause that spills over to another tenant, or a tenant shown another tenant's pause."""
    for tenant in ("acme", "globex"):
        _create(client, tenant, "demo.sleep")
        _create(client, tenant, "demo.echo")
    assert client.call("POST", "/pause", TOKENS["acme"], body={"type": "demo.sleep"}).status == 200
    assert client.call("POST", "/ops/pause", OPERATOR, body={"type": "demo.fail"}).status == 200
    assert client.call("POST", "/ops/pause", OPERATOR, body={"tenant": "globex", "type": "demo.flaky"}).status == 200
    assert client.get("/pauses", TOKENS["acme"]).body["pauses"] == [
        {"tenant": None, "type": "demo.fail"}, {"tenant": "acme", "type": "demo.sleep"}]
    assert sorted(_started(JobStore(settings, client=dynamodb))) == [
        ("acme", "demo.echo"), ("globex", "demo.echo"), ("globex", "demo.sleep")]
    assert client.call("POST", "/resume", TOKENS["acme"], body={"type": "demo.sleep"}).body["changed"]
    assert _started(JobStore(settings, client=dynamodb)) == [("acme", "demo.sleep")]


def test_refusals_name_the_field_and_keep_tenants_to_their_own(client: Client) -> None:
    """Catches a bad body accepted, a refusal that does not name its field, a tenant reaching the operator's
    routes or the drain switch, and a bound caller pausing another tenant."""
    empty = client.call("POST", "/ops/pause", OPERATOR, body={})
    assert empty.status == 422 and empty.body["errors"][0]["loc"] == ["tenant"]
    bad_type = client.call("POST", "/pause", TOKENS["acme"], body={"type": "Not A Type"})
    assert bad_type.status == 422 and "type" in str(bad_type.body["errors"][0]["loc"])
    unknown = client.call("POST", "/pause", TOKENS["acme"], body={"tenant": "globex"})
    assert unknown.status == 422 and "tenant" in str(unknown.body["errors"][0]["loc"])
    assert client.call("POST", "/ops/pause", TOKENS["acme"], body={"tenant": "globex"}).status == 403
    assert client.call("POST", "/ops/drain", TOKENS["acme"], body={"on": True}).status == 403
    assert client.call("POST", "/pause", OPERATOR, body={}).status == 403  # bound to no tenant: /ops/pause
    not_bool = client.call("POST", "/ops/drain", OPERATOR, body={"on": "yes"})
    assert not_bool.status == 422 and "on" in str(not_bool.body["errors"][0]["loc"])
    assert client.get("/ops/pauses", OPERATOR).body["pauses"] == []  # nothing refused was written


def test_the_drain_switch_starts_nothing_and_says_so(client: Client, settings, dynamodb) -> None:
    """Catches a drain switch the claims do not see, or explain and GET /pauses not showing it."""
    job_id = _create(client, "acme")
    on = client.call("POST", "/ops/drain", OPERATOR, body={"on": True})
    assert on.status == 200 and on.body["draining"] and on.body["changed"]
    assert client.get("/pauses", TOKENS["acme"]).body["draining"]
    assert _started(JobStore(settings, client=dynamodb)) == []
    assert client.get(f"/jobs/{job_id}/explain", TOKENS["acme"]).body["reason"] == "paused"
    assert client.call("POST", "/ops/drain", OPERATOR, body={"on": False}).body["changed"]
    assert _started(JobStore(settings, client=dynamodb)) == [("acme", "demo.echo")]


def test_a_types_resume_puts_its_held_jobs_back_and_says_how_many(client: Client, settings, dynamodb) -> None:
    """Catches a resume that leaves a paused type's held jobs out of their queue (they would never run), or one
    that does not say it released them."""
    assert client.call("POST", "/ops/pause", OPERATOR, body={"type": "demo.sleep"}).status == 200
    held = [_create(client, "acme", "demo.sleep") for _ in range(3)]
    echo = _create(client, "acme")
    worker = JobStore(settings, client=dynamodb)
    assert _started(worker) == [("acme", "demo.echo")] and echo
    assert {worker.row(job_id).held_by for job_id in held} == {"paused#demo.sleep"}
    resumed = client.call("POST", "/ops/resume", OPERATOR, body={"type": "demo.sleep"})
    assert resumed.status == 200 and resumed.body["released"] == 3 and not resumed.body["more"]
    worker.flow.current()
    assert _started(worker) == [("acme", "demo.sleep")] * 3

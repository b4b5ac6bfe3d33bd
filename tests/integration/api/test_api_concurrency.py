"""Concurrency keys (issue 37, item 2) over real HTTP, every answer held to the OpenAPI document (documented_client):
POST /jobs with `concurrency` answers 202; a job a claim held on its key is explained `concurrency_limited` with
"1 of 1 running for concurrency key ..."; `cancel_newest` is a 409 `concurrency-limit-reached` while the key is at
its limit; a bad `concurrency` is a 422 naming its place, and a batch entry with an overflow strategy other than
`queue` is refused alone (422 in its result). Workers here are JobStores of the test's own. The store's side is
tests/contract/test_concurrency_keys_contract.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-conc-secret"}
OPERATOR = "operator-conc-secret"
KEYED = {"type": "demo.echo", "concurrency": {"key": "customer-42", "limit": 1}}


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, body: dict[str, Any]) -> Any:
    return client.call("POST", "/jobs", TOKENS["acme"], body=body)


def test_a_held_job_is_explained_and_cancel_newest_is_refused_while_the_key_is_full(
        client: Client, settings, dynamodb) -> None:
    """Without the route passing the key's sentence on, the held job would be explained as waiting for its
    share (with an ETA it will not meet); without the error's mapping, cancel_newest would be a 500."""
    first, second = (_create(client, KEYED) for _ in range(2))
    assert first.status == second.status == 202
    worker = JobStore(settings, client=dynamodb)
    leases = [lease for lease in (worker.claim("w", 30), worker.claim("w", 30)) if lease is not None]
    assert [lease.job.job_id for lease in leases] in ([first.body["job_id"]], [second.body["job_id"]])
    held = second.body["job_id"] if leases[0].job.job_id == first.body["job_id"] else first.body["job_id"]
    explained = client.get(f"/jobs/{held}/explain", TOKENS["acme"])
    assert explained.status == 200 and explained.body["reason"] == "concurrency_limited"
    assert "1 of 1 running for concurrency key 'customer-42'" in explained.body["detail"]
    refused = _create(client, {**KEYED, "concurrency": {**KEYED["concurrency"], "on_overflow": "cancel_newest"}})
    assert refused.status == 409 and refused.body["type"].endswith("/concurrency-limit-reached")
    worker.complete(leases[0], None)
    assert worker.claim("w", 30).job.job_id == held  # the end put it back


@pytest.mark.parametrize(("concurrency", "place"), [
    ({"key": "k", "limit": 0}, ["concurrency", "limit"]),
    ({"key": "k", "limit": 10_001}, ["concurrency", "limit"]),
    ({"key": "", "limit": 1}, ["concurrency", "key"]),
    ({"key": "k", "limit": 1, "on_overflow": "drop"}, ["concurrency", "on_overflow"]),
    ({"limit": 1}, ["concurrency", "key"]),
])
def test_a_bad_concurrency_is_a_422_naming_its_place(client: Client, concurrency: dict[str, Any],
                                                      place: list[str]) -> None:
    reply = _create(client, {"type": "demo.echo", "concurrency": concurrency})
    assert reply.status == 422 and reply.body["errors"][0]["loc"][:2] == place


def test_a_batch_entry_takes_queue_only(client: Client) -> None:
    """An overflow strategy reads the key before the create: a batch refuses it in that entry alone."""
    reply = client.call("POST", "/jobs/batch", TOKENS["acme"], body={"jobs": [
        KEYED, {**KEYED, "concurrency": {**KEYED["concurrency"], "on_overflow": "cancel_newest"}}]})
    assert reply.status == 200, reply.body
    queued, refused = reply.body["results"]
    assert (queued["status"], refused["status"]) == (202, 422)

"""Unique jobs (issue 37) over real HTTP, every answer held to the OpenAPI document (documented_client): POST /jobs
with `unique` answers 202, then 200 with `duplicate_of_unique`, 409 `unique-key-held` with `existing_job_id`, 202
with `replaced_job_id`; each entry of POST /jobs/batch as POST /jobs would; a bad `unique` is a 422 naming its
place. The store's side is tests/contract/test_unique_contract.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-unique-secret", "globex": "globex-unique-secret"}
OPERATOR = "operator-unique-secret"
HELD = {"type": "demo.echo", "delay_s": 3600, "unique": {"key": "invoice:7", "window_s": 600}}


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, body: dict[str, object], token: str = TOKENS["acme"]):
    return client.call("POST", "/jobs", token, body=body)


def test_a_held_key_is_answered_as_on_conflict_says_with_documented_answers(client: Client) -> None:
    """Without the route passing the store's answer on, a duplicate would look like a job of its own (200 with
    no `duplicate_of_unique`), and a held key under `reject` would be a 500, not the documented 409."""
    first = _create(client, HELD)
    assert first.status == 202 and "duplicate_of_unique" not in first.body
    duplicate = _create(client, {**HELD, "params": {"v": 2}})
    assert (duplicate.status, duplicate.body["job_id"], duplicate.body["duplicate_of_unique"]) == (
        200, first.body["job_id"], True)
    other_tenant = _create(client, HELD, TOKENS["globex"])
    assert other_tenant.status == 202 and other_tenant.body["job_id"] != first.body["job_id"]
    rejected = _create(client, {**HELD, "unique": {**HELD["unique"], "on_conflict": "reject"}})
    assert rejected.status == 409 and rejected.body["existing_job_id"] == first.body["job_id"]
    assert rejected.body["type"] == "https://onward.dev/problems/unique-key-held"
    replacing = _create(client, {**HELD, "unique": {**HELD["unique"], "on_conflict": "replace"}})
    assert replacing.status == 202 and replacing.body["replaced_job_id"] == first.body["job_id"]


def test_batch_entries_are_answered_as_post_jobs_would(client: Client) -> None:
    """Two entries with one key make one job; a reject entry on a held key is its own 409, refusing only itself."""
    reply = client.call("POST", "/jobs/batch", TOKENS["acme"], body={"jobs": [
        HELD, HELD, {**HELD, "unique": {**HELD["unique"], "on_conflict": "reject"}}, {"type": "demo.echo"}]})
    assert reply.status == 200, reply.body
    first, repeat, rejected, plain = reply.body["results"]
    assert (first["status"], repeat["status"], rejected["status"], plain["status"]) == (202, 200, 409, 202)
    assert repeat["job_id"] == first["job_id"] and repeat["duplicate_of_unique"] is True
    assert rejected["problem"]["existing_job_id"] == first["job_id"] and reply.body["created"] == 2


@pytest.mark.parametrize(("unique", "place"), [
    ({"key": "k", "window_s": 0}, ["unique", "window_s"]),
    ({"key": "k", "window_s": 2_592_001}, ["unique", "window_s"]),
    ({"key": "", "window_s": 60}, ["unique", "key"]),
    ({"key": "k", "on_conflict": "skip"}, ["unique", "on_conflict"]),
])
def test_a_bad_unique_is_a_422_naming_its_place(client: Client, unique: dict[str, object],
                                                place: list[str]) -> None:
    reply = _create(client, {"type": "demo.echo", "unique": unique})
    assert reply.status == 422 and [error["loc"] for error in reply.body["errors"]] == [place]

"""GET /jobs/{job_id} as a conditional read over real HTTP (local gateway -> handler -> embedded stack): an ETag
on every 200, 304 with no body while If-None-Match holds it, and a new tag (200) once the view shows anything
newer. Every answer is checked against the OpenAPI document (tests/integration/documented_client.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

TOKENS = {"acme": "acme-etag-secret", "globex": "globex-etag-secret"}
OPERATOR = "operator-etag-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _get(client: Client, job_id: str, tag: str | None = None, token: str = TOKENS["acme"]):
    return client.call("GET", f"/jobs/{job_id}", token, headers={"If-None-Match": tag} if tag else None)


def test_a_repeated_read_with_the_current_tag_is_304_until_the_view_shows_a_newer_version(client, settings,
                                                                                          dynamodb):
    """Pending, then each projected version: the tag changes exactly when the answer's status changes, and a
    poll with the current tag gets 304 with no body. Without the tag check, every poll would carry the whole
    status; with a tag of the version alone, a job the view has not shown yet would never say so."""
    store = JobStore(settings, client=dynamodb)
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    pending = _get(client, job_id)
    assert pending.status == 200 and pending.body["visible"] is False
    assert pending.headers["etag"] == 'W/"pending"' and pending.headers["cache-control"] == "no-store"
    still = _get(client, job_id, pending.headers["etag"])
    assert (still.status, still.body, still.headers["etag"]) == (304, None, 'W/"pending"')

    projector = Deployment.from_environment().status_projector
    tag, versions = pending.headers["etag"], []
    lease = store.claim("test-worker", 30)
    assert lease is not None
    store.complete(lease, {"ok": True})
    for event in store.events(job_id):
        projector.project(event)
        changed = _get(client, job_id, tag)
        assert changed.status == 200 and changed.headers["etag"] != tag  # something newer: the whole answer
        versions.append(changed.body["version"])
        tag = changed.headers["etag"]
        assert tag.startswith(f'W/"v{changed.body["version"]}-')
        unchanged = _get(client, job_id, tag)
        assert (unchanged.status, unchanged.body, unchanged.headers["etag"]) == (304, None, tag)
        assert unchanged.headers["cache-control"] == "no-store"
    assert versions == [1, 2, 3]
    # a stale tag, a list holding the current one, and `*`
    assert _get(client, job_id, 'W/"v2-0000000000000000"').status == 200
    assert _get(client, job_id, f'W/"v2-0000000000000000", {tag}').status == 304
    assert _get(client, job_id, "*").status == 304
    assert _get(client, job_id, "x" * 4000).status == 200  # a header that names no tag: no match, not a refusal


def test_another_tenants_job_is_404_whatever_the_tag(client, settings, dynamodb):
    """The tag check comes after the tenant's scope: `*` never turns another tenant's job into a 304 (which
    would tell it exists)."""
    store = JobStore(settings, client=dynamodb)
    job_id = store.create("globex", NewJob(type="demo.echo")).job.job_id
    for event in store.events(job_id):
        Deployment.from_environment().status_projector.project(event)
    assert _get(client, job_id, "*").status == 404
    assert _get(client, job_id, "*", TOKENS["globex"]).status == 304

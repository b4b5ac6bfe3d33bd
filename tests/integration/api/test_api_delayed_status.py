"""A delayed job's status over real HTTP shows its `run_at` once the view has it: GET /jobs/{id} and GET /jobs
answer from the status view alone, so `run_at` travels with the job's outbox events through the relay and the
projector to the view row (every answer held to the OpenAPI document, which must list the field).

Without `run_at` on the events (onward.domain.models.OutboxEvent.of), in the view row
(onward.domain.projection.view_fields)
or in the answer (onward.api.contract.jobs.JobStatus.of_view), the delayed job's status would say `null`, as a
job started at once does; without it in the document, the documented client would refuse the answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-delayed-status-secret"}
OPERATOR = "operator-delayed-status-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, **fields: object) -> str:
    reply = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.echo", **fields})
    assert reply.status == 202, reply.body
    return str(reply.body["job_id"])


def test_a_delayed_jobs_status_shows_its_run_at_and_a_job_started_at_once_null(client: Client, pipeline) -> None:
    delayed = _create(client, delay_s=3600)
    at_once = _create(client)
    before = client.get(f"/jobs/{delayed}", TOKENS["acme"]).body
    assert before["visible"] is False and "run_at" not in before  # not shown from another source (the job table)
    pipeline.drain()

    asked = client.get(f"/jobs/{delayed}/params", TOKENS["acme"]).body["run_at"]
    assert asked is not None
    shown = client.get(f"/jobs/{delayed}", TOKENS["acme"]).body
    assert (shown["visible"], shown["status"], shown["run_at"]) == (True, "queued", asked)
    plain = client.get(f"/jobs/{at_once}", TOKENS["acme"]).body
    assert (plain["visible"], plain["run_at"]) == (True, None)

    listed = {job["job_id"]: job["run_at"] for job in client.get("/jobs", TOKENS["acme"]).body["jobs"]}
    assert listed == {delayed: asked, at_once: None}


def test_a_cancelled_delayed_job_still_shows_when_it_was_asked_to_start(client: Client, pipeline) -> None:
    """Every event of the job carries it, not only its creation's: a mutant setting it on the first event
    alone would show null once the job moved on."""
    delayed = _create(client, delay_s=3600)
    assert client.call("POST", f"/jobs/{delayed}/cancel", TOKENS["acme"]).status == 202
    pipeline.drain()
    shown = client.get(f"/jobs/{delayed}", TOKENS["acme"]).body
    assert (shown["status"], shown["version"]) == ("cancelled", 2)
    assert shown["run_at"] == client.get(f"/jobs/{delayed}/params", TOKENS["acme"]).body["run_at"]

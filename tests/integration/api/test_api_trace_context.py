"""POST /jobs' W3C trace context over real HTTP, with OTLP off (the default): the `traceparent` a request sends
is carried by the job's events through the relay and the projector to the status view, whose `trace_id` GET
/jobs/{id} shows (every answer held to the OpenAPI document); an invalid one is ignored, never refused; and it is
not part of what an Idempotency-Key remembers.

Without `trace_parent` on the job (onward.domain.lifecycle.create), on its events (OutboxEvent.of), in the view
row (onward.domain.projection.view_fields) or in the answer (JobStatus.of_view), `trace_id` would be null."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-trace-context-secret"}
OPERATOR = "operator-trace-context-secret"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, headers: dict[str, str], key: str | None = None) -> tuple[int, str]:
    reply = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.echo"},
                        headers={**headers, **({"Idempotency-Key": key} if key else {})})
    return reply.status, str(reply.body["job_id"])


def test_the_status_shows_the_trace_id_of_the_requests_traceparent(client: Client, pipeline) -> None:
    status, traced = _create(client, {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "rojo=1"})
    assert status == 202
    _, untraced = _create(client, {})
    pipeline.drain()
    assert client.get(f"/jobs/{traced}", TOKENS["acme"]).body["trace_id"] == TRACE
    assert client.get(f"/jobs/{untraced}", TOKENS["acme"]).body["trace_id"] is None


@pytest.mark.parametrize("header", ["00-not-a-trace-01", f"00-{TRACE.upper()}-00f067aa0ba902b7-01",
                                    f"ff-{TRACE}-00f067aa0ba902b7-01", f"00-{'0' * 32}-00f067aa0ba902b7-01"])
def test_an_invalid_traceparent_is_ignored_not_refused(client: Client, pipeline, header: str) -> None:
    """The W3C recommendation: a receiver that cannot parse it goes on without it (a 400 here would make every
    caller with a broken tracer unable to submit jobs)."""
    status, job_id = _create(client, {"traceparent": header})
    assert status == 202
    pipeline.drain()
    assert client.get(f"/jobs/{job_id}", TOKENS["acme"]).body["trace_id"] is None


def test_a_retry_from_another_span_finds_the_job_its_key_created(client: Client, pipeline) -> None:
    """A client retries from a new span (a new traceparent): were the headers part of the request's digest, the
    retry would be refused 409 as a different request. The job keeps the first request's context."""
    first = _create(client, {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}, key="trace-retry")
    again = _create(client, {"traceparent": f"00-{'1' * 32}-00f067aa0ba902b8-01"}, key="trace-retry")
    assert (first[0], again) == (202, (200, first[1]))
    pipeline.drain()
    assert client.get(f"/jobs/{first[1]}", TOKENS["acme"]).body["trace_id"] == TRACE


def test_every_job_of_a_batch_continues_the_batchs_traceparent(client: Client, pipeline) -> None:
    """POST /jobs/batch's `traceparent` is carried by each job it creates (one trace for the batch); without
    the route's trace context (onward.api.routes.jobs._traced) each job's `trace_id` would be null. A refused
    entry refuses only itself, and a batch without the header creates jobs without a trace."""
    reply = client.call("POST", "/jobs/batch", TOKENS["acme"],
                        body={"jobs": [{"type": "demo.echo"}, {"type": "no.such.type"}, {"type": "demo.echo"}]},
                        headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "rojo=1"})
    assert reply.status == 200
    results = reply.body["results"]
    assert [result["status"] for result in results] == [202, 422, 202]
    plain = client.call("POST", "/jobs/batch", TOKENS["acme"], body={"jobs": [{"type": "demo.echo"}]})
    pipeline.drain()
    for result in (results[0], results[2]):
        assert client.get(f"/jobs/{result['job_id']}", TOKENS["acme"]).body["trace_id"] == TRACE
    assert client.get(f"/jobs/{plain.body['results'][0]['job_id']}", TOKENS["acme"]).body["trace_id"] is None

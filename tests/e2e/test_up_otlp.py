"""`onward up --otlp URL` as a person runs it, against a tiny OTLP/HTTP receiver (onward.testing.otlp_receiver,
decoding with opentelemetry-proto's ExportTraceServiceRequest): a job submitted with a `traceparent` shows its
trace id on its status, and one trace holds the API's create span, the worker's claim, attempt and report spans
and the handler's span from the worker's child process, each parented as documented; metrics arrive too."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.request

import pytest

from onward.testing.otlp_receiver import OtlpReceiver
from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until

pytestmark = pytest.mark.integration

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TOKEN = "otlp-test-token"


def call(url: str, body: dict | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST",
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                                              **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def wait_for_status(base: str, job_id: str, receiver: OtlpReceiver) -> dict:
    answers: list[dict] = []

    def terminal(_: OtlpReceiver) -> bool:
        answers.append(call(f"{base}/jobs/{job_id}")[1])
        return answers[-1].get("terminal") is True

    assert receiver.wait_for(terminal, 120), answers[-1]
    return answers[-1]


def test_one_trace_across_api_worker_and_handler_and_metrics_arrive():
    http_port = free_port()
    with OtlpReceiver() as receiver:
        process = subprocess.Popen(
            [*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port), "--otlp", receiver.url,
             "--token", f"acme={TOKEN}", "--workers", "1"], stdout=subprocess.PIPE, text=True)
        try:
            printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
            assert f"exported to {receiver.url}" in printed
            base = f"http://127.0.0.1:{http_port}"
            status, created = call(f"{base}/jobs", {"type": "demo.echo", "params": {"hello": "otlp"}},
                                   {"traceparent": f"00-{TRACE}-{CALLER_SPAN}-01", "tracestate": "rojo=1"})
            assert status == 202
            job_id = created["job_id"]
            shown = wait_for_status(base, job_id, receiver)
            assert shown["status"] == "succeeded" and shown["trace_id"] == TRACE

            def whole_trace(found: OtlpReceiver) -> bool:
                names = {span.name for span in found.spans() if span.trace_id == TRACE}
                return names >= {"onward.create", "onward.claim", "onward.attempt", "onward.handle", "onward.report"}

            assert receiver.wait_for(whole_trace, 30), [span.line() for span in receiver.spans()]
            spans = {span.name: span for span in receiver.spans() if span.trace_id == TRACE}
            create, attempt = spans["onward.create"], spans["onward.attempt"]
            assert create.parent_span_id == CALLER_SPAN
            assert spans["onward.claim"].parent_span_id == attempt.parent_span_id == create.span_id
            assert spans["onward.handle"].parent_span_id == spans["onward.report"].parent_span_id == attempt.span_id
            assert create.attributes["onward.job.id"] == attempt.attributes["onward.job.id"] == job_id
            assert attempt.attributes["onward.attempt.outcome"] == "succeeded"

            # an invalid traceparent is ignored, not refused: the job gets a trace of its own (the create span's)
            status, other = call(f"{base}/jobs", {"type": "demo.echo"}, {"traceparent": "00-not-a-trace-01"})
            assert status == 202
            other_trace = wait_for_status(base, other["job_id"], receiver)["trace_id"]
            assert re.fullmatch(r"[0-9a-f]{32}", other_trace) and other_trace != TRACE

            def metrics_arrived(found: OtlpReceiver) -> bool:
                names = {point.name for point in found.points()}
                return names >= {"onward.jobs.created", "onward.attempts", "onward.projection.lag"}

            assert receiver.wait_for(metrics_arrived, 30), sorted({point.name for point in receiver.points()})
            attempts = [point for point in receiver.points() if point.name == "onward.attempts"]
            assert {point.attributes["onward.attempt.outcome"] for point in attempts} == {"succeeded"}
            assert {point.attributes["onward.tenant.id"] for point in attempts} == {"acme"}
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)


BATCH_TRACE = "5a0e1c7d2b3f4a5968778899aabbccdd"


def test_the_queue_gauges_by_tenant_and_type_and_a_batchs_trace_are_exported():
    """`onward up --otlp`: the reaper's loop records the queue gauges by tenant and type (without
    onward.maintenance.queue_gauges only the Lambda handler did: no `onward.queue.depth` point would arrive), and
    a batch sent with a `traceparent` is one trace: `onward.create_batch` under the caller's span, each job's
    attempt under it (without the batch's trace context each job would start a trace of its own)."""
    http_port = free_port()
    with OtlpReceiver() as receiver:
        process = subprocess.Popen(
            [*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port), "--otlp", receiver.url,
             "--token", f"acme={TOKEN}", "--workers", "1"], stdout=subprocess.PIPE, text=True)
        try:
            read_until(process, "Serving; Ctrl-C stops everything.", 180)
            base = f"http://127.0.0.1:{http_port}"
            # the one worker busy, so that the batch waits in the queue
            _, blocker = call(f"{base}/jobs", {"type": "demo.sleep", "params": {"seconds": 120}})

            def blocker_running(_: OtlpReceiver) -> bool:
                return call(f"{base}/jobs/{blocker['job_id']}")[1].get("status") == "running"  # (404 until projected)

            assert receiver.wait_for(blocker_running, 60)
            status, batch = call(f"{base}/jobs/batch",
                                 {"jobs": [{"type": "demo.echo"}, {"type": "demo.echo"}, {"type": "demo.flaky",
                                                                                          "params": {"failures": 0}}]},
                                 {"traceparent": f"00-{BATCH_TRACE}-{CALLER_SPAN}-01"})
            assert status == 200 and [r["status"] for r in batch["results"]] == [202, 202, 202]

            def depth_by_type(found: OtlpReceiver) -> bool:
                latest = {(p.attributes.get("onward.tenant.id"), p.attributes.get("onward.job.type")): p.value
                          for p in found.points() if p.name == "onward.queue.depth"}
                return latest.get(("acme", "demo.echo")) == 2 and latest.get(("acme", "demo.flaky")) == 1

            assert receiver.wait_for(depth_by_type, 60), [
                (p.attributes, p.value) for p in receiver.points() if p.name.startswith("onward.queue")]
            ages = [p for p in receiver.points() if p.name == "onward.queue.age"
                    and p.attributes.get("onward.job.type") == "demo.echo"]
            assert ages and ages[-1].value >= 0
            call(f"{base}/jobs/{blocker['job_id']}/cancel", {})
            for result in batch["results"]:
                assert wait_for_status(base, result["job_id"], receiver)["trace_id"] == BATCH_TRACE

            def batch_trace(found: OtlpReceiver) -> bool:
                spans = [span for span in found.spans() if span.trace_id == BATCH_TRACE]
                return sum(span.name == "onward.attempt" for span in spans) == 3

            assert receiver.wait_for(batch_trace, 30), [span.line() for span in receiver.spans()]
            spans = [span for span in receiver.spans() if span.trace_id == BATCH_TRACE]
            (created,) = [span for span in spans if span.name == "onward.create_batch"]
            assert created.parent_span_id == CALLER_SPAN
            attempts = [span for span in spans if span.name == "onward.attempt"]
            assert {span.parent_span_id for span in attempts} == {created.span_id}
            assert {span.attributes["onward.job.id"] for span in attempts} == {
                result["job_id"] for result in batch["results"]}
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)

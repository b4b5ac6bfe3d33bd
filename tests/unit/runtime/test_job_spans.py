"""A worker's spans and attempts metric (onward.runtime.job_spans) on a real Worker and store (onward.testing's
harness: the handler runs in the test's thread, through the same run_handler as in a worker's child process),
recorded with the SDK's InMemorySpanExporter and InMemoryMetricReader."""

from __future__ import annotations

import os

from onward.domain.models import NewJob
from onward.observability.tracing import ATTEMPT, JOB_ID, OUTCOME, TENANT_ID
from onward.runtime.execution import AttemptRequest, JobContext
from onward.testing import JobHarness
from tests.unit.observability.conftest import hex_parent, hex_span, hex_trace, recorded  # noqa: F401

REQUEST = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _harness() -> JobHarness:
    harness = JobHarness()
    harness.register("demo.echo")(lambda context: context.params)

    @harness.register("demo.flaky")
    def flaky(context):
        if context.attempt == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    return harness


def _submit(harness: JobHarness, job_type: str, trace_parent: str | None) -> str:
    request = NewJob(type=job_type).model_copy(update={"trace_parent": trace_parent})
    return harness.store.create(harness.tenant_id, request).job.job_id


def test_claim_attempt_handler_and_report_spans_continue_the_requests_trace(recorded):  # noqa: F811
    """Without the job's trace context the worker's spans would each start a trace of their own; without the
    context handed to the handler, its span would not be the attempt's child."""
    harness = _harness()
    job_id = _submit(harness, "demo.echo", REQUEST)
    harness.run_until_settled()
    harness.record(job_id).assert_succeeded()
    claim, attempt = recorded.one("onward.claim"), recorded.one("onward.attempt")
    handle, report = recorded.one("onward.handle"), recorded.one("onward.report")
    assert {hex_trace(span) for span in (claim, attempt, handle, report)} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    assert hex_parent(claim) == hex_parent(attempt) == "00f067aa0ba902b7"  # the request's span
    assert hex_parent(handle) == hex_parent(report) == hex_span(attempt)
    assert attempt.attributes[JOB_ID] == job_id and attempt.attributes[ATTEMPT] == 1
    assert attempt.attributes[TENANT_ID] == harness.tenant_id and attempt.attributes[OUTCOME] == "succeeded"
    assert claim.start_time <= attempt.start_time <= handle.start_time <= handle.end_time <= report.start_time


def test_each_attempt_is_its_own_span_and_counted_by_outcome(recorded):  # noqa: F811
    """Two attempts of one job: two attempt spans in the job's one trace, and onward.attempts counts one
    failed and one succeeded (without the outcome attribute the breakdown would be lost)."""
    harness = _harness()
    _submit(harness, "demo.flaky", REQUEST)
    harness.run_until_settled()
    attempts = recorded.named("onward.attempt")
    assert [span.attributes[ATTEMPT] for span in attempts] == [1, 2]
    assert [span.attributes[OUTCOME] for span in attempts] == ["failed", "succeeded"]
    assert {hex_trace(span) for span in attempts} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    counted = {point[0][OUTCOME]: point[1] for point in recorded.points("onward.attempts")}
    assert counted == {"failed": 1, "succeeded": 1}


def test_a_job_without_trace_context_gets_one_trace_per_attempt(recorded):  # noqa: F811
    """No traceparent: each attempt is a root span, and its handler's span is still its child."""
    harness = _harness()
    _submit(harness, "demo.echo", None)
    harness.run_until_settled()
    attempt, handle = recorded.one("onward.attempt"), recorded.one("onward.handle")
    assert attempt.parent is None and hex_parent(handle) == hex_span(attempt)


def test_the_attempts_trace_context_crosses_to_the_handlers_process():
    """The worker sends the attempt to its child as an AttemptRequest: without trace_parent on it, the
    handler's span in the child would start a new trace."""
    job_id = os.urandom(16).hex()
    context = JobContext(job_id, "acme", "demo.echo", {}, 1, f"{job_id}:1", trace_parent=REQUEST)
    assert AttemptRequest.of(context, frozenset()).context().trace_parent == REQUEST

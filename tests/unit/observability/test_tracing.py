"""The create span and the trace context a job carries (onward.observability.tracing), recorded with the SDK's
InMemorySpanExporter; and that with OTLP off nothing of OpenTelemetry is imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from onward.domain.models import NewJob
from onward.domain.projection import trace_id
from onward.observability.trace_context import parse_traceparent
from onward.observability.tracing import CREATED, TENANT_ID, creation_span
from onward.store.service import JobStore
from tests.unit.observability.conftest import hex_parent, hex_span, hex_trace

REQUEST = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _create(traceparent: str | None, tracestate: str | None = None):
    store = JobStore.in_memory()
    with creation_span("acme", "demo.echo", traceparent, tracestate) as trace:
        request = NewJob(type="demo.echo").model_copy(
            update={"trace_parent": trace.trace_parent, "trace_state": trace.trace_state})
        created = store.create("acme", request)
        trace.created(created.job, created.created)
    return created.job


def test_the_create_span_is_a_child_of_the_requests_and_the_job_carries_the_create_span(recorded):
    """Without the parent taken from the header, the create span would start a trace of its own and the
    caller's trace would stop at its request."""
    job = _create(REQUEST, "rojo=00f067aa0ba902b7")
    create = recorded.one("onward.create")
    assert hex_trace(create) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert hex_parent(create) == "00f067aa0ba902b7"
    assert create.parent is not None and create.parent.is_remote
    assert create.attributes[TENANT_ID] == "acme" and create.attributes[CREATED] is True
    stored = parse_traceparent(job.trace_parent)
    assert stored is not None and stored.parent_id == hex_span(create)  # its attempts are the create's children
    assert job.trace_state == "rojo=00f067aa0ba902b7"
    assert str(create.context.trace_state.to_header()) == "rojo=00f067aa0ba902b7"


def test_an_invalid_traceparent_is_ignored_and_the_job_gets_a_trace_of_its_own(recorded):
    """An invalid header must not fail the create nor leak into the job: the create span is a root."""
    job = _create("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "rojo=1")
    create = recorded.one("onward.create")
    assert create.parent is None
    assert trace_id(job.trace_parent) == hex_trace(create) != "4bf92f3577b34da6a3ce929d0e0e4736"
    assert job.trace_state is None  # a tracestate goes only with a valid traceparent


def test_with_otlp_off_the_job_keeps_the_requests_traceparent_and_no_span_is_made():
    """Off (no providers), the job still carries the caller's context, so the status shows its trace id and a
    worker exporting spans continues it."""
    job = _create(REQUEST)
    assert job.trace_parent == REQUEST
    assert _create(None).trace_parent is None


def test_with_otlp_off_the_entry_points_import_nothing_of_opentelemetry():
    """The cost when off: a Lambda function without OTLP configured loads no OpenTelemetry module, even while it
    creates a job with a traceparent and runs an attempt (an eager import would cost every cold start)."""
    script = textwrap.dedent(f"""
        import os, sys
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                     "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
            os.environ.pop(name, None)
        import onward.api.app, onward.entrypoints.worker, onward.entrypoints.projector, onward.entrypoints.reaper
        from onward.observability.tracing import creation_span
        from onward.testing import JobHarness
        with creation_span("acme", "demo.echo", {REQUEST!r}, None) as trace:
            assert trace.trace_parent == {REQUEST!r}
        harness = JobHarness()
        harness.register("demo.echo")(lambda context: context.params)
        harness.run("demo.echo", {{}}).assert_succeeded()
        loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)

"""POST /jobs/batch's trace context (onward.observability.tracing.batch_creation_span): one `onward.create_batch`
span, a child of the request's, whose context every job of the batch carries."""

from __future__ import annotations

import pytest

from onward.observability.tracing import BATCH_CREATED, BATCH_SIZE, TENANT_ID, batch_creation_span
from tests.unit.observability.conftest import hex_parent, hex_span, hex_trace

pytestmark = pytest.mark.fast

REQUEST = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_batch_span_is_a_child_of_the_requests_and_its_context_is_the_jobs(recorded):
    """Without the header's parent the batch would start a trace of its own; without the span's context on the
    jobs their attempts would hang under the caller's span, not the batch's."""
    with batch_creation_span("acme", 3, REQUEST, "rojo=1") as trace:
        trace.created(2)
    span = recorded.one("onward.create_batch")
    assert hex_trace(span) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert hex_parent(span) == "00f067aa0ba902b7"
    assert span.attributes[TENANT_ID] == "acme"
    assert (span.attributes[BATCH_SIZE], span.attributes[BATCH_CREATED]) == (3, 2)
    assert trace.trace_parent == f"00-4bf92f3577b34da6a3ce929d0e0e4736-{hex_span(span)}-01"
    assert trace.trace_state == "rojo=1"


def test_an_invalid_traceparent_starts_a_trace_of_the_batchs_own(recorded):
    """An invalid header is ignored, never refused (as on POST /jobs): the batch span is a root."""
    with batch_creation_span("acme", 1, "00-nope-01", "rojo=1") as trace:
        pass
    span = recorded.one("onward.create_batch")
    assert span.parent is None and trace.trace_state is None
    assert trace.trace_parent is not None and hex_trace(span) in trace.trace_parent


def test_with_otlp_off_each_job_carries_the_requests_own_traceparent():
    """Off (no providers), the jobs still carry the caller's context, and nothing without a header."""
    with batch_creation_span("acme", 2, REQUEST, None) as trace:
        assert (trace.trace_parent, trace.trace_state) == (REQUEST, None)
    with batch_creation_span("acme", 2, None, "rojo=1") as trace:
        assert (trace.trace_parent, trace.trace_state) == (None, None)

"""W3C Trace Context parsing (onward.observability.trace_context): what POST /jobs keeps of its `traceparent` and
`tracestate` headers, and that it agrees with OpenTelemetry's own propagator on every header."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from onward.domain.projection import trace_id
from onward.observability.trace_context import parse_traceparent, parse_tracestate

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_gives_its_trace_parent_and_flags():
    parsed = parse_traceparent(VALID)
    assert parsed is not None
    assert (parsed.trace_id, parsed.parent_id, parsed.sampled) == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True)
    assert parsed.header() == VALID
    assert trace_id(parsed.header()) == "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize("header", [
    "", "garbage", VALID.upper(),  # hex digits are lowercase only
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent id
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
    VALID + "-extra",  # version 00 has exactly four fields
    VALID[:-1],  # a field too short
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
])
def test_an_invalid_traceparent_is_ignored(header):
    """Without the checks, a malformed header would be stored and its attempts' spans parented on nothing
    valid (or the request refused, which the recommendation forbids)."""
    assert parse_traceparent(header) is None


def test_a_later_version_is_read_as_version_00_reads_it():
    """Section 4.3: a parser of version 00 reads a later version's first four fields and goes on."""
    parsed = parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-whatever-comes")
    assert parsed is not None and parsed.header() == VALID
    assert parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01what") is None


def test_tracestate_is_kept_when_valid_and_dropped_when_not():
    assert parse_tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE,,") == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert parse_tracestate("tenant@vendor=value") == "tenant@vendor=value"
    assert parse_tracestate("Upper=1") is None  # keys are lowercase
    assert parse_tracestate("a=1,a=2") is None  # a key twice
    assert parse_tracestate("a=x=y ") is None  # "=" is no value character
    assert parse_tracestate(",".join(f"k{i}=v" for i in range(33))) is None  # more than 32 members
    assert parse_tracestate(" , ") is None


def _otel_reads(header: str) -> str | None:
    context = TraceContextTextMapPropagator().extract({"traceparent": header})
    span_context = trace.get_current_span(context).get_span_context()
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


HEX = "0123456789abcdef"
headers = st.one_of(
    st.builds(lambda v, t, p, f, rest: f"{v}-{t}-{p}-{f}{rest}",
              st.sampled_from(["00", "01", "cc", "ff", "0g", "0"]),
              st.one_of(st.text(HEX, min_size=32, max_size=32), st.just("0" * 32), st.text(HEX + "G", max_size=33)),
              st.one_of(st.text(HEX, min_size=16, max_size=16), st.just("0" * 16)),
              st.one_of(st.text(HEX, min_size=2, max_size=2), st.just("0")),
              st.sampled_from(["", "-", "-x", "x", " "])),
    st.text(max_size=60))


@given(headers)
def test_it_agrees_with_opentelemetrys_propagator(header):
    """Our parser has no dependency (the API Lambda has no OpenTelemetry package); OpenTelemetry's
    TraceContextTextMapPropagator is the reference: any header one keeps, the other keeps identically."""
    assert (None if (parsed := parse_traceparent(header)) is None else parsed.header()) == _otel_reads(header)

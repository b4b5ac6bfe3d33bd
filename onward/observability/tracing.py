"""The platform's OpenTelemetry spans, one trace per job: `onward.create` (the API, a child of the request's
`traceparent` when it sent a valid one), then for each attempt `onward.claim`, `onward.attempt` (the handler
runs inside it, in its child process: `onward.handle`, whose children are the handler's own spans) and
`onward.report`, all children of the trace context the job carries (Job.trace_parent). Every helper is a
no-op when OTLP is off (onward.observability.otlp): nothing of OpenTelemetry is imported then.

Attributes (names used by docs/observability.md): onward.job.id, onward.job.type, onward.tenant.id,
onward.job.attempt, onward.worker.id, onward.job.created (create: False for an Idempotency-Key repeat),
onward.attempt.outcome (attempt and report: succeeded, failed, released, cancelled, fenced...)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from onward.domain.models import Job, Lease
from onward.observability.otlp import Providers, exit_flush_s, flush_within, providers
from onward.observability.trace_context import TraceParent, parse_traceparent, parse_tracestate

JOB_ID = "onward.job.id"
JOB_TYPE = "onward.job.type"
TENANT_ID = "onward.tenant.id"
ATTEMPT = "onward.job.attempt"
WORKER_ID = "onward.worker.id"
CREATED = "onward.job.created"
OUTCOME = "onward.attempt.outcome"


def _context_of(trace_parent: str | None, trace_state: str | None = None) -> Any:
    """An OpenTelemetry context whose current span is the remote parent `trace_parent` (None: a new trace)."""
    if trace_parent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": trace_parent, **({"tracestate": trace_state} if trace_state else {})}
    return TraceContextTextMapPropagator().extract(carrier)


def _header_of(span: Any) -> str | None:
    """The `traceparent` naming `span` as the parent (its children's, in this process or another)."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _job_attributes(job: Job) -> dict[str, Any]:
    return {JOB_ID: job.job_id, JOB_TYPE: job.type, TENANT_ID: job.tenant_id}


@dataclass
class CreationTrace:
    """What a create stores on the job: the trace context its attempts continue (the create span's when
    spans are exported, else the request's own), and the request's tracestate."""

    trace_parent: str | None
    trace_state: str | None
    span: Any = field(default=None, repr=False)

    def created(self, job: Job, created: bool) -> None:
        if self.span is not None:
            self.span.set_attributes({**_job_attributes(job), CREATED: created})


@contextlib.contextmanager
def creation_span(tenant_id: str, job_type: str, traceparent: str | None,
                  tracestate: str | None) -> Iterator[CreationTrace]:
    """Around one POST /jobs: the request's `traceparent` and `tracestate` headers (an invalid one ignored),
    and what to store on the job."""
    with _request_span("onward.create", {TENANT_ID: tenant_id, JOB_TYPE: job_type}, traceparent,
                       tracestate) as (header, state, span):
        yield CreationTrace(header, state, span)


@contextlib.contextmanager
def _request_span(name: str, attributes: dict[str, Any], traceparent: str | None, tracestate: str | None
                  ) -> Iterator[tuple[str | None, str | None, Any]]:
    """A SERVER span `name`, a child of the request's `traceparent` (an invalid one ignored): the trace context
    a create stores (the span's when spans are exported, else the request's own), the request's tracestate,
    and the span (None when not exported)."""
    incoming: TraceParent | None = parse_traceparent(traceparent)
    state = parse_tracestate(tracestate) if incoming is not None else None
    recorder = providers()
    if recorder is None:
        yield (None if incoming is None else incoming.header()), state, None
        return
    parent = _context_of(None if incoming is None else incoming.header(), state)
    from opentelemetry.trace import SpanKind

    with recorder.tracer.start_as_current_span(name, context=parent, kind=SpanKind.SERVER,
                                               attributes=attributes) as span:
        yield _header_of(span), state, span


BATCH_SIZE = "onward.batch.size"
BATCH_CREATED = "onward.batch.created"


@dataclass
class BatchCreationTrace:
    """What a batch's create stores on each of its jobs: one trace context for all (the batch span's when spans
    are exported, else the request's own), so every job of the batch is a child of the request's span."""

    trace_parent: str | None
    trace_state: str | None
    span: Any = field(default=None, repr=False)

    def created(self, created: int) -> None:
        if self.span is not None:
            self.span.set_attribute(BATCH_CREATED, created)


@contextlib.contextmanager
def batch_creation_span(tenant_id: str, size: int, traceparent: str | None,
                        tracestate: str | None) -> Iterator[BatchCreationTrace]:
    """Around one POST /jobs/batch: `onward.create_batch` (SERVER), a child of the request's `traceparent` (an
    invalid one ignored, as POST /jobs ignores it); its context is what each job of the batch stores."""
    with _request_span("onward.create_batch", {TENANT_ID: tenant_id, BATCH_SIZE: size}, traceparent,
                       tracestate) as (header, state, span):
        yield BatchCreationTrace(header, state, span)


def claim_started() -> int:
    """When a claim starts (its span is recorded once the claim returned a job: an empty poll records none)."""
    return time.time_ns()


def record_claim(lease: Lease, started_ns: int) -> None:
    """The `onward.claim` span of a claim that returned `lease`, from `started_ns` to now, in the job's trace."""
    recorder = providers()
    if recorder is None:
        return
    span = recorder.tracer.start_span("onward.claim", context=_context_of(lease.job.trace_parent,
                                                                          lease.job.trace_state),
                                      start_time=started_ns, attributes=_lease_attributes(lease))
    span.end()


def _lease_attributes(lease: Lease) -> dict[str, Any]:
    return {**_job_attributes(lease.job), ATTEMPT: lease.attempt, WORKER_ID: lease.worker_id}


@dataclass
class AttemptTrace:
    """One attempt's span: `trace_parent` is what its handler's process continues."""

    trace_parent: str | None
    span: Any = field(default=None, repr=False)

    def ended(self, outcome: str) -> None:
        if self.span is not None:
            self.span.set_attribute(OUTCOME, outcome)


@contextlib.contextmanager
def attempt_span(lease: Lease) -> Iterator[AttemptTrace]:
    """Around one attempt (the handler's run and its report), a child of the job's trace context."""
    recorder = providers()
    if recorder is None:
        yield AttemptTrace(None)
        return
    with _span(recorder, "onward.attempt", lease.job.trace_parent, lease.job.trace_state,
               _lease_attributes(lease)) as span:
        yield AttemptTrace(_header_of(span), span)


@contextlib.contextmanager
def report_span(lease: Lease) -> Iterator[None]:
    """Around the report of an attempt's outcome to the store (inside its attempt span)."""
    recorder = providers()
    if recorder is None:
        yield
        return
    with recorder.tracer.start_as_current_span("onward.report", attributes=_lease_attributes(lease)):
        yield


@contextlib.contextmanager
def handler_span(trace_parent: str | None, job_id: str, job_type: str, attempt: int) -> Iterator[None]:
    """Around a handler's call, in its process: `onward.handle`, a child of the attempt's span
    (`trace_parent`), current while the handler runs so that its own spans are its children; exported when
    it ends."""
    recorder = providers()
    if recorder is None or trace_parent is None:
        yield
        return
    try:
        with _span(recorder, "onward.handle", trace_parent, None,
                   {JOB_ID: job_id, JOB_TYPE: job_type, ATTEMPT: attempt}):
            yield
    finally:
        # a handler's process ends with os._exit, which would lose what is buffered; a collector that is down
        # holds the attempt's end at most exit_flush_s()
        flush_within(exit_flush_s())


@contextlib.contextmanager
def _span(recorder: Providers, name: str, trace_parent: str | None, trace_state: str | None,
          attributes: dict[str, Any]) -> Iterator[Any]:
    """A span current while the block runs, a child of the remote `trace_parent` (a root without one); an
    exception from the block is recorded on it and raised on (BaseException too: a simulated crash)."""
    with recorder.tracer.start_as_current_span(name, context=_context_of(trace_parent, trace_state),
                                               attributes=attributes) as span:
        yield span

"""A worker's OpenTelemetry spans and its attempts metric, around what onward.runtime.worker does: the claim that
returned a job (`onward.claim`), each attempt (`onward.attempt`, whose trace context the handler's process
continues: JobContext.trace_parent) and its report (`onward.report`), in the job's trace
(onward.observability.tracing); `onward.attempts` counted by outcome. No-ops when OTLP is off."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

from onward.domain.models import Lease
from onward.observability import tracing
from onward.observability.metrics import record_attempt
from onward.runtime.execution import JobContext
from onward.store.answers import Report, ReportStatus

Outcome = TypeVar("Outcome")

claim_started = tracing.claim_started


def claimed(lease: Lease, started_ns: int) -> None:
    """The claim that returned `lease`, started at `started_ns` (claim_started())."""
    tracing.record_claim(lease, started_ns)


def outcome_of(report: Report) -> str:
    """How the attempt ended, as its run record says (`fenced`: its report came after it lost the job)."""
    if report.status is ReportStatus.FENCED or report.job.last_outcome is None:
        return "fenced"
    return report.job.last_outcome.value


class AttemptSpan:
    """One attempt in progress: its report is made through `reported`."""

    def __init__(self, trace: tracing.AttemptTrace, lease: Lease) -> None:
        self._trace = trace
        self._lease = lease

    def reported(self, report: Callable[[Lease, JobContext, Outcome], Report], lease: Lease, context: JobContext,
                 outcome: Outcome) -> Report:
        """`report(lease, context, outcome)` inside the report's span; the outcome is recorded on the attempt."""
        with tracing.report_span(lease):
            answer = report(lease, context, outcome)
        ended = outcome_of(answer)
        self._trace.ended(ended)
        record_attempt(lease.job.tenant_id, lease.job.type, ended)
        return answer


@contextlib.contextmanager
def attempt(lease: Lease, context: JobContext) -> Iterator[AttemptSpan]:
    """Around one attempt: its handler's process continues the attempt's trace context (context.trace_parent)."""
    with tracing.attempt_span(lease) as trace:
        context.trace_parent = trace.trace_parent
        yield AttemptSpan(trace, lease)

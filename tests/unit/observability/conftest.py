"""An OpenTelemetry SDK recording in memory (InMemorySpanExporter, InMemoryMetricReader), installed as the
platform's providers for one test (onward.observability.otlp.install), forgotten after it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from onward.observability import otlp


@dataclass
class Recorded:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name}: {[s.name for s in self.spans.get_finished_spans()]}"
        return found[0]

    def points(self, metric: str) -> list[tuple[dict[str, Any], float]]:
        data = self.metrics.get_metrics_data()
        return [(dict(point.attributes), point.value)
                for resource in (data.resource_metrics if data else [])
                for scope in resource.scope_metrics for found in scope.metrics if found.name == metric
                for point in found.data.data_points]


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    otlp.install(tracer_provider, MeterProvider(metric_readers=[reader]))
    yield Recorded(spans, reader)
    otlp.reset()


def hex_trace(span: ReadableSpan) -> str:
    return f"{span.context.trace_id:032x}"


def hex_span(span: ReadableSpan) -> str:
    return f"{span.context.span_id:016x}"


def hex_parent(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"

"""A process about to end (a handler's child) waits for its spans' export at most ONWARD_OTLP_EXIT_FLUSH_S."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from onward.observability import otlp
from onward.observability.tracing import handler_span
from onward.settings import InvalidSetting

pytestmark = pytest.mark.fast


class HangingExporter(SpanExporter):
    """A collector that never answers: export blocks until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exporting = threading.Event()
        self.exported: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exporting.set()
        self.release.wait(60)
        self.exported.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS


@pytest.fixture
def hanging() -> Iterator[HangingExporter]:
    exporter = HangingExporter()
    tracer_provider = TracerProvider()
    # a long schedule delay: only the flush exports
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))
    otlp.install(tracer_provider, MeterProvider())
    yield exporter
    exporter.release.set()
    otlp.reset()


def test_a_handlers_span_flush_gives_up_while_the_collector_hangs(hanging: HangingExporter,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches the child's flush in the caller's thread (the SDK's force_flush ignores its timeout): with the
    collector down, every attempt's end waited out the exporter's timeout and retries. Here the handler's span
    returns while the export is still blocked (a flush without the bound would not return before the release)."""
    monkeypatch.setenv(otlp.EXIT_FLUSH_VARIABLE, "0.2")
    with handler_span("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "job-1", "demo.echo", 1):
        pass
    assert hanging.exporting.wait(10), "the flush never started the export"
    assert hanging.exported == [], "the span returned only after the export ended"
    hanging.release.set()


def test_a_flush_that_ends_in_time_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches flush_within answering False (or waiting the whole bound) when the export is quick."""
    exporter = HangingExporter()
    exporter.release.set()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))
    recorder = otlp.install(tracer_provider, MeterProvider())
    try:
        recorder.tracer.start_span("onward.handle").end()
        assert otlp.flush_within(30)
        assert exporter.exported == ["onward.handle"]
    finally:
        otlp.reset()


def test_the_bound_is_a_setting_validated_with_its_name() -> None:
    """Catches a bad ONWARD_OTLP_EXIT_FLUSH_S taken silently (a negative wait, or text)."""
    assert otlp.exit_flush_s({}) == otlp.DEFAULT_EXIT_FLUSH_S
    assert otlp.exit_flush_s({otlp.EXIT_FLUSH_VARIABLE: "2.5"}) == 2.5
    for bad in ("-1", "soon"):
        with pytest.raises(InvalidSetting, match=otlp.EXIT_FLUSH_VARIABLE):
            otlp.exit_flush_s({otlp.EXIT_FLUSH_VARIABLE: bad})

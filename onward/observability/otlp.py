"""The OpenTelemetry SDK, set up only when an OTLP endpoint is configured, with the standard variables
(https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/ and
https://opentelemetry.io/docs/specs/otel/protocol/exporter/): OTEL_EXPORTER_OTLP_ENDPOINT (or the
_TRACES_/_METRICS_ one) non-empty, and OTEL_SDK_DISABLED not `true`. Exported as OTLP over HTTP/protobuf
(opentelemetry-exporter-otlp-proto-http reads the endpoint, headers, timeout and compression variables itself).

When none is configured nothing here imports OpenTelemetry: `providers()` answers None and every span and
metric helper is a no-op, so a Lambda function without OTLP pays no import. The SDK and the exporter are the
`otlp` extra (`pip install 'onward[otlp]'`); configured without them, a warning is logged once and the
process runs without export.

The BatchSpanProcessor re-creates its export thread in a forked child (the SDK registers at-fork hooks), but a
handler's child process ends with os._exit: its spans are exported after each attempt (`flush_within()`, at most
ONWARD_OTLP_EXIT_FLUSH_S seconds, default 1: the SDK's force_flush exports in the caller's thread and ignores
its timeout, and the exporter retries an unreachable collector for up to its own 10 s)."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "onward"  # OTEL_SERVICE_NAME, the standard variable, names another
INSTRUMENTATION_SCOPE = "onward"
FLUSH_TIMEOUT_MS = 5_000
EXIT_FLUSH_VARIABLE = "ONWARD_OTLP_EXIT_FLUSH_S"
DEFAULT_EXIT_FLUSH_S = 1.0

Arguments = ParamSpec("Arguments")
Result = TypeVar("Result")


def otlp_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for OTLP export."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    endpoints = (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"), environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                 environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
    return any(endpoint and endpoint.strip() for endpoint in endpoints)


@dataclass(frozen=True)
class Providers:
    """The tracer and meter this process records with (the SDK's, or a test's)."""

    tracer: Any  # opentelemetry.trace.Tracer
    meter: Any  # opentelemetry.metrics.Meter
    flush: Callable[[], object]


_lock = threading.RLock()  # install() is called under it, from providers()
_providers: Providers | None = None
_decided = False


def providers() -> Providers | None:
    """The providers, set up from the environment on first use; None when OTLP is off."""
    global _providers, _decided
    if _decided:
        return _providers
    with _lock:
        if not _decided:
            if otlp_configured():
                exit_flush_s()  # validated at start: InvalidSetting names the variable
                _providers = _from_environment()
            else:
                _providers = None
            _decided = True
    return _providers


def install(tracer_provider: Any, meter_provider: Any) -> Providers:
    """Record with these SDK providers from now on (tests: an InMemorySpanExporter, an InMemoryMetricReader)."""
    global _providers, _decided

    def flush() -> None:
        tracer_provider.force_flush(FLUSH_TIMEOUT_MS)
        meter_provider.force_flush(FLUSH_TIMEOUT_MS)

    with _lock:
        _providers = Providers(tracer_provider.get_tracer(INSTRUMENTATION_SCOPE),
                               meter_provider.get_meter(INSTRUMENTATION_SCOPE), flush)
        _decided = True
    return _providers


def reset() -> None:
    """Forget the providers: the next use decides again from the environment (tests)."""
    global _providers, _decided
    with _lock:
        _providers, _decided = None, False


def _from_environment() -> Providers | None:
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        logger.warning("an OTLP endpoint is configured but the OpenTelemetry SDK is not installed (pip install "
                       "'onward[otlp]'): nothing is exported (%s)", error)
        return None
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
    resource = Resource.create(attributes)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(
        _exporting_from(os.getpid(), OTLPMetricExporter()))])
    # the globals too: a handler's own spans (opentelemetry.trace.get_tracer) are exported with the platform's
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return install(tracer_provider, meter_provider)


def _exporting_from(pid: int, exporter: Any) -> Any:
    """`exporter`, exporting only from process `pid`. A handler's child process, forked from the worker, holds a
    copy of the worker's metrics and a metric reader the SDK restarts after the fork: its exports would repeat
    the worker's series under the same identity. The worker's own figures are the worker's to export."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class ThisProcessOnly(MetricExporter):
        def __init__(self) -> None:
            super().__init__(preferred_temporality=exporter._preferred_temporality,
                             preferred_aggregation=exporter._preferred_aggregation)

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            if os.getpid() != pid:
                return MetricExportResult.SUCCESS
            return exporter.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return bool(exporter.force_flush(timeout_millis))

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            exporter.shutdown(timeout_millis=timeout_millis, **kwargs)

    return ThisProcessOnly()


def flush() -> None:
    """Export what is buffered now (the end of a Lambda invocation: the environment may be frozen after it)."""
    current = _providers
    if current is not None:
        try:
            current.flush()
        except Exception:
            logger.warning("flushing OpenTelemetry failed", exc_info=True)


def exit_flush_s(environ: Mapping[str, str] = os.environ) -> float:
    """How long a process about to end waits for its export (ONWARD_OTLP_EXIT_FLUSH_S, default 1 s; 0: not at
    all). InvalidSetting names the variable for a value that is not a number >= 0."""
    from onward.settings import number_setting

    return number_setting(environ, "ONWARD_OTLP_EXIT_FLUSH_S", DEFAULT_EXIT_FLUSH_S)  # EXIT_FLUSH_VARIABLE


def flush_within(seconds: float) -> bool:
    """flush(), waited for at most `seconds`; True when it ended in time. For a process that ends right after
    (a handler's child, by os._exit): the export runs on a daemon thread, which the exit ends if the collector
    is slow or down, so an attempt ends at most `seconds` late instead of the exporter's timeout and retries
    (opentelemetry-sdk's BatchSpanProcessor.force_flush exports in the calling thread, whatever timeout it is
    given)."""
    if _providers is None:
        return True
    done = threading.Event()

    def export() -> None:
        try:
            flush()
        finally:
            done.set()

    threading.Thread(target=export, name="onward-otlp-exit-flush", daemon=True).start()
    return done.wait(seconds)


def exports_after_invocation(handler: Callable[Arguments, Result]) -> Callable[Arguments, Result]:
    """Decorate a Lambda handler: on Lambda (AWS_LAMBDA_FUNCTION_NAME set), what an invocation recorded is
    exported before it returns, as the environment may be frozen after it. Elsewhere (`onward up`'s pollers
    call the handlers many times a second in one long-lived process) the SDK's own export thread sends it: a
    flush per call would hold every poll for up to FLUSH_TIMEOUT_MS per signal while the collector is down."""

    @functools.wraps(handler)
    def invoke(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Result:
        try:
            return handler(*args, **kwargs)
        finally:
            if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
                flush()

    return invoke

"""Traces and metrics in the open standard (W3C trace context, OpenTelemetry): trace_context.py parses and formats
the headers (pure, no dependency), otlp.py sets up the OpenTelemetry SDK only when an OTLP endpoint is configured,
tracing.py and metrics.py are what the API, the workers and the pipeline call (no-ops when it is not)."""

"""A tiny OTLP/HTTP receiver for tests and the README's tour: it accepts what an OpenTelemetry SDK exports over
HTTP/protobuf (POST /v1/traces, /v1/metrics; gzip or not), decodes it with opentelemetry-proto's
ExportTraceServiceRequest and ExportMetricsServiceRequest, keeps the spans and metric points, and prints a line
for each when asked. Listens on 127.0.0.1 only. Not a collector: nothing is stored past the process.

    onward otlp-receiver --port 4318            # then: onward up --otlp http://127.0.0.1:4318
    with OtlpReceiver() as receiver: ...        # in a test: receiver.url, receiver.spans(), receiver.points()

Needs the `otlp` extra (opentelemetry-proto comes with the exporter)."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str | None
    name: str
    service: str | None
    attributes: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        attributes = " ".join(f"{name}={value}" for name, value in sorted(self.attributes.items()))
        return (f"span   trace={self.trace_id} span={self.span_id} parent={self.parent_span_id or '-'} "
                f"{self.service} {self.name} {attributes}").rstrip()


@dataclass(frozen=True)
class ReceivedPoint:
    """One data point of a metric (a gauge's or a sum's value)."""

    name: str
    value: float
    service: str | None
    attributes: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        attributes = " ".join(f"{name}={value}" for name, value in sorted(self.attributes.items()))
        return f"metric {self.service} {self.name} {attributes} = {self.value:g}".replace("  ", " ")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def _attributes(key_values: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in key_values}


def decode_spans(body: bytes) -> list[ReceivedSpan]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            spans.extend(ReceivedSpan(span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex() or None,
                                      span.name, service, _attributes(span.attributes))
                         for span in scope_spans.spans)
    return spans


def decode_points(body: bytes) -> list[ReceivedPoint]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    request = ExportMetricsServiceRequest.FromString(body)
    points = []
    for resource_metrics in request.resource_metrics:
        service = _attributes(resource_metrics.resource.attributes).get("service.name")
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind not in ("gauge", "sum"):
                    continue  # histograms and summaries: not what the platform exports
                for point in getattr(metric, kind).data_points:
                    value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
                    points.append(ReceivedPoint(metric.name, float(value), service, _attributes(point.attributes)))
    return points


class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (`port` 0: any free one) in a thread; `echo` is called with each span's
    and point's line as it arrives."""

    def __init__(self, port: int = 0, echo: Callable[[str], object] | None = None) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []
        self._points: list[ReceivedPoint] = []
        self._echo = echo
        self._echoed: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    answer = receiver.accept(self.path, body)
                except Exception as error:  # noqa: BLE001 - a body that does not decode is the sender's 400
                    self.send_error(400, f"undecodable OTLP body: {error}")
                    return
                if answer is None:
                    self.send_error(404, "OTLP/HTTP paths: /v1/traces, /v1/metrics")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def accept(self, path: str, body: bytes) -> bytes | None:
        """Keep what one export carried; the (empty) protobuf answer, or None for an unknown path."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        lines: list[str]
        if path == TRACES_PATH:
            spans = decode_spans(body)
            with self._lock:
                self._spans.extend(spans)
            lines, answer = [span.line() for span in spans], ExportTraceServiceResponse()
        elif path == METRICS_PATH:
            points = decode_points(body)
            with self._lock:
                self._points.extend(points)
            lines, answer = [point.line() for point in points], ExportMetricsServiceResponse()
        else:
            return None
        if self._echo is not None:
            for line in lines:
                if line.startswith("metric") and line in self._echoed:
                    continue  # a cumulative or last value exported again unchanged: said once
                self._echoed.add(line)
                self._echo(line)
        return bytes(answer.SerializeToString())

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def points(self) -> list[ReceivedPoint]:
        with self._lock:
            return list(self._points)

    def wait_for(self, condition: Callable[[OtlpReceiver], bool], timeout_s: float) -> bool:
        """Whether `condition(self)` held within `timeout_s` (polled)."""
        deadline = time.monotonic() + timeout_s
        while not condition(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(port: int) -> None:
    """Print every span and metric point that arrives, until Ctrl-C."""
    with OtlpReceiver(port, echo=lambda line: print(line, flush=True)) as receiver:
        print(f"OTLP receiver on {receiver.url} (onward up --otlp {receiver.url}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="print the OTLP/HTTP spans and metrics sent to 127.0.0.1:PORT")
    parser.add_argument("--port", type=int, default=4318)
    serve(parser.parse_args().port)

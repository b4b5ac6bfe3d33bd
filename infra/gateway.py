"""A local stand-in for API Gateway's HTTP API on 127.0.0.1: each HTTP request becomes a payload-2.0
event (what a Lambda behind an HTTP API receives) and is handed to the same handler as on AWS
(handlers.api.handler by default); the handler's statusCode / headers / cookies / body are written back.

It authorizes nothing itself (on AWS a JWT authorizer may run first; locally the handler checks bearer
tokens), and it never sets requestContext.authorizer, so a client cannot forge claims through it.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from infra.lambda_context import LocalLambdaContext

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway's request payload limit
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _default_handler() -> Handler:
    from handlers.api import handler

    return handler


def build_event(method: str, target: str, headers: list[tuple[str, str]], body: bytes,
                source_ip: str = "127.0.0.1") -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event for one request, routed by `$default`."""
    split = urlsplit(target)
    path = unquote(split.path) or "/"
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[lower] = f"{merged[lower]},{value}" if lower in merged else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(split.query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": split.query,
        "headers": merged,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": merged.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": source_ip,
                     "userAgent": merged.get("user-agent", "")},
            "requestId": uuid.uuid4().hex,
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode()
            event["isBase64Encoded"] = True
    return event


class _RequestHandler(BaseHTTPRequestHandler):
    server: _GatewayServer
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            self._write(413, {"content-type": "application/json"}, b'{"message":"Request Entity Too Large"}')
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else b""
        event = build_event(self.command, self.path, list(self.headers.items()), body, self.client_address[0])
        try:
            result = self.server.lambda_handler(event, LocalLambdaContext("onward-api"))
        except Exception:  # noqa: BLE001 - what API Gateway answers when the integration fails
            self._write(500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}')
            return
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
        headers = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name.lower()] = ",".join(map(str, values))
        self._write(int(result.get("statusCode", 200)), headers, data, result.get("cookies") or [])

    def _write(self, status: int, headers: dict[str, str], data: bytes, cookies: list[str] = ()) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        for cookie in cookies:
            self.send_header("set-cookie", cookie)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:  # never log requests (tokens)
        return


class _GatewayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], lambda_handler: Handler) -> None:
        super().__init__(address, _RequestHandler)
        self.lambda_handler = lambda_handler


class LocalGateway:
    """`with LocalGateway(port=0) as gateway: urlopen(gateway.url + "/health")`."""

    def __init__(self, handler: Handler | None = None, host: str = "127.0.0.1", port: int = 8000) -> None:
        self._server = _GatewayServer((host, port), handler or _default_handler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, name="onward-gateway", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""A local stand-in for API Gateway's HTTP API on 127.0.0.1: each HTTP request becomes a payload-2.0
event (what a Lambda behind an HTTP API receives) and is handed to the same handler as on AWS
(onward.api.app.handler by default); the handler's statusCode / headers / cookies / body are written back.

It authorizes nothing itself (on AWS a JWT authorizer may run first; locally the handler checks bearer
tokens), and it never sets requestContext.authorizer, so a client cannot forge claims through it.

What the handler never sees is refused here as application/problem+json (the shape onward/api/app.py uses),
and the connection is closed after it: a malformed or conflicting Content-Length (400), a transfer coding
other than chunked alone (400; chunked bodies are decoded), a body over MAX_PAYLOAD_BYTES (413), a method
other than FORWARDED_METHODS (405 with Allow; 400 when it is not an HTTP token), an HTTP version other
than 1.0 and 1.1 (400), request lines or headers too long or too many (414/431), and a client that stops
sending mid-request (408 after `client_timeout_s`). Nothing a client sends is answered with a 5xx: a 5xx is
the server's failure (the handler's), which a client may retry as is. Requests are never logged or echoed.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from onward_infra.lambda_context import LocalLambdaContext

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway's request payload limit
MAX_REQUEST_LINE_BYTES = 65536  # what BaseHTTPRequestHandler reads of a request line or header line
MAX_CHUNK_LINE_BYTES = 4096  # a chunk-size line with its extensions, or a trailer line
MAX_TRAILER_LINES = 100
# Answers that never have content, so no Content-Length either (RFC 9110, sections 8.6 and 15.4.5): a 304's
# would have to be the length of the 200 it stands for.
BODILESS_STATUSES = frozenset({204, 304})
DEFAULT_CLIENT_TIMEOUT_S = 10.0  # a client silent this long (mid-request or idle keep-alive) is dropped
LINGER_S = 1.0  # after the answer, how long unread request bytes are drained before closing
LINGER_MAX_BYTES = 1024 * 1024
FORWARDED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")  # an HTTP API route's methods
PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE_BASE = "https://onward.dev/problems/"  # the same `type` URIs onward/api/app.py answers with

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
logger = logging.getLogger("onward-gateway")


def _default_handler() -> Handler:
    from onward.api.app import handler

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


class GatewayProblem(Exception):
    """An answer the gateway gives itself, before or instead of the handler, as application/problem+json
    (the shape onward/api/app.py answers with). The connection is closed after it: the request's framing
    may be unknown."""

    def __init__(self, status: int, detail: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = _TITLES.get(status) or HTTPStatus(status).phrase
        self.detail = detail or _DETAILS.get(status) or HTTPStatus(status).description
        self.headers = dict(headers or {})

    def body(self) -> bytes:
        slug = self.title.lower().replace(" ", "-")
        return json.dumps({"type": f"{PROBLEM_TYPE_BASE}{slug}", "title": self.title, "status": self.status,
                           "detail": self.detail}).encode()


_TITLES = {413: "Content Too Large", 414: "URI Too Long"}  # RFC 9110's names, whatever Python calls them
_DETAILS = {
    400: "the request line is malformed: send `METHOD /path HTTP/1.1`",
    408: "the request was not received in time",
    413: f"the body is over {MAX_PAYLOAD_BYTES} bytes",
    414: f"the request line is over {MAX_REQUEST_LINE_BYTES} bytes",
    431: f"a header line is over {MAX_REQUEST_LINE_BYTES} bytes, or there are too many headers",
    405: f"the gateway forwards only {', '.join(FORWARDED_METHODS)}",
    500: "the handler failed",
}
SERVED_VERSIONS = ("HTTP/1.0", "HTTP/1.1")
UNSERVED_VERSION = "only HTTP/1.0 and HTTP/1.1 are served"


def content_length(values: list[str]) -> int | None:
    """The body length Content-Length headers state (None: none sent). Repeated headers or a list are
    accepted only when every value is the same decimal number (RFC 9110 8.6); anything else is a 400."""
    if not values:
        return None
    numbers = {part.strip() for value in values for part in value.split(",")}
    if len(numbers) != 1 or not _DECIMAL.fullmatch(number := numbers.pop()):
        raise GatewayProblem(400, "Content-Length must be one decimal number of bytes")
    digits = number.lstrip("0") or "0"
    if len(digits) > len(str(MAX_PAYLOAD_BYTES)):  # over the limit anyway; never int() a huge string
        raise GatewayProblem(413)
    return int(digits)


def is_chunked(values: list[str], request_version: str) -> bool:
    """Whether the body comes chunked (Transfer-Encoding: chunked). Any other list of transfer codings is a
    400 (RFC 9112 6.1 allows a 501 for a coding the server does not decode, but the request is what has to
    change): its body's length cannot be told, so the connection is closed after the answer."""
    if not values:
        return False
    codings = [part.strip().lower() for value in values for part in value.split(",") if part.strip()]
    if request_version == "HTTP/1.0" or codings != ["chunked"]:
        raise GatewayProblem(400, "the only transfer coding the gateway decodes is chunked, alone, in an HTTP/1.1 "
                             "request (compress a body with Content-Encoding instead)")
    return True


def read_chunked(rfile: BufferedIOBase, limit: int) -> bytes:
    """A chunked body (RFC 9112 7.1) read to its end, trailers discarded; 413 past `limit` bytes and 400
    when the framing is broken or the client stops before the last chunk."""
    body = bytearray()
    while True:
        size_line = _read_line(rfile)
        size_text = size_line.split(b";", 1)[0].strip()  # chunk extensions are ignored
        if not _HEX.fullmatch(size_text):
            raise GatewayProblem(400, "malformed chunk size in a chunked body")
        size = int(size_text, 16) if len(size_text.lstrip(b"0")) <= 8 else limit + 1
        if size == 0:
            break
        if len(body) + size > limit:
            raise GatewayProblem(413)
        chunk = rfile.read(size)
        if len(chunk) < size or _read_line(rfile) != b"":
            raise GatewayProblem(400, "a chunk of a chunked body is cut short or not followed by CRLF")
        body += chunk
    for _ in range(MAX_TRAILER_LINES):
        if _read_line(rfile) == b"":
            return bytes(body)
    raise GatewayProblem(431, "too many trailer lines after a chunked body")


def _read_line(rfile: BufferedIOBase) -> bytes:
    """One CRLF-terminated line of a chunked body, without its CRLF."""
    line = rfile.readline(MAX_CHUNK_LINE_BYTES + 1)
    if not line.endswith(b"\r\n") or len(line) > MAX_CHUNK_LINE_BYTES:
        raise GatewayProblem(400, "a line of a chunked body is too long, not CRLF-terminated or cut short")
    return line[:-2]


_DECIMAL = re.compile(r"[0-9]+")
_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 5.6.2: a method is a token
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_UNSAFE_HEADER_TEXT = re.compile(r"[\r\n\0]")


def _response_parts(result: dict[str, Any]) -> tuple[int, dict[str, str], bytes, list[str]]:
    """Status, headers, body and cookies of a handler's payload-2.0 answer; ValueError/TypeError when it is
    malformed (a status out of range, CR or LF in a header, which would split the response)."""
    status = int(result.get("statusCode", 200))
    if not 200 <= status <= 599:
        raise ValueError("statusCode out of range")
    payload = result.get("body") or ""
    data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
    headers = {str(k).lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[str(name).lower()] = ",".join(map(str, values))
    cookies = [str(cookie) for cookie in result.get("cookies") or []]
    if any(_UNSAFE_HEADER_TEXT.search(text) for text in (*headers, *headers.values(), *cookies)):
        raise ValueError("CR, LF or NUL in a response header")
    return status, headers, data, cookies


class _RequestHandler(BaseHTTPRequestHandler):
    server: _GatewayServer
    raw_requestline: bytes  # set by handle_one_request before parse_request (typeshed does not declare it)
    _headers_buffer: list[bytes]  # http.server's, what end_headers writes (nor this one)
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY (set by socketserver's StreamRequestHandler.setup): an answer goes out as its headers and
    # its body, two writes; on a kept-alive connection Nagle's algorithm held the body back until the client
    # acknowledged the headers, which it delays up to 40 ms: every request after a connection's first took 40 ms.
    disable_nagle_algorithm = True
    _continue_pending = False  # the client sent Expect: 100-continue and waits before sending its body

    def setup(self) -> None:
        # Every read and write of the connection (rfile and wfile read the socket's timeout); set on the
        # socket, not in `timeout`, which is a class attribute.
        self.request.settimeout(self.server.client_timeout_s)
        super().setup()

    def parse_request(self) -> bool:
        self._continue_pending = False
        self.command = ""  # not the previous keep-alive request's, should this one be refused
        if len(self.raw_requestline.split()) == 2:  # HTTP/0.9: no version, no headers, a bare answer
            self._send_problem(GatewayProblem(400, "HTTP/0.9 is not served: send HTTP/1.1"))
            return False
        try:
            if not super().parse_request():
                return False
        except TimeoutError:  # a request line came, its headers did not
            self._send_problem(GatewayProblem(408))
            return False
        if self.request_version not in SERVED_VERSIONS:  # HTTP/0.9 or 1.9 named in the line: the base class
            # serves any version under 2.0, and writes no headers for "HTTP/0.9" (the answer failed unsent)
            self._send_problem(GatewayProblem(400, UNSERVED_VERSION))
            return False
        # Checked here, not left to BaseHTTPRequestHandler's `do_<METHOD>` lookup: it answers 501 for a method
        # it has no do_ for, and would look up any word of the request line as an attribute name.
        if not _METHOD.fullmatch(self.command):
            self._send_problem(GatewayProblem(400, "the request line's method is not an HTTP token"))
            return False
        if self.command not in FORWARDED_METHODS:
            self._send_problem(GatewayProblem(405, headers={"allow": ", ".join(FORWARDED_METHODS)}))
            return False
        return True

    def handle_expect_100(self) -> bool:
        # Deferred: 100 Continue goes out only once the body's framing and size are accepted, so a client
        # never uploads a body that is refused anyway.
        self._continue_pending = True
        return True

    def _serve(self) -> None:
        try:
            body, headers = self._read_request()
        except GatewayProblem as problem:
            self._send_problem(problem)
            return
        except TimeoutError:
            self._send_problem(GatewayProblem(408, "the request body was not received in time"))
            return
        event = build_event(self.command, self.path, headers, body, self.client_address[0])
        try:
            result = self.server.lambda_handler(event, LocalLambdaContext("onward-api"))
            status, reply_headers, data, cookies = _response_parts(result)
        except Exception as error:  # noqa: BLE001 - what API Gateway answers when the integration fails
            # The class only: the error's message may quote the request (tokens).
            logger.error("the API handler failed (%s)", type(error).__name__)
            self._send_problem(GatewayProblem(500))
            return
        self._write(status, reply_headers, data, cookies)

    def _read_request(self) -> tuple[bytes, list[tuple[str, str]]]:
        """The body (read as its headers frame it) and the headers to forward; GatewayProblem when the
        request cannot be forwarded."""
        length = content_length(self.headers.get_all("content-length") or [])
        chunked = is_chunked(self.headers.get_all("transfer-encoding") or [], self.request_version)
        if chunked and length is not None:
            raise GatewayProblem(400, "both Transfer-Encoding: chunked and Content-Length: ambiguous length")
        if length is not None and length > MAX_PAYLOAD_BYTES:
            raise GatewayProblem(413)
        if self._continue_pending and (chunked or length):
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        headers = [(name, value) for name, value in self.headers.items()
                   if name.lower() != "transfer-encoding"]
        if chunked:
            body = read_chunked(self.rfile, MAX_PAYLOAD_BYTES)
            return body, [*headers, ("content-length", str(len(body)))]
        body = self.rfile.read(length) if length else b""
        if len(body) < (length or 0):
            raise GatewayProblem(400, "the body is shorter than Content-Length: the client closed early")
        return body, headers

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """BaseHTTPRequestHandler's own refusals (bad request line, 414, 431, 505) as problem+json, each a
        4xx: they are all of the request (its 505, an HTTP version not served, is a 400 here). `message` and
        `explain` quote the request, so they are never sent back."""
        detail = UNSERVED_VERSION if code == HTTPStatus.HTTP_VERSION_NOT_SUPPORTED else None
        self._send_problem(GatewayProblem(code if code < 500 else 400, detail))

    def _send_problem(self, problem: GatewayProblem) -> None:
        if getattr(self, "request_version", "HTTP/0.9") in ("HTTP/0.9", ""):
            self.request_version = "HTTP/1.0"  # answer with a status line and headers, never bare HTTP/0.9
        data = problem.body()
        self.send_response(problem.status)
        for name, value in problem.headers.items():
            self.send_header(name, value)
        self.send_header("content-type", PROBLEM_JSON)
        self.send_header("cache-control", "no-store")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")  # also sets close_connection
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
            self.wfile.write(data)

    def _write(self, status: int, headers: dict[str, str], data: bytes, cookies: Sequence[str] = ()) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        for cookie in cookies:
            self.send_header("set-cookie", cookie)
        if status not in BODILESS_STATUSES:
            self.send_header("content-length", str(len(data)))
        self._headers_buffer.append(b"\r\n")  # end_headers, with the body in the same write
        if self.command != "HEAD" and status not in BODILESS_STATUSES:
            self._headers_buffer.append(data)
        self.flush_headers()

    # BaseHTTPRequestHandler dispatches to `do_<METHOD>`: the stdlib requires these names.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve  # noqa: N815 - stdlib names

    # Requests are never logged: their lines and headers carry tokens.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return

    def log_message(self, format: str, *args: Any) -> None:
        return

    def log_error(self, format: str, *args: Any) -> None:  # its arguments quote the request
        return


class _GatewayServer(ThreadingHTTPServer):
    server_address: tuple[str, int]  # AF_INET: the (host, port) given, the bound port once bound
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops connections when a browser and tests connect at once

    def __init__(self, address: tuple[str, int], lambda_handler: Handler, client_timeout_s: float) -> None:
        super().__init__(address, _RequestHandler)
        self.lambda_handler = lambda_handler
        self.client_timeout_s = client_timeout_s

    def shutdown_request(self, request: Any) -> None:
        """Close after a lingering read: a refused request may still have bytes in flight, and closing with
        unread data would reset the connection and could destroy the answer before the client reads it."""
        try:
            request.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_S
            drained = 0
            while drained < LINGER_MAX_BYTES and (left := deadline - time.monotonic()) > 0:
                request.settimeout(left)
                chunk = request.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:  # the client is gone, or the lingering read timed out
            pass
        self.close_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed outside a request (a client resetting, a write timing out): no
        traceback, which could quote the request."""
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            logger.error("a gateway connection failed (%s)", type(error).__name__)


class LocalGateway:
    """`with LocalGateway(port=0) as gateway: urlopen(gateway.url + "/health")`. A client that sends
    nothing for `client_timeout_s` (mid-request or idle between keep-alive requests) is disconnected; one
    stalled mid-request is answered 408 first. Each connection has its own thread."""

    def __init__(self, handler: Handler | None = None, host: str = "127.0.0.1", port: int = 8000,
                 client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S) -> None:
        if client_timeout_s <= 0:
            raise ValueError(f"client_timeout_s must be positive, got {client_timeout_s}")
        self._server = _GatewayServer((host, port), handler or _default_handler(), client_timeout_s)
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

"""Connections. moto's request handler is werkzeug's, which answers every request with `Connection: close`
and then waits up to 10 ms for anything more the client might send (werkzeug's dev server does not know
where a request ends, so it drains the socket before closing it): every AWS call paid for a new TCP
connection, a new thread, and that wait. And without TCP_NODELAY a response written in two parts (headers,
then body) waits for the client's delayed ACK (~40 ms on Linux).

`KeepAliveRequestHandler` (a base of the endpoint's handler, before moto's) keeps HTTP/1.1 connections
open between requests (botocore reuses them), with TCP_NODELAY, when a request and its answer can be
delimited exactly:
- the request has no `Transfer-Encoding` and a valid `Content-Length` (or none: no body); its body is read
  whole before the application runs, so nothing of it can be taken for the next request line, however much
  of it the application reads;
- the answer is built whole and sent with a `Content-Length` (added when the application gave none; when
  it gave a wrong one, the connection closes after the answer, as werkzeug's always did).
Any other request (chunked, HTTP/1.0, `Connection: close`) goes through werkzeug's own `run_wsgi`
unchanged, and its connection closes after it. Application errors are answered and logged as werkzeug does
(a 500, the traceback in the server's log; re-raised with `passthrough_errors`).

A connection kept open is served by its own thread, which waits for the next request (on werkzeug's
threaded server; the endpoint's selector_server.py serves the SDKs' connections from one thread, and hands
any other connection to a thread of this handler). Those threads are
daemons, which `server_close` does not join: a connection a client keeps in its pool would outlive the
server, and go on answering from the stopped endpoint's state (a test restarting an endpoint on the same
port would talk to the old one). So a server given to `closing_idle_connections` shuts down, when it
closes, the sockets of connections waiting between requests (a request being served completes, then its
connection closes): the clients see the connections end and open new ones.

The lean path. For a kept-alive request to "/" with plain headers (no underscore in a name, no chunks, no
TLS), `_plain_environ` builds the environ werkzeug's and moto's make_environ build (the same keys, values and
order; about 7% of a request's CPU went to their URL parsing, header loops and certificate check), and an
answer's status line, headers and body go out in one write, as the bytes send_response, send_header and
end_headers would have written in two.

The lean request loop. A request of the SDKs' kind (`POST / HTTP/1.1`, its whole head already in the
connection's read buffer, one Content-Length, plain headers: `_plain_headers`) is read from that buffer at
once, without http.server's parse_request and its header parsing (about 20 us of the endpoint's CPU per
request): the handler is left as parse_request leaves it, the environ is `_plain_environ`'s, the answer is
the same. Any other request (a head split across reads, Expect, Connection, Transfer-Encoding, a name twice
or with an underscore...) takes http.server's way. Both are off with ONWARD_LEAN_REQUESTS=false
(infra/tests/onward_infra_tests/moto_fixes/test_endpoint_request_loop.py compares the answers either way,
byte for byte).

Request headers. http.server reads a request's headers with http.client.parse_headers, which runs the
email package's feed parser over them: about a twentieth of the endpoint's CPU per request. `parse_headers`
here builds the same message directly when every line is a plain `Name: value` header (a name of visible
characters, no continuation line, no Unix "From " line), and leaves anything else to the email parser.

Nothing of moto's is patched: the endpoint uses the handler and wraps its server; `http.client.parse_headers`
is replaced (PATCHES) in the processes that install the fixes.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.utils
import http.client
import io
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY
from werkzeug.exceptions import InternalServerError
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

_ENTITY_KEYS = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})
_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")  # what the email parser takes for a header's name
_original_parse_headers = http.client.parse_headers


def parse_headers(fp: Any, _class: type[http.client.HTTPMessage] = http.client.HTTPMessage) -> Any:
    """`http.client.parse_headers`: the same message, built without the email parser for plain headers."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]  # the stdlib's own line reader
    message = _class()
    for line in lines[:-1]:  # the last is the blank line that ends them (or b"" at the end of the stream)
        text = line.decode("iso-8859-1")
        name, colon, value = text.partition(":")
        if not colon or not _HEADER_NAME.fullmatch(name) or text.startswith("From "):
            return _email_parsed(lines, _class)
        message.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
    return message


def _email_parsed(lines: list[bytes], _class: type[http.client.HTTPMessage]) -> Any:
    return email.parser.Parser(_class=_class).parsestr(b"".join(lines).decode("iso-8859-1"))


PATCHES: tuple[tuple[Any, str, Any], ...] = ((http.client, "parse_headers", parse_headers),)

# The request line of every request the SDKs send the endpoint (the JSON protocols' services).
_PLAIN_REQUEST_LINE = b"POST / HTTP/1.1\r\n"
_PLAIN_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x5e\x60-\x7e]+")  # _HEADER_NAME's, but for "_"
_MAX_PLAIN_HEADERS = 64  # (http.server answers more than 100 with a 431: left to it)
_MAX_PLAIN_HEAD = 65536  # (http.server's longest line; a head not whole by then is left to it)
# Headers http.server's parse_request acts on, or that change how a body is framed: left to it.
_FRAMING_HEADERS = frozenset({"connection", "expect", "transfer-encoding"})


def _plain_headers(head: bytes | bytearray) -> list[tuple[str, str]] | None:
    """A request's headers (`head`: its bytes between the request line and the blank line), as `parse_headers`
    and the message's items() give them, when they are plain: each line a `Name: value` header, its name without
    an underscore, no name twice (in any case), no bare CR or LF, a Content-Length, none of _FRAMING_HEADERS;
    None for anything else."""
    crlfs = head.count(b"\r\n")
    if head.count(b"\r") != crlfs or head.count(b"\n") != crlfs or crlfs >= _MAX_PLAIN_HEADERS:
        return None
    headers: list[tuple[str, str]] = []
    names: set[str] = set()
    for line in head.decode("iso-8859-1").split("\r\n"):
        name, colon, value = line.partition(":")
        if not colon or not _PLAIN_HEADER_NAME.fullmatch(name):
            return None
        names.add(name.lower())
        headers.append((name, value.lstrip(" \t")))
    if len(names) != len(headers) or not names.isdisjoint(_FRAMING_HEADERS) or "content-length" not in names:
        return None
    return headers

_CONNECTIONS_ATTRIBUTE = "onward_connections"  # on a server given to closing_idle_connections
_BODILESS_STATUSES = frozenset({204, 304})


class _Connections:
    """The connections of one server waiting between two requests, shut down when the server closes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[socket.socket] = set()
        self.closing = False

    def waiting(self, connection: socket.socket) -> bool:
        """The connection waits for its next request; False: the server is closing, do not wait."""
        with self._lock:
            if self.closing:
                return False
            self._waiting.add(connection)
            return True

    def serving(self, connection: socket.socket) -> bool:
        """The connection's next request arrived (or the wait ended); False: the server is closing."""
        with self._lock:
            self._waiting.discard(connection)
            return not self.closing

    def close(self) -> None:
        """From now on every connection closes; those waiting for a request are shut down now."""
        with self._lock:
            self.closing = True
            waiting, self._waiting = self._waiting, set()
        for connection in waiting:
            with contextlib.suppress(OSError):  # closed by the client meanwhile
                connection.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it: it sees the end


def closing_idle_connections(server: BaseWSGIServer) -> BaseWSGIServer:
    """`server` (werkzeug's make_server(..., threaded=True, request_handler=a KeepAliveRequestHandler)),
    made to keep connections open between requests, and to shut down those waiting for a request before
    its `server_close` joins their threads."""
    connections = _Connections()
    setattr(server, _CONNECTIONS_ATTRIBUTE, connections)
    close_server = server.server_close

    def server_close() -> None:
        connections.close()
        close_server()

    server.server_close = server_close  # type: ignore[method-assign]  # this one server's, deliberately
    return server


def _connections(handler: KeepAliveRequestHandler) -> _Connections | None:
    """The server's connections when this handler's connection can be kept open; else None."""
    found = getattr(handler.server, _CONNECTIONS_ATTRIBUTE, None)
    if not isinstance(found, _Connections) or not isinstance(handler.rfile, io.BufferedReader):
        return None  # not our server, or an unbuffered rfile (nothing to wait on without consuming it)
    return found


class KeepAliveRequestHandler(WSGIRequestHandler):
    """werkzeug's request handler, keeping connections open between requests (see the module's docstring);
    put it before moto's MotoRequestHandler among a handler's bases. On a server not given to
    `closing_idle_connections`, it behaves as werkzeug's: one request per connection."""

    protocol_version = "HTTP/1.1"
    lean = True  # requests to "/" with plain headers get their environ built at once (_plain_environ)
    disable_nagle_algorithm = True  # TCP_NODELAY, set by socketserver.StreamRequestHandler.setup

    def date_time_string(self, timestamp: float | None = None) -> str:
        """http.server's Date header value (RFC 7231, to the second) for now or `timestamp`."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return http_date()

    def handle_one_request(self) -> None:
        connections = _connections(self)
        if connections is None:
            super().handle_one_request()
            return
        arrived = b""
        assert isinstance(self.rfile, io.BufferedReader)  # see _connections
        if connections.waiting(self.connection):
            try:
                # Blocks until the next request's first bytes (or what is left of them in the buffer), the
                # client closing the connection, or the server shutting it down (then: b"").
                arrived = self.rfile.peek(1)
            except OSError:
                arrived = b""
        if not connections.serving(self.connection) or not arrived:
            self.close_connection = True
            return
        plain = self._plain_request(arrived) if self.lean else None
        if plain is None:
            super().handle_one_request()
        else:
            self._serve_plain_request(*plain, connections)
        if connections.closing:
            self.close_connection = True

    def _plain_request(self, arrived: bytes) -> tuple[int, list[tuple[str, str]], int] | None:
        """`plain_request(arrived)` on a plain TCP connection (no TLS); None otherwise."""
        if self.server.ssl_context is not None or not isinstance(self.client_address, tuple):
            return None
        if not self.client_address:
            return None
        return plain_request(arrived)

    def _serve_plain_request(self, head_length: int, headers: list[tuple[str, str]], length: int,
                             connections: _Connections) -> None:
        """Serve the request `_plain_request` read from the buffer, leaving the handler as http.server's
        parse_request and handle_one_request leave it."""
        self.rfile.read(head_length)  # what was peeked: in the buffer, returned at once
        self.raw_requestline = _PLAIN_REQUEST_LINE
        self.requestline = _PLAIN_REQUEST_LINE[:-2].decode()
        self.command, self.path, self.request_version = self.requestline.split()
        self.close_connection = False  # (HTTP/1.1, no Connection header)
        message = self.MessageClass()
        for name, value in headers:
            message.set_raw(name, value)
        self.headers = message
        self._serve(self._environ(headers), length, connections)
        self.wfile.flush()

    def run_wsgi(self) -> None:
        length = self._framed_request_length()
        connections = _connections(self)
        if length is None or connections is None:
            super().run_wsgi()  # werkzeug's own: Connection: close, the socket drained
            return
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self._serve((self.lean and self._plain_environ()) or self.make_environ(), length, connections)

    def _serve(self, environ: dict[str, Any], length: int, connections: _Connections) -> None:
        """Read the request's body (`length` bytes), run the application over it, send the whole answer."""
        self.environ = environ
        try:
            body = self.rfile.read(length)
        except (ConnectionError, TimeoutError) as error:
            self.close_connection = True
            self.connection_dropped(error, environ)
            return
        if len(body) < length:  # the client went away mid-body
            self.close_connection = True
            return
        environ["wsgi.input"] = io.BytesIO(body)
        status, headers, answer = self._answer(environ)
        if connections.closing:  # the server is stopping: say so, this connection closes after the answer
            self.close_connection = True
        try:
            self._send(environ, status, headers, answer)
        except (ConnectionError, TimeoutError) as error:
            self.close_connection = True
            self.connection_dropped(error, environ)

    def _plain_environ(self) -> dict[str, Any] | None:
        """`make_environ()` (werkzeug's, and moto's MotoRequestHandler's after it), built at once for a plain
        request to "/" (no header name with an underscore, no chunks, no TLS); None for anything else."""
        if self.path != "/" or self.server.ssl_context is not None or not isinstance(self.client_address, tuple):
            return None
        if not self.client_address or self.request_version == "HTTP/0.9":
            return None
        headers = self.headers.items()
        if any("_" in name for name, _ in headers):
            return None  # (moto keeps such names' spelling: its make_environ)
        if "Transfer-Encoding" in self.headers:
            return None
        return self._environ(headers)

    def _environ(self, headers: list[tuple[str, str]]) -> dict[str, Any]:
        """`_plain_environ` of a request with these headers (names without an underscore)."""
        return plain_environ(self.server, self.client_address, self.connection, headers,
                             self.command, self.request_version, self.server_version, self.rfile)

    def _framed_request_length(self) -> int | None:
        """The request body's length when the request can share its connection with the next; else None."""
        if self.close_connection or "Transfer-Encoding" in self.headers:
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            return 0
        if len(set(values)) != 1 or not values[0].strip().isdigit():
            return None
        return int(values[0])

    def _answer(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """The application's whole answer: status, headers, body; werkzeug's 500 should it raise."""
        return application_answer(self.server, environ)

    def _send(self, environ: dict[str, Any], status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.log_request(int(status.split(None, 1)[0]))
        answer, self.close_connection = answer_bytes(
            environ["REQUEST_METHOD"], status, headers, body, self.close_connection,
            self.protocol_version, self.version_string(), self.date_time_string())
        self.wfile.write(answer)


# (second, its Date header): every answer's Date, formatted once a second, not once per answer (the email
# package's formatdate was about 3% of the endpoint's time)
_date: tuple[int, str] = (-1, "")


def http_date() -> str:
    """Now as an answer's Date header (RFC 7231, to the second), as http.server's date_time_string()."""
    global _date
    second = int(time.time())
    date = _date  # one read: another thread may replace it meanwhile
    if date[0] != second:
        date = _date = (second, email.utils.formatdate(second, usegmt=True))
    return date[1]


def plain_request(arrived: bytes | bytearray) -> tuple[int, list[tuple[str, str]], int] | None:
    """For a plain request whose request line and headers are all in `arrived` (a connection's received
    bytes, not consumed): the length of that head, its headers, the body's length; None for anything else
    (see _PLAIN_REQUEST_LINE, `_plain_headers`): http.server's own parsing then reads it."""
    if not arrived.startswith(_PLAIN_REQUEST_LINE):
        return None
    end = arrived.find(b"\r\n\r\n", len(_PLAIN_REQUEST_LINE) - 2)
    if end < 0:
        return None
    headers = _plain_headers(arrived[len(_PLAIN_REQUEST_LINE):end])
    if headers is None:
        return None
    length = next((value for name, value in headers if name.lower() == "content-length"), "")
    if not (length.isascii() and length.isdigit()):
        return None
    return end + 4, headers, int(length)


def may_become_plain(arrived: bytes | bytearray) -> bool:
    """Whether more bytes after `arrived` could make it a head `plain_request` reads (it is not one yet)."""
    if len(arrived) < len(_PLAIN_REQUEST_LINE):
        return _PLAIN_REQUEST_LINE.startswith(arrived)
    return (arrived.startswith(_PLAIN_REQUEST_LINE) and len(arrived) < _MAX_PLAIN_HEAD
            and arrived.find(b"\r\n\r\n", len(_PLAIN_REQUEST_LINE) - 2) < 0)


def plain_environ(server: BaseWSGIServer, client_address: tuple[str, int], connection: socket.socket,
                  headers: list[tuple[str, str]], method: str, version: str, software: str,
                  body: Any) -> dict[str, Any]:
    """The environ werkzeug's and moto's make_environ build for a request to "/" with these headers (names
    without an underscore), from this client, over this connection, `body` its wsgi.input."""
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": body, "wsgi.errors": sys.stderr,
        "wsgi.multithread": server.multithread, "wsgi.multiprocess": server.multiprocess, "wsgi.run_once": False,
        "werkzeug.socket": connection, "SERVER_SOFTWARE": software,
        "REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": "/", "QUERY_STRING": "",
        "REQUEST_URI": "/", "RAW_URI": "/", "REMOTE_ADDR": client_address[0],
        "REMOTE_PORT": client_address[1], "SERVER_NAME": server.server_address[0],
        "SERVER_PORT": str(server.server_address[1]), "SERVER_PROTOCOL": version,
    }
    for name, raw_value in headers:
        key = name.upper().replace("-", "_")
        value = raw_value.replace("\r\n", "")
        if key not in _ENTITY_KEYS:
            key = f"HTTP_{key}"
            if key in environ:
                value = f"{environ[key]},{value}"
        environ[key] = value
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = {}
    return environ


def application_answer(server: BaseWSGIServer, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """The server's application's whole answer to `environ`: status, headers, body; werkzeug's 500 (the
    traceback in the server's log) should it raise, unless the server passes errors through."""
    try:
        return _run(server.app, environ)
    except Exception as error:
        if server.passthrough_errors:
            raise
        from werkzeug.debug.tbtools import DebugTraceback

        answer = _run(InternalServerError(), environ)
        server.log("error", f"Error on request:\n{DebugTraceback(error).render_traceback_text()}")
        return answer


def answer_bytes(method: str, status: str, headers: list[tuple[str, str]], body: bytes, closing: bool,
                 protocol: str, server_header: str, date: str) -> tuple[bytes, bool]:
    """What send_response, send_header and end_headers write, then the body, for an answer to an HTTP/1.1
    request (only those share a connection): the bytes, and whether the connection closes after them (it
    did before, `closing`, the application said so, or the answer's length cannot be told)."""
    try:
        code_text, message = status.split(None, 1)
    except ValueError:
        code_text, message = status, ""
    code = int(code_text)
    declared = [value for name, value in headers if name.lower() == "content-length"]
    if method == "HEAD" or 100 <= code < 200 or code in _BODILESS_STATUSES:
        framed = not body  # no body follows, whatever the headers say
    elif declared:
        framed = declared == [str(len(body))]
    else:
        headers = [*headers, ("Content-Length", str(len(body)))]
        framed = True
    lines = [f"{protocol} {code} {message}\r\n", f"Server: {server_header}\r\n", f"Date: {date}\r\n"]
    close = closing
    connection_header = False
    for name, value in headers:
        lines.append(f"{name}: {value}\r\n")
        if name.lower() == "connection":  # as send_header: the application's Connection header decides
            connection_header = True
            if value.lower() == "close":
                close = True
            elif value.lower() == "keep-alive":
                close = False
    if closing or not framed:
        if not connection_header:
            lines.append("Connection: close\r\n")
        close = True
    lines.append("\r\n")
    return "".join(lines).encode("latin-1", "strict") + body, close


def _run(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run a WSGI application to the end of its answer."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None:
            started.clear()  # nothing is sent before the whole answer is built: the error's answer replaces it
        elif started:
            raise AssertionError("Headers already set")
        started.append((status, list(headers)))
        return written.append

    iterable = app(environ, start_response)
    try:
        written.extend(iterable)
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            close()
    if not started:
        raise AssertionError("the application returned without calling start_response")
    status, headers = started[-1]
    return status, headers, b"".join(written)

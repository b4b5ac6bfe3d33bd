"""One thread serving every connection's plain requests. The endpoint answers one request at a time (its
SerializedApp lock), yet werkzeug's threaded server gives each kept-alive connection a thread of its own
that waits for the connection's next request: with the fifty-odd connections of the soak's clients, every
request woke its thread, which took the GIL from the thread serving and queued on the lock (about a tenth
of the endpoint's CPU went to that lock's line and the threads' hand-offs, py-spy --gil).

`SelectorServer` (werkzeug's ThreadedWSGIServer otherwise) runs its own loop over a selector: it accepts
connections, reads what arrives on each into the connection's buffer, and serves each whole plain request
there (the SDKs' kind, as connections.py's `plain_request` reads them: `POST / HTTP/1.1`, plain headers, one
Content-Length), its answer the same bytes the threaded handler writes (connections.py's `plain_environ`,
`application_answer`, `answer_bytes`). A connection whose bytes cannot become such a request (another
method or path, chunked, Expect, Connection, HTTP/1.0, TLS...) is handed, with what was read of it, to a
thread running the server's request handler, as werkzeug's server would have: it keeps that thread from then on.

An answer the client is slow to take waits in its connection's buffer (the socket is written when it can
take more) while the loop serves the others; that connection's next request is read once its answer went.
`shutdown` stops the loop; `server_close` closes every connection it holds (a client sees its connection
end and opens a new one) and those handed to threads (connections.py's closing_idle_connections).
"""

from __future__ import annotations

import contextlib
import io
import selectors
import socket
import threading
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any

from werkzeug.serving import ThreadedWSGIServer

from onward_infra.moto_fixes.connections import (
    KeepAliveRequestHandler,
    answer_bytes,
    application_answer,
    http_date,
    may_become_plain,
    plain_environ,
    plain_request,
)

_RECEIVE_BYTES = 256 * 1024
_PROTOCOL = "HTTP/1.1"


class _Prefixed(io.RawIOBase):
    """A connection's socket, read after the bytes already received from it (handed to a handler's thread)."""

    def __init__(self, received: bytes, connection: socket.socket) -> None:
        self._received = received
        self._socket = socket.SocketIO(connection, "rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if not self._received:
            return self._socket.readinto(buffer)
        taken = self._received[:len(buffer)]
        self._received = self._received[len(taken):]
        buffer[:len(taken)] = taken
        return len(taken)

    def close(self) -> None:
        self._socket.close()
        super().close()


class _Connection:
    """One kept-alive connection the loop serves: what arrived of its next request, what is left to send."""

    def __init__(self, connection: socket.socket, address: tuple[str, int]) -> None:
        self.socket = connection
        self.address = address
        self.received = bytearray()
        self.unsent = memoryview(b"")
        self.closing = False  # after what is unsent
        self.writing = False  # registered for EVENT_WRITE (an answer waits), else for EVENT_READ


class SelectorServer(ThreadedWSGIServer):
    """werkzeug's threaded WSGI server whose plain requests are served by the loop of `serve_forever` (see
    the module's docstring). Made with werkzeug's BaseWSGIServer arguments; its request handler must be a
    HandedOffRequestHandler (it is given what the loop read of a connection it hands off)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._connections: dict[socket.socket, _Connection] = {}
        self._received: dict[socket.socket, bytes] = {}  # handed to a thread, with these bytes read before
        self._server_header = f"{self._server_version} {BaseHTTPRequestHandler.sys_version}"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        if self.ssl_context is not None:
            super().serve_forever(poll_interval)
            return
        self._stopped.clear()
        try:
            self.socket.setblocking(False)
            self._selector.register(self.socket, selectors.EVENT_READ)
            self._selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, events in self._selector.select(poll_interval):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_reader:
                        self._wake_reader.recv(4096)
                    else:
                        self._ready_guarded(key.data, events)
        finally:
            for connection in list(self._connections.values()):
                self._close(connection)
            self._selector.close()
            self.server_close()
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        for end in (self._wake_reader, self._wake_writer):
            with contextlib.suppress(OSError):
                end.close()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """A handed-off connection's handler, its reads starting with what the loop had received."""
        received = self._received.pop(request, b"")
        handler_class: Any = self.RequestHandlerClass
        handler_class(request, client_address, self, received=received)

    def _accept(self) -> None:
        while True:
            try:
                connection, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # (the listening socket closed under us, or out of descriptors: the next select says)
            connection.setblocking(False)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            kept = _Connection(connection, address)
            self._connections[connection] = kept
            self._selector.register(connection, selectors.EVENT_READ, kept)

    def _ready_guarded(self, connection: _Connection, events: int) -> None:
        """`_ready`; should it fail (the application's errors are answered: this is the loop's own), that
        connection closes, as its thread would have ended, and the loop serves the others."""
        try:
            self._ready(connection, events)
        except Exception:
            if self.passthrough_errors:
                raise
            self.log("error", f"Error serving {connection.address}:\n{traceback.format_exc()}")
            self._close(connection)

    def _ready(self, connection: _Connection, events: int) -> None:
        if events & selectors.EVENT_WRITE:
            self._flush(connection)
            if connection.unsent or connection.socket.fileno() < 0:
                return
        if events & selectors.EVENT_READ:
            try:
                arrived = connection.socket.recv(_RECEIVE_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                arrived = b""
            if not arrived:
                self._close(connection)
                return
            connection.received += arrived
        self._serve_received(connection)

    def _serve_received(self, connection: _Connection) -> None:
        """Serve every whole plain request received, in order, until one's answer cannot be sent at once."""
        while connection.received and not connection.unsent and not connection.closing:
            received = connection.received
            request = plain_request(received)
            if request is None:
                if not may_become_plain(received):
                    self._hand_off(connection)
                return
            head_length, headers, length = request
            if len(received) < head_length + length:
                return  # the body is on its way
            body = io.BytesIO(received[head_length:head_length + length])
            del connection.received[:head_length + length]
            environ = plain_environ(self, connection.address, connection.socket, headers, "POST", _PROTOCOL,
                                    self._server_version, body)
            status, answer_headers, answer = application_answer(self, environ)
            unsent, connection.closing = answer_bytes(
                "POST", status, answer_headers, answer, False, _PROTOCOL, self._server_header, http_date())
            connection.unsent = memoryview(unsent)
            self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        try:
            sent = connection.socket.send(connection.unsent)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(connection)
            return
        connection.unsent = connection.unsent[sent:]
        if connection.unsent or not connection.closing:
            self._watch(connection, writing=bool(connection.unsent))
        else:
            self._close(connection)

    def _watch(self, connection: _Connection, *, writing: bool) -> None:
        """Wait for the socket to take more (`writing`) or to bring more; the selector is told only of a
        change (an answer sent whole, the usual case, changes nothing)."""
        if connection.writing != writing:
            connection.writing = writing
            self._selector.modify(connection.socket, selectors.EVENT_WRITE if writing else selectors.EVENT_READ,
                                  connection)

    def _hand_off(self, connection: _Connection) -> None:
        """Give the connection, and what was received of it, to a thread running the request handler."""
        self._selector.unregister(connection.socket)
        del self._connections[connection.socket]
        connection.socket.setblocking(True)
        self._received[connection.socket] = bytes(connection.received)
        self.process_request(connection.socket, connection.address)

    def _close(self, connection: _Connection) -> None:
        if self._connections.pop(connection.socket, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection.socket)
        with contextlib.suppress(OSError):
            connection.socket.close()


class HandedOffRequestHandler(KeepAliveRequestHandler):
    """A request handler that a SelectorServer can hand a connection to: its reads start with the bytes the
    loop had received (`received`)."""

    def __init__(self, request: Any, client_address: Any, server: Any, received: bytes = b"") -> None:
        self._already_received = received
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        if self._already_received:
            self.rfile.close()  # (a file of the socket left open would keep the socket open after its close)
            self.rfile = io.BufferedReader(_Prefixed(self._already_received, self.connection))

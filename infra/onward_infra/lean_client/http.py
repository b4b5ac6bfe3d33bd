"""A lean HTTP transport for boto3 clients of the embedded endpoint (ONWARD_CLIENT_WRAPPER, onward_infra.lean_client).

botocore sends each request through urllib3 and http.client: a connection pool per host, a request built
header by header, the response's headers parsed by the email package. On the embedded endpoint (plain
HTTP on this machine, answering every request in a millisecond or two) that was half of a request's client
CPU (a GetItem 0.89 -> 0.43 ms, a small PutItem 0.95 -> 0.41). `LeanHttpSession` is botocore's HTTP session
reduced to what such an endpoint needs: HTTP/1.1 over kept-alive TCP connections (TCP_NODELAY), each request
written in one `sendall`, the answer read through a buffered reader, its body framed by Content-Length,
chunks or the connection's end. It keeps botocore's contract: an `AWSResponse` whose headers repeat a
repeated field joined with ", " (as urllib3 does), and botocore's exceptions, so that its retries treat a
refused connection, a timeout or a connection closed mid-answer as they do with urllib3. A connection that
was kept idle and turns out closed by the endpoint (restarted, or stopping) is replaced before anything was
answered on it, as urllib3 does.

Only for http:// endpoints and requests whose body is bytes or text (the JSON protocols of DynamoDB,
DynamoDB Streams and Kinesis): `use_lean_http` refuses anything else.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import weakref
from typing import Any, Final
from urllib.parse import urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

MAX_LINE: Final = 65_536  # longest status or header line accepted
MAX_HEADERS: Final = 200
NO_BODY_STATUSES: Final = frozenset({204, 304})
Address = tuple[str, int]


class _Connection:
    """One TCP connection to the endpoint and the buffered reader of its answers."""

    __slots__ = ("reader", "reused", "sock")

    def __init__(self, address: Address, connect_timeout: float | None) -> None:
        self.sock = socket.create_connection(address, timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else each request waits ~40 ms
        self.reader = self.sock.makefile("rb")
        self.reused = False

    def dropped(self) -> bool:
        """Whether the endpoint closed this idle connection (it is readable: its end, or bytes no request
        asked for)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


class _Body:
    """The raw body botocore reads (`AWSResponse.content` joins `stream()`), already read whole."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        if self._data:
            yield self._data

    def read(self, amount: int | None = None) -> bytes:
        data, self._data = (self._data, b"") if amount is None else (self._data[:amount], self._data[amount:])
        return data

    def close(self) -> None:
        self._data = b""


class _Closed(Exception):
    """The connection ended before a whole answer was read; `answered`: after some of it."""

    def __init__(self, answered: bool) -> None:
        super().__init__("the connection ended " + ("mid-answer" if answered else "before an answer"))
        self.answered = answered


_sessions: weakref.WeakSet[LeanHttpSession] = weakref.WeakSet()


class LeanHttpSession:
    """botocore's HTTP session (what `Endpoint` calls `send` on) for a plain-HTTP endpoint. Thread-safe: a
    request takes an idle connection (the most recently used) or opens one, and gives it back once its
    answer was read whole; at most `max_idle` are kept."""

    def __init__(self, *, connect_timeout: float | None = 60.0, read_timeout: float | None = 60.0,
                 max_idle: int = 10) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._idle: dict[Address, list[_Connection]] = {}
        self._lock = threading.Lock()
        _sessions.add(self)

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        """Send `request`, read its whole answer: botocore's exceptions on failure (see the module)."""
        parts = urlsplit(request.url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"LeanHttpSession speaks plain HTTP only, not {request.url}")
        address = (parts.hostname, parts.port or 80)
        message = _request_bytes(request, parts.netloc, parts.path or "/", parts.query)
        timeout = (request.context or {}).get("read_timeout") or self._read_timeout
        while True:
            connection = self._take(address, request.url)
            try:
                connection.sock.settimeout(timeout)
                connection.sock.sendall(message)
                status, headers, body, keep = _read_answer(connection.reader, request.method)
            except TimeoutError as error:
                connection.close()
                raise ReadTimeoutError(endpoint_url=request.url, error=error) from None
            except (_Closed, OSError) as error:  # ended, reset, a broken pipe
                connection.close()
                if connection.reused and not (isinstance(error, _Closed) and error.answered):
                    continue  # nothing answered on a connection kept idle: the endpoint had ended it
                raise ConnectionClosedError(endpoint_url=request.url, request=request, error=error) from None
            if keep:
                self._give_back(address, connection)
            else:
                connection.close()
            response = AWSResponse(request.url, status, headers, _Body(body))
            response._content = body  # read whole already: `content` need not join the stream
            return response

    def _take(self, address: Address, url: str) -> _Connection:
        while True:
            with self._lock:
                idle = self._idle.get(address)
                connection = idle.pop() if idle else None
            if connection is None:
                break
            if not connection.dropped():
                connection.reused = True
                return connection
            connection.close()
        try:
            return _Connection(address, self._connect_timeout)
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=url, error=error) from None
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=url, error=error) from None

    def _give_back(self, address: Address, connection: _Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(address, [])
            if len(idle) < self._max_idle:
                idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection (those answering a request close once it is answered)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


def _forget_connections_after_fork() -> None:
    """A forked child must not share its parent's connections (answers would go to either process): it
    drops them (closing its copies only) and opens its own."""
    for session in list(_sessions):
        session._lock = threading.Lock()
        session.close()


os.register_at_fork(after_in_child=_forget_connections_after_fork)


def _request_bytes(request: AWSPreparedRequest, netloc: str, path: str, query: str) -> bytes:
    body = request.body if request.body is not None else b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    if not isinstance(body, bytes | bytearray):
        raise ValueError(f"LeanHttpSession sends bodies of bytes or text, not {type(body).__name__}")
    target = f"{path}?{query}" if query else path
    lines = [f"{request.method} {target} HTTP/1.1\r\n"]
    names = set()
    for name, value in request.headers.items():
        names.add(name.lower())
        lines.append(f"{name}: {value.decode('latin-1') if isinstance(value, bytes) else value}\r\n")
    if "host" not in names:
        lines.append(f"Host: {netloc}\r\n")
    if "content-length" not in names and (body or request.method not in ("GET", "HEAD", "OPTIONS")):
        lines.append(f"Content-Length: {len(body)}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1") + bytes(body)


def _read_answer(reader: Any, method: str) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers, body, whether the connection may carry another request). Raises _Closed when the
    connection ends (or is reset) before the answer does; TimeoutError as the socket does."""
    try:
        status_line = reader.readline(MAX_LINE + 1)
    except TimeoutError:
        raise
    except OSError:
        raise _Closed(False) from None
    if not status_line:
        raise _Closed(False)
    try:
        return _read_rest(reader, method, status_line)
    except TimeoutError:
        raise
    except OSError:
        raise _Closed(True) from None


def _read_rest(reader: Any, method: str, status_line: bytes) -> tuple[int, dict[str, str], bytes, bool]:
    version, status, _ = _status(status_line)
    headers: dict[str, str] = {}
    names: dict[str, str] = {}  # lowered -> as first sent
    last = ""
    for _ in range(MAX_HEADERS + 1):
        line = reader.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise _Closed(True)
        if line in (b"\r\n", b"\n"):
            break
        if line[:1] in (b" ", b"\t") and last:  # a folded continuation of the previous field
            headers[last] += " " + line.strip().decode("latin-1")
            continue
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon:
            raise _Closed(True)
        name, value = name.strip(), value.strip()
        last = names.setdefault(name.lower(), name)
        headers[last] = f"{headers[last]}, {value}" if last in headers else value
    else:
        raise _Closed(True)
    if 100 <= status < 200:  # an interim answer (100 Continue): the answer follows it
        return _read_rest(reader, method, reader.readline(MAX_LINE + 1))
    lowered = {lower: headers[name] for lower, name in names.items()}
    connection = lowered.get("connection", "").lower()
    keep = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    if method == "HEAD" or status in NO_BODY_STATUSES:
        return status, headers, b"", keep
    if "chunked" in lowered.get("transfer-encoding", "").lower():
        return status, headers, _chunks(reader), keep
    if "content-length" in lowered:
        try:
            length = int(lowered["content-length"])
        except ValueError:
            raise _Closed(True) from None
        body = reader.read(length) if length else b""
        if len(body) < length:
            raise _Closed(True)
        return status, headers, body, keep
    return status, headers, reader.read(), False  # framed by the connection's end


def _status(line: bytes) -> tuple[str, int, str]:
    try:
        version, status, *reason = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        code = int(status)
    except ValueError:
        raise _Closed(True) from None
    if not version.startswith("HTTP/"):
        raise _Closed(True)
    return version, code, reason[0] if reason else ""


def _chunks(reader: Any) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = reader.readline(MAX_LINE + 1)
        if not size_line.endswith(b"\n"):
            raise _Closed(True)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _Closed(True) from None
        if size == 0:
            while reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                pass  # trailer fields: none that botocore reads
            return b"".join(parts)
        chunk = reader.read(size + 2)
        if len(chunk) < size + 2:
            raise _Closed(True)
        parts.append(chunk[:size])


def use_lean_http(client: Any) -> Any:
    """Send `client`'s requests through a LeanHttpSession (its config's timeouts and pool size) instead of
    urllib3; `client`, for chaining. botocore builds the session itself and offers no option for it, so the
    client's endpoint is handed the new one."""
    config = client.meta.config
    if urlsplit(client.meta.endpoint_url).scheme != "http":
        raise ValueError(f"The lean client is for a plain-HTTP endpoint, not {client.meta.endpoint_url}")
    endpoint = client._endpoint
    endpoint.http_session.close()
    endpoint.http_session = LeanHttpSession(connect_timeout=config.connect_timeout,
                                            read_timeout=config.read_timeout,
                                            max_idle=config.max_pool_connections)
    return client

"""Raw-socket HTTP for the local gateway's tests (test_gateway_*.py here): send bytes exactly as
written, read one answer, and tell whether the server closed the connection after it; a stub handler that
echoes what the gateway forwarded."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from onward_infra.gateway import LocalGateway

PROBLEM_JSON = "application/problem+json"


@dataclass(frozen=True)
class RawReply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    closed: bool  # the server closed the connection after this answer
    continued: bool  # a 100 Continue came before it

    def json(self) -> Any:
        return json.loads(self.body)


def echo_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """A payload-2.0 handler that answers 200 with what it was given (method, body, content-length)."""
    answer = {"method": event["requestContext"]["http"]["method"], "body": event.get("body"),
              "content_length": event["headers"].get("content-length"),
              "transfer_encoding": event["headers"].get("transfer-encoding")}
    return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": json.dumps(answer)}


def address(running: LocalGateway | str) -> tuple[str, int]:
    """The (host, port) of a gateway, or of a URL such as serve_api's."""
    url = running if isinstance(running, str) else running.url
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def read_reply(sock: socket.socket, *, head: bool = False, close_wait_s: float = 3.0) -> RawReply:
    """One HTTP answer read off `sock` (a 100 Continue before it is skipped), then whether the server
    closed the connection within `close_wait_s`."""
    sock.settimeout(10)
    buffer = b""
    continued = False
    while True:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed before an answer: {buffer!r}")
            buffer += chunk
        head_bytes, buffer = buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status != 100:
            break
        continued = True
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    length = 0 if head else int(headers.get("content-length", "0"))
    while len(buffer) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buffer += chunk
    body, rest = buffer[:length], buffer[length:]
    sock.settimeout(close_wait_s)
    try:
        closed = not rest and sock.recv(1) == b""
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    return RawReply(status, headers, body, closed, continued)


def exchange(running: LocalGateway | str, raw: bytes, **read: Any) -> RawReply:
    with socket.create_connection(address(running), timeout=10) as sock:
        sock.sendall(raw)
        return read_reply(sock, **read)


def assert_problem(reply: RawReply, status: int) -> dict[str, Any]:
    assert reply.status == status, reply
    assert reply.headers["content-type"] == PROBLEM_JSON
    assert reply.headers["cache-control"] == "no-store"
    problem = reply.json()
    assert set(problem) == {"type", "title", "status", "detail"} and problem["status"] == status
    assert problem["type"].startswith("https://onward.dev/problems/")
    assert problem["title"] and problem["detail"]
    return problem

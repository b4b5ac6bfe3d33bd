"""The selector server (infra/onward_infra/moto_fixes/selector_server.py) serves every connection's plain requests
from one thread: each answer must reach the connection that asked, whole and in order, whatever the others
do meanwhile (a client that does not read its answer, one that sends half a request, one the loop fails on),
and stopping the server must end the connections it holds. Served here over a small echoing application;
the endpoint's answers, byte for byte against werkzeug's threaded server, are in test_endpoint_request_loop.py.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from onward_infra.moto_fixes import connections, selector_server

pytestmark = pytest.mark.integration

BIG = 4 * 1024 * 1024  # more than the slow client's socket and the server's take at once


def _echo(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Answers a request's body back, or `size` bytes of "x" when the body asks for them."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    if body.startswith(b"fail"):
        raise RuntimeError("the application failed")
    if body.startswith(b"size="):
        body = b"x" * int(body[5:])
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return [body]


@pytest.fixture
def server() -> Iterator[selector_server.SelectorServer]:
    served = connections.closing_idle_connections(
        selector_server.SelectorServer("127.0.0.1", 0, _echo, selector_server.HandedOffRequestHandler))
    assert isinstance(served, selector_server.SelectorServer)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()
    thread.join(timeout=5)
    assert not thread.is_alive()


def _port(server: selector_server.SelectorServer) -> int:
    return int(server.server_address[1])


def _post(connection: http.client.HTTPConnection, body: bytes) -> tuple[int, bytes]:
    connection.request("POST", "/", body)
    response = connection.getresponse()
    return response.status, response.read()


def test_each_answer_reaches_the_connection_that_asked(server: selector_server.SelectorServer) -> None:
    """32 clients at once, 50 requests each over one kept connection: an answer given to another
    connection, or out of order, shows as a body that is not the request's own."""

    def client(number: int) -> list[bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=30)
        answers = []
        for request in range(50):
            status, body = _post(connection, json.dumps({"client": number, "request": request}).encode())
            assert status == 200
            answers.append(body)
        connection.close()
        return answers

    with ThreadPoolExecutor(max_workers=32) as pool:
        found = list(pool.map(client, range(32)))
    for number, answers in enumerate(found):
        assert [json.loads(answer) for answer in answers] == [{"client": number, "request": request}
                                                              for request in range(50)]


def test_a_client_slow_to_read_holds_up_no_one(server: selector_server.SelectorServer) -> None:
    """An answer larger than the socket takes waits in its connection's buffer: the loop serves the others
    meanwhile (a blocking send would stop the whole endpoint), and the slow client still gets every byte,
    then the answer to its next request (its connection read again once the answer went)."""
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # (before connecting: the window it offers)
    slow.settimeout(30)
    slow.connect(("127.0.0.1", _port(server)))
    body = f"size={BIG}".encode()
    slow.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    time.sleep(0.3)  # the loop has sent what the socket takes and keeps the rest
    other = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=5)
    assert _post(other, b"meanwhile") == (200, b"meanwhile")
    other.close()
    received = bytearray()
    while (end := received.find(b"\r\n\r\n")) < 0 or len(received) < end + 4 + BIG:
        part = slow.recv(1 << 20)
        assert part, "the connection ended before the whole answer"
        received += part
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and f"Content-Length: {BIG}".encode() in head
    assert rest == b"x" * BIG
    slow.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nafter")  # read again, once sent
    assert slow.recv(65536).endswith(b"\r\n\r\nafter")
    slow.close()


def test_half_a_request_waits_for_the_rest(server: selector_server.SelectorServer) -> None:
    """A request arriving in pieces (its head cut anywhere, its body later) is served once whole, while
    other connections are served in between."""
    piecewise = socket.create_connection(("127.0.0.1", _port(server)), timeout=10)
    request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    other = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=5)
    for start, end in ((0, 3), (3, 20), (20, len(request) - 2), (len(request) - 2, len(request))):
        piecewise.sendall(request[start:end])
        assert _post(other, b"between") == (200, b"between")
    answer = piecewise.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"\r\n\r\nhello")
    piecewise.close()
    other.close()


def test_the_application_failing_is_answered_500_and_the_connection_kept(
        server: selector_server.SelectorServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=5)
    status, _ = _post(connection, b"fail")
    assert status == 500
    assert _post(connection, b"after") == (200, b"after")
    connection.close()


def test_the_loop_failing_on_a_connection_closes_that_one_only(
        server: selector_server.SelectorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of the loop's own (here: building an answer's bytes) ends the one connection, as a
    request's thread dying would have, and the loop goes on serving the others."""
    original = selector_server.answer_bytes

    def failing(method: str, status: str, headers: list[tuple[str, str]], body: bytes, *args: Any) -> Any:
        if body == b"break":
            raise RuntimeError("the loop's own failure")
        return original(method, status, headers, body, *args)

    monkeypatch.setattr(selector_server, "answer_bytes", failing)
    monkeypatch.setattr(server, "log", lambda *args: None)
    broken = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=5)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(broken, b"break")
    other = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=5)
    assert _post(other, b"still served") == (200, b"still served")
    other.close()


def test_stopping_the_server_ends_its_connections(server: selector_server.SelectorServer) -> None:
    """A connection kept in a client's pool must not outlive the server (a restarted endpoint on the same
    port would otherwise be talked to through the old one): the loop's and a handed-off one both end."""
    kept = socket.create_connection(("127.0.0.1", _port(server)), timeout=10)
    kept.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
    assert kept.recv(65536).endswith(b"hi")
    handed = socket.create_connection(("127.0.0.1", _port(server)), timeout=10)
    handed.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nho")
    assert handed.recv(65536).endswith(b"ho")
    server.shutdown()
    server.server_close()
    assert kept.recv(65536) == b""
    assert handed.recv(65536) == b""
    kept.close()
    handed.close()

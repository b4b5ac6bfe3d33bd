"""The local HTTP gateway (infra/onward_infra/gateway.py) against hostile or broken HTTP, over raw sockets.

Most tests put a stub handler behind the gateway (no AWS needed, so they are fast); the last one puts the
real onward.api.app handler behind it. Every refusal must be application/problem+json, close the connection
when the request's framing is unknown, and never hang a thread or print the request.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward_infra import gateway as gateway_module
from onward_infra.gateway import LocalGateway, _RequestHandler
from onward_infra_tests.gateway.raw_http import RawReply, address, assert_problem, echo_handler, exchange, read_reply
from onward_infra_tests.gateway.served_api import serve_api

pytestmark = pytest.mark.integration

CLIENT_TIMEOUT_S = 0.5
TOKEN = "hostile-secret-1d4f"
SECRET = f"Bearer {TOKEN}"


@pytest.fixture(scope="module")
def gateway() -> Iterator[LocalGateway]:
    """One gateway for the module: every test opens its own connections, and stopping one takes 0.5 s."""
    with LocalGateway(echo_handler, port=0, client_timeout_s=CLIENT_TIMEOUT_S) as running:
        yield running


# --- framing ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("length_headers", [
    ["abc"], ["-5"], ["1e3"], ["+5"], ["5", "6"], ["5, 6"], ["\u0663"], [""],
], ids=["letters", "negative", "exponent", "plus-sign", "two-headers", "list", "arabic-digit", "empty"])
def test_a_malformed_content_length_is_a_400_problem_and_the_connection_closes(gateway, length_headers):
    """Before: int() raised ValueError inside _serve (or rfile.read(-5) raised), the thread died with a
    traceback on stderr and the client got no answer; two different lengths were read as one."""
    lines = "".join(f"Content-Length: {value}\r\n" for value in length_headers).encode("utf-8")
    reply = exchange(gateway, b"POST /jobs HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\nhello")
    problem = assert_problem(reply, 400)
    assert "Content-Length" in problem["detail"]
    assert reply.closed, "the body's length is unknown: the connection cannot be reused"


def test_the_same_content_length_twice_is_accepted(gateway):
    """RFC 9110 8.6 allows a repeated identical length; before, a list "5, 5" made int() raise."""
    reply = exchange(gateway, b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n"
                              b"Connection: close\r\n\r\nhello")
    assert reply.status == 200 and reply.json()["body"] == "hello"


def test_a_body_over_the_limit_is_a_413_problem_before_any_100_continue(gateway):
    """Before: 413 as application/json {"message": ...}, and 100 Continue was sent first, so a client
    started uploading a body the gateway then refused."""
    too_long = gateway_module.MAX_PAYLOAD_BYTES + 1
    reply = exchange(gateway, f"POST /jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                              f"Content-Length: {too_long}\r\n\r\n".encode())
    assert_problem(reply, 413)
    assert not reply.continued, "no 100 Continue for a body that is refused anyway"
    assert reply.closed


def test_a_body_within_the_limit_gets_100_continue_then_its_answer(gateway):
    """Expect: 100-continue (curl sends it for bodies over 1 KiB) still works now that it is deferred."""
    reply = exchange(gateway, b"POST /jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                              b"Content-Length: 5\r\nConnection: close\r\n\r\nhello")
    assert reply.continued and reply.status == 200 and reply.json()["body"] == "hello"


def test_a_chunked_body_is_decoded_and_forwarded_with_its_length(gateway):
    """Before: Transfer-Encoding: chunked without Content-Length became an empty body, so `curl -T -`,
    requests with a generator or urllib with an iterable silently posted nothing."""
    chunked = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    reply = exchange(gateway, b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                              b"Connection: close\r\n\r\n" + chunked)
    assert reply.status == 200
    assert reply.json() == {"method": "POST", "body": "hello world", "content_length": "11",
                            "transfer_encoding": None}

    host, port = address(gateway)
    connection = http.client.HTTPConnection(host, port, timeout=10)  # what urllib/requests send for a stream
    connection.request("POST", "/jobs", body=iter([b'{"type":', b'"demo.echo"}']), encode_chunked=True)
    answer = connection.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["body"] == '{"type":"demo.echo"}'
    connection.close()


@pytest.mark.parametrize(("body", "status"), [
    (b"zz\r\nhello\r\n0\r\n\r\n", 400),  # not a hex size
    (b"5\r\nhelloXX0\r\n\r\n", 400),  # no CRLF after the chunk
    (b"ffffffffff\r\n", 413),  # a chunk over the limit
    (b"5\r\nhel", 400),  # the client stops mid-chunk and closes
], ids=["bad-size", "no-crlf", "huge-chunk", "cut-short"])
def test_a_broken_chunked_body_is_a_problem_and_closes(gateway, body, status):
    """Before: the chunked framing was ignored, so these bytes were read as the next request's line."""
    with socket.create_connection(address(gateway), timeout=10) as sock:
        sock.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        reply = read_reply(sock)
    assert_problem(reply, status)
    assert reply.closed


# --- oversized and malformed request heads ------------------------------------------------------------------

def test_a_request_line_over_64_kib_is_a_414_problem(gateway):
    """Before: BaseHTTPRequestHandler's HTML 414 page."""
    reply = exchange(gateway, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_problem(reply, 414)
    assert reply.closed


@pytest.mark.parametrize("head", [
    b"".join(b"X-H%d: v\r\n" % n for n in range(120)),  # too many headers
    b"X-Long: " + b"v" * 70_000 + b"\r\n",  # one header line too long
], ids=["too-many", "too-long"])
def test_too_many_or_too_long_headers_are_a_431_problem(gateway, head):
    """Before: BaseHTTPRequestHandler's HTML 431 page, quoting the parser's message."""
    reply = exchange(gateway, b"GET /jobs HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
    problem = assert_problem(reply, 431)
    assert "X-" not in problem["detail"]
    assert reply.closed


@pytest.mark.parametrize("request_line", [
    b"GET /jobs HTTP/<script>alert(1)</script>", b"GET /jobs HTTP/1.1 extra <i>", b"<script>",
    b"GET /jobs HTTP/2.0",
], ids=["bad-version", "four-words", "one-word", "http2"])
def test_a_malformed_request_line_is_a_problem_that_never_echoes_it(gateway, request_line):
    """Before: HTML error pages built from the request line ("Bad request version ('HTTP/<script>...')"),
    some sent as bare HTTP/0.9 bodies without a status line."""
    reply = exchange(gateway, request_line + b"\r\nHost: x\r\n\r\n")
    assert_problem(reply, 400)
    assert b"script" not in reply.body and b"<i>" not in reply.body
    assert reply.closed


def test_an_http_0_9_request_is_refused_with_a_status_line(gateway):
    """Before: `GET /jobs` (HTTP/0.9) was forwarded and answered with a bare body: no status, no headers."""
    reply = exchange(gateway, b"GET /jobs\r\n")
    assert_problem(reply, 400)


# --- stalled and idle clients -------------------------------------------------------------------------------

def test_a_body_that_never_comes_is_a_408_problem_and_the_connection_closes(gateway):
    """Before: rfile.read(100) waited forever with no socket timeout: one thread held per such client."""
    started = time.monotonic()
    with socket.create_connection(address(gateway), timeout=10) as sock:
        sock.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part")
        reply = read_reply(sock)
    assert_problem(reply, 408)
    assert reply.closed
    assert CLIENT_TIMEOUT_S <= time.monotonic() - started < CLIENT_TIMEOUT_S + 3


def test_headers_that_never_end_are_a_408_problem(gateway):
    """Before: parse_headers waited forever for the blank line."""
    with socket.create_connection(address(gateway), timeout=10) as sock:
        sock.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\n")
        reply = read_reply(sock)
    assert_problem(reply, 408)
    assert reply.closed


def test_an_idle_keep_alive_connection_is_closed_quietly(gateway, capfd):
    """Before: an idle keep-alive connection was held open forever (no timeout); a timeout alone would have
    printed "Request timed out" through log_error."""
    with socket.create_connection(address(gateway), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = read_reply(sock, close_wait_s=0.05)
        assert reply.status == 200 and not reply.closed, "kept alive after a good request"
        sock.settimeout(CLIENT_TIMEOUT_S + 3)
        assert sock.recv(1) == b"", "closed, without an answer, after the idle timeout"
    time.sleep(0.1)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_client_stalled_mid_body_does_not_block_another_client(gateway):
    """Each connection is read on its own thread: while the first client stalls sending its body, a second
    is answered at once. Before, the first thread waited forever (no timeout) although others were served."""
    with socket.create_connection(address(gateway), timeout=10) as stalled:
        stalled.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nstart")
        started = time.monotonic()
        reply = exchange(gateway, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert reply.status == 200 and time.monotonic() - started < CLIENT_TIMEOUT_S
        assert_problem(read_reply(stalled), 408)


# --- the handler's side -------------------------------------------------------------------------------------

def test_a_failing_or_malformed_handler_answer_is_a_500_problem_and_prints_nothing(capfd):
    """Before: a failing handler was answered as application/json {"message": ...}; a handler answer
    with CR/LF in a header value was written as is (a split response), and a malformed one (statusCode
    "abc") raised out of _serve with a traceback."""
    answers = iter([RuntimeError(SECRET), {"statusCode": 200, "headers": {"x-a": "1\r\nSet-Cookie: evil=1"}},
                    {"statusCode": "abc"}])

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with LocalGateway(handler, port=0, client_timeout_s=CLIENT_TIMEOUT_S) as running:
        for _ in range(3):
            reply = exchange(running, f"GET /jobs HTTP/1.1\r\nAuthorization: {SECRET}\r\n\r\n".encode())
            assert_problem(reply, 500)
            assert "set-cookie" not in reply.headers
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err


def test_nothing_of_a_hostile_request_is_echoed_or_printed(gateway, capfd):
    """Before: BaseHTTPRequestHandler's error pages quoted the request line, so a token sent there came back
    in an HTML page (for a bad version as a bare HTTP/0.9 body, no status line), and a bad Content-Length
    printed a traceback."""
    replies = [
        exchange(gateway, f"GET /jobs HTTP/9 {SECRET}\r\nAuthorization: {SECRET}\r\n\r\n".encode()),
        exchange(gateway, f"BREW /{TOKEN} HTTP/1.1\r\nAuthorization: {SECRET}\r\n\r\n".encode()),
        exchange(gateway, f"POST /jobs HTTP/1.1\r\nAuthorization: {SECRET}\r\nContent-Length: x\r\n\r\n"
                          .encode()),
    ]
    assert [reply.status for reply in replies] == [400, 405, 400]
    assert all(TOKEN.encode() not in reply.body for reply in replies)
    time.sleep(0.1)
    captured = capfd.readouterr()
    assert TOKEN not in captured.out + captured.err and "Traceback" not in captured.err


def test_many_hostile_clients_at_once_all_get_answers(gateway):
    """Threads per connection: 20 clients sending broken requests at once each get their problem."""
    statuses: list[int] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        reply = exchange(gateway, f"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: {n}x\r\n\r\n".encode())
        with lock:
            statuses.append(reply.status)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert statuses == [400] * 20


# --- the real API behind the gateway ------------------------------------------------------------------------

def test_the_real_api_behind_the_gateway_answers_hostile_http_with_problems(stack_environment, monkeypatch):
    """The same refusals with onward.api.app.handler behind the gateway, and a good request still served.
    Before: TRACE got an HTML 501 page and a malformed Content-Length killed the connection unanswered."""
    with serve_api(monkeypatch, {"acme": "acme-secret"}, "operator-secret") as url:
        running_address = url.removeprefix("http://").split(":")
        target = (running_address[0], int(running_address[1]))

        def send(raw: bytes) -> RawReply:
            with socket.create_connection(target, timeout=10) as sock:
                sock.sendall(raw)
                return read_reply(sock)

        assert send(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status == 200
        assert_problem(send(b"TRACE /jobs HTTP/1.1\r\nHost: x\r\n\r\n"), 405)
        assert_problem(send(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n"), 400)
        created = send(b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer acme-secret\r\n"
                       b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                       b"Connection: close\r\n\r\n"
                       b"8\r\n{\"type\":\r\nc\r\n\"demo.echo\"}\r\n0\r\n\r\n")
        assert created.status in (201, 202), created


def test_kept_alive_answers_go_out_whole_with_tcp_nodelay(gateway, monkeypatch):
    """Every answer on a kept-alive connection is one write (status, headers and body) on a socket with
    TCP_NODELAY. Written in two parts without it, Nagle's algorithm held each answer's body until the client
    acknowledged its headers, which a client delays up to 40 ms: every request after a connection's first
    took 40 ms (bench/e2e.py's submissions on kept-alive connections ran at half speed)."""
    seen: list[tuple[int, int]] = []  # (TCP_NODELAY of the connection, writes of one answer)
    original_setup, original_serve = _RequestHandler.setup, _RequestHandler._serve

    def setup(handler: _RequestHandler) -> None:
        original_setup(handler)
        writes = []
        write = handler.wfile.write
        handler.wfile.write = lambda data: writes.append(len(data)) or write(data)  # type: ignore[method-assign]
        handler._writes = writes  # type: ignore[attr-defined]

    def serve(handler: _RequestHandler) -> None:
        handler._writes.clear()  # type: ignore[attr-defined]
        original_serve(handler)
        seen.append((handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                     len(handler._writes)))  # type: ignore[attr-defined]

    monkeypatch.setattr(_RequestHandler, "setup", setup)
    monkeypatch.setattr(_RequestHandler, "_serve", serve)
    monkeypatch.setattr(_RequestHandler, "do_POST", serve)
    connection = http.client.HTTPConnection(*address(gateway), timeout=5)
    try:
        for number in range(3):
            connection.request("POST", "/echo", body=json.dumps({"n": number}).encode(),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            assert response.status == 200 and response.read()
    finally:
        connection.close()
    deadline = time.monotonic() + 5  # (the gateway's thread notes the last answer just after writing it)
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(seen) == 3 and all(nodelay for nodelay, _ in seen), seen
    assert all(writes == 1 for _, writes in seen), seen

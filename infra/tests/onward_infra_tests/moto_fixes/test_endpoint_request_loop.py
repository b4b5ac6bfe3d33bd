"""The endpoint's lean request loop reads the requests the SDKs send as http.server reads them.

connections.py's `_plain_request` reads a request straight from the connection's buffer when it is the
SDKs' kind (`POST / HTTP/1.1`, its whole head already received, plain `Name: value` headers, one
Content-Length, no Connection, Expect or Transfer-Encoding header, no name twice, no underscore in a name),
without http.server's parse_request and header parsing; anything else is left to them. Raw requests of
every kind are sent to one endpoint with the loop on and off (the handler's `lean`): the answers must be the
same bytes but for the Date and the request id, and the loop must serve exactly the plain ones.
`_plain_headers` is also checked against the email parser that http.server's parse_headers runs.
"""

from __future__ import annotations

import http.client
import io
import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.moto_fixes import connections, selector_server

pytestmark = pytest.mark.integration

BODY = b"{}"
HEAD = (b"Host: 127.0.0.1\r\nAccept-Encoding: identity\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        b"Content-Type: application/x-amz-json-1.0\r\nUser-Agent: Boto3/1.35 md/Botocore#1.35\r\n")
PLAIN = b"POST / HTTP/1.1\r\n" + HEAD + b"Content-Length: 2\r\n\r\n" + BODY
_CUT = PLAIN.index(b"Content-Length: 2\r\n") + len(b"Content-Length: 2\r")
_VOLATILE = re.compile(rb"(?im)^(date|x-amzn-requestid|x-amz-id-2|x-amz-crc32): .*$")


def _request(line: bytes = b"POST / HTTP/1.1", extra: bytes = b"", length: bytes = b"Content-Length: 2\r\n",
             body: bytes = BODY) -> bytes:
    return line + b"\r\n" + HEAD + extra + length + b"\r\n" + body


# name -> (the chunks sent, each in a write of its own; how many of their requests the lean loop of a
# connection's thread serves (ALL, none, or the plain ones); how many the selector server's own thread serves
# before it hands the connection to a thread: ALL, none, or those before the first that is not plain)
ALL = -1
CASES: dict[str, tuple[list[bytes], int, int]] = {
    "plain": ([PLAIN], ALL, ALL),
    "two in one write": ([PLAIN + PLAIN], ALL, ALL),
    "lowercase names, a value's spaces": ([_request(extra=b"x-pad:  v  \t\r\n", length=b"content-length: 2\r\n")],
                                          ALL, ALL),
    "head in two writes": ([PLAIN[:40], PLAIN[40:]], 0, ALL),
    "head in two writes, cut in its last CRLF": ([PLAIN[:_CUT], PLAIN[_CUT:]], 0, ALL),
    "request line in two writes": ([PLAIN[:6], PLAIN[6:]], 0, ALL),
    "body in two writes": ([PLAIN[:-1], PLAIN[-1:]], ALL, ALL),
    "Expect: 100-continue": ([_request(extra=b"Expect: 100-continue\r\n")], 0, 0),
    "Connection: close": ([_request(extra=b"Connection: close\r\n")], 0, 0),
    "Connection: keep-alive": ([_request(extra=b"Connection: keep-alive\r\n")], 0, 0),
    "a name with an underscore": ([_request(extra=b"X_Thing: 1\r\n")], 0, 0),
    "a name twice": ([_request(extra=b"X-Dup: 1\r\nx-dup: 2\r\n")], 0, 0),
    "two Content-Lengths": ([_request(length=b"Content-Length: 2\r\nContent-Length: 3\r\n")], 0, 0),
    "a signed Content-Length": ([_request(length=b"Content-Length: +2\r\n")], 0, 0),
    "chunked": ([_request(extra=b"Transfer-Encoding: chunked\r\n", length=b"", body=b"2\r\n{}\r\n0\r\n\r\n")],
                0, 0),
    "no Content-Length": ([_request(length=b"", body=b"")], 0, 0),
    "HTTP/1.0": ([_request(line=b"POST / HTTP/1.0")], 0, 0),
    "a query": ([_request(line=b"POST /?a=1 HTTP/1.1")], 0, 0),
    "GET": ([_request(line=b"GET / HTTP/1.1", length=b"", body=b"")], 0, 0),
    "a bare LF": ([_request(extra=b"X-Bare: 1\n")], 0, 0),
    "a continuation line": ([_request(extra=b"X-Folded: 1\r\n 2\r\n")], 0, 0),
    "a line without a colon": ([_request(extra=b"Nonsense\r\n")], 0, 0),
    "plain, then chunked": ([PLAIN + _request(extra=b"Transfer-Encoding: chunked\r\n", length=b"",
                                              body=b"2\r\n{}\r\n0\r\n\r\n")], 1, 1),
    "plain, then GET, then plain": ([PLAIN + _request(line=b"GET / HTTP/1.1", length=b"", body=b"") + PLAIN],
                                    2, 1),
}


def _exchange(port: int, chunks: list[bytes]) -> bytes:
    """Everything the endpoint answers to `chunks` (written apart), the connection half-closed after them."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for number, chunk in enumerate(chunks):
            if number:
                time.sleep(0.1)  # (the server reads the first write before the next arrives)
            connection.sendall(chunk)
        connection.shutdown(socket.SHUT_WR)
        answer = b""
        while part := connection.recv(65536):
            answer += part
    return _VOLATILE.sub(lambda match: match.group(1) + b": -", answer)


@dataclass(frozen=True)
class Answers:
    """What one case's requests were answered, each way, and how many requests each lean way served."""

    threaded: bytes  # a thread per connection, http.server's parsing (the reference)
    lean_thread: bytes  # a thread per connection, its lean loop on
    one_thread: bytes  # the selector server
    lean_thread_served: int
    one_thread_served: int
    handed_off: int  # connections the selector server gave to a thread


@pytest.fixture(scope="module")
def answers() -> Iterator[dict[str, Answers]]:
    served: list[object] = []
    original = connections.KeepAliveRequestHandler._serve_plain_request
    original_answer = selector_server.application_answer
    original_hand_off = selector_server.SelectorServer._hand_off
    inline: list[object] = []
    handed: list[object] = []

    def counting(self: Any, *args: Any) -> None:
        served.append(self)
        original(self, *args)

    def counting_answer(*args: Any) -> Any:
        inline.append(args)
        return original_answer(*args)

    def counting_hand_off(self: Any, *args: Any) -> None:
        handed.append(args)
        original_hand_off(self, *args)

    with ExitStack() as stack:
        threaded = stack.enter_context(EmbeddedEndpoint(one_thread=False))
        one = stack.enter_context(EmbeddedEndpoint(one_thread=True))
        handler = threaded._server.RequestHandlerClass
        threaded_port, one_port = (int(e.url.rpartition(":")[2]) for e in (threaded, one))
        lean = handler.lean  # type: ignore[attr-defined]  # (KeepAliveRequestHandler's)
        connections.KeepAliveRequestHandler._serve_plain_request = counting  # type: ignore[method-assign]
        selector_server.application_answer = counting_answer
        selector_server.SelectorServer._hand_off = counting_hand_off  # type: ignore[method-assign]
        try:
            found = {}
            for name, (chunks, _, _) in CASES.items():
                handler.lean = False  # type: ignore[attr-defined]
                whole = _exchange(threaded_port, chunks)
                handler.lean = True  # type: ignore[attr-defined]
                before = len(served), len(inline), len(handed)
                lean_thread = _exchange(threaded_port, chunks)
                lean_served = len(served) - before[0]
                one_thread = _exchange(one_port, chunks)
                found[name] = Answers(whole, lean_thread, one_thread, lean_served,
                                      len(inline) - before[1], len(handed) - before[2])
        finally:
            handler.lean = lean  # type: ignore[attr-defined]
            connections.KeepAliveRequestHandler._serve_plain_request = original  # type: ignore[method-assign]
            selector_server.application_answer = original_answer
            selector_server.SelectorServer._hand_off = original_hand_off  # type: ignore[method-assign]
        yield found


@pytest.mark.parametrize("case", list(CASES))
def test_the_answer_is_the_same_bytes_every_way(answers: dict[str, Answers], case: str) -> None:
    """The same answer every way: a request a lean way took for plain but is not (a header http.server acts
    on, a body framed otherwise, a head not whole in the buffer), or a connection the selector server handed
    off without what it had read of it, would be answered otherwise, or not at all."""
    found = answers[case]
    assert found.threaded.startswith(b"HTTP/1.")
    assert found.lean_thread == found.threaded
    assert found.one_thread == found.threaded


@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_ways_serve_exactly_the_plain_requests(answers: dict[str, Answers], case: str) -> None:
    """The SDKs' requests take the lean ways (else they would save nothing), and nothing else does: the
    selector server serves a plain connection's requests itself and hands any other connection off, once."""
    chunks, lean_thread, one_thread = CASES[case]
    requests = b"".join(chunks).count(b" HTTP/1.")
    found = answers[case]
    assert found.lean_thread_served == (requests if lean_thread == ALL else lean_thread)
    if one_thread == ALL:
        assert (found.one_thread_served, found.handed_off) == (requests, 0)
    else:
        assert (found.one_thread_served, found.handed_off) == (one_thread, 1)


_NAME = st.text(alphabet="abcXYZ-_: \t\x7f\xe9", min_size=0, max_size=6)
_VALUE = st.text(alphabet="ab1 \t:\r\n\xe9", max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_NAME, st.sampled_from([":", ": ", ":\t", "", " :"]), _VALUE), min_size=1, max_size=5),
       st.booleans())
def test_plain_headers_are_the_email_parsers(lines: list[tuple[str, str, str]], with_length: bool) -> None:
    """`_plain_headers` gives what http.server's parse_headers (the email parser) and the message's items()
    give, or None: a name with a space, a bare CR or LF, a continuation line, a line without a colon, taken
    for a plain header, would show here."""
    text = "\r\n".join(name + colon + value for name, colon, value in lines)
    if with_length:
        text += "\r\nContent-Length: 2"
    head = text.encode("iso-8859-1")
    found = connections._plain_headers(head)
    if found is None:
        return
    message = connections._original_parse_headers(io.BytesIO(head + b"\r\n\r\n"))
    assert found == list(message.items())
    assert not message.defects


def test_the_sdks_headers_are_plain() -> None:
    """The headers botocore sends are read by the loop, as parse_headers reads them."""
    head = PLAIN.split(b"\r\n", 1)[1].split(b"\r\n\r\n")[0]
    expected = http.client.parse_headers(io.BytesIO(head + b"\r\n\r\n"))
    assert connections._plain_headers(head) == list(expected.items())

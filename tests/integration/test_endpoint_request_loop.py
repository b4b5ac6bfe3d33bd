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
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onward.local.endpoint import EmbeddedEndpoint
from onward.local.moto_fixes import connections

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


# name -> (the chunks sent, each in a write of its own, and whether the lean loop serves every request in them)
CASES: dict[str, tuple[list[bytes], bool]] = {
    "plain": ([PLAIN], True),
    "two in one write": ([PLAIN + PLAIN], True),
    "lowercase names, a value's spaces": ([_request(extra=b"x-pad:  v  \t\r\n", length=b"content-length: 2\r\n")],
                                          True),
    "head in two writes": ([PLAIN[:40], PLAIN[40:]], False),
    "head in two writes, cut in its last CRLF": ([PLAIN[:_CUT], PLAIN[_CUT:]], False),
    "Expect: 100-continue": ([_request(extra=b"Expect: 100-continue\r\n")], False),
    "Connection: close": ([_request(extra=b"Connection: close\r\n")], False),
    "Connection: keep-alive": ([_request(extra=b"Connection: keep-alive\r\n")], False),
    "a name with an underscore": ([_request(extra=b"X_Thing: 1\r\n")], False),
    "a name twice": ([_request(extra=b"X-Dup: 1\r\nx-dup: 2\r\n")], False),
    "two Content-Lengths": ([_request(length=b"Content-Length: 2\r\nContent-Length: 3\r\n")], False),
    "a signed Content-Length": ([_request(length=b"Content-Length: +2\r\n")], False),
    "chunked": ([_request(extra=b"Transfer-Encoding: chunked\r\n", length=b"", body=b"2\r\n{}\r\n0\r\n\r\n")],
                False),
    "no Content-Length": ([_request(length=b"", body=b"")], False),
    "HTTP/1.0": ([_request(line=b"POST / HTTP/1.0")], False),
    "a query": ([_request(line=b"POST /?a=1 HTTP/1.1")], False),
    "GET": ([_request(line=b"GET / HTTP/1.1", length=b"", body=b"")], False),
    "a bare LF": ([_request(extra=b"X-Bare: 1\n")], False),
    "a continuation line": ([_request(extra=b"X-Folded: 1\r\n 2\r\n")], False),
    "a line without a colon": ([_request(extra=b"Nonsense\r\n")], False),
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


@pytest.fixture(scope="module")
def answers() -> Iterator[dict[str, tuple[bytes, bytes, int]]]:
    """case -> (its answer with the loop off, with it on, the requests the loop served)."""
    served: list[object] = []
    original = connections.KeepAliveRequestHandler._serve_plain_request

    def counting(self: Any, *args: Any) -> None:
        served.append(self)
        original(self, *args)

    with EmbeddedEndpoint() as endpoint:
        handler = endpoint._server.RequestHandlerClass
        port = int(endpoint.url.rpartition(":")[2])
        lean = handler.lean  # type: ignore[attr-defined]  # (KeepAliveRequestHandler's)
        connections.KeepAliveRequestHandler._serve_plain_request = counting  # type: ignore[method-assign]
        try:
            found = {}
            for name, (chunks, _) in CASES.items():
                handler.lean = False  # type: ignore[attr-defined]
                whole = _exchange(port, chunks)
                handler.lean = True  # type: ignore[attr-defined]
                before = len(served)
                found[name] = (whole, _exchange(port, chunks), len(served) - before)
        finally:
            handler.lean = lean  # type: ignore[attr-defined]
            connections.KeepAliveRequestHandler._serve_plain_request = original  # type: ignore[method-assign]
        yield found


@pytest.mark.parametrize("case", list(CASES))
def test_the_answer_is_the_same_bytes_with_and_without_the_loop(answers: dict[str, tuple[bytes, bytes, int]],
                                                                case: str) -> None:
    """The same answer either way: a request the loop took for plain but is not (a header http.server acts
    on, a body framed otherwise, a head not whole in the buffer) would be answered otherwise, or not at all."""
    whole, lean, _ = answers[case]
    assert whole.startswith(b"HTTP/1.")
    assert lean == whole


@pytest.mark.parametrize("case", list(CASES))
def test_the_loop_serves_exactly_the_plain_requests(answers: dict[str, tuple[bytes, bytes, int]], case: str) -> None:
    """The SDKs' requests take the loop (else it would save nothing), and nothing else does."""
    chunks, plain = CASES[case]
    requests = b"".join(chunks).count(b" HTTP/1.")
    assert answers[case][2] == (requests if plain else 0)


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

"""onward_infra.lean_client.http: botocore's HTTP session for the embedded endpoint, against a scripted server on
127.0.0.1.

Each test's server reads requests off its connections and answers as the test scripts it (framings, closed
connections, silence), so the session's behaviour at every edge is seen on the wire; the answers reach
the test through botocore's own request objects and exceptions, as a client's Endpoint would see them.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from onward.settings import InvalidSetting, Settings
from onward_infra.lean_client import WRAPPER
from onward_infra.lean_client.http import LeanHttpSession, use_lean_http

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\n\r\n{}"


@dataclass
class Scripted:
    """A server whose every connection is handed to `serve(connection, number)`; counts connections and
    keeps every request's raw bytes."""

    serve: Callable[[socket.socket, int], None]
    accepted: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0


def read_request(connection: socket.socket, server: Scripted) -> bytes | None:
    """One request's bytes (headers and a Content-Length body), None at the connection's end."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += connection.recv(65536)
    server.requests.append(head + b"\r\n\r\n" + body)
    return data


@contextmanager
def scripted(serve: Callable[[socket.socket, int], None]) -> Iterator[Scripted]:
    server = Scripted(serve)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server.port = listener.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            server.accepted += 1
            number = server.accepted

            def run(connection: socket.socket = connection, number: int = number) -> None:
                with connection:
                    serve(connection, number)

            threading.Thread(target=run, daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()


@contextmanager
def serving(serve: Callable[[Scripted, socket.socket, int], None]) -> Iterator[Scripted]:
    holder: list[Scripted] = []
    with scripted(lambda connection, number: serve(holder[0], connection, number)) as server:
        holder.append(server)
        yield server


def request(port: int, body: bytes = b'{"TableName": "t"}', *, path: str = "/", read_timeout: float | None = None
            ) -> AWSRequest:
    prepared = AWSRequest(method="POST", url=f"http://127.0.0.1:{port}{path}", data=body,
                          headers={"X-Amz-Target": "DynamoDB_20120810.GetItem",
                                   "Content-Type": "application/x-amz-json-1.0"}).prepare()
    if read_timeout is not None:
        prepared.context["read_timeout"] = read_timeout
    return prepared


def answering(*answers: bytes) -> Callable[[Scripted, socket.socket, int], None]:
    """Each request on a connection gets the next answer (the last one repeated)."""
    def serve(server: Scripted, connection: socket.socket, _: int) -> None:
        for index in range(10_000):
            if read_request(connection, server) is None:
                return
            connection.sendall(answers[min(index, len(answers) - 1)])
    return serve


def test_answers_are_read_whole_and_the_connection_is_kept_for_the_next_request() -> None:
    """Breaks if a connection is not reused (each request pays a connect, the endpoint a thread) or the body
    and status are not what the server sent."""
    with serving(answering(OK)) as server:
        session = LeanHttpSession()
        for _ in range(3):
            response = session.send(request(server.port))
            assert (response.status_code, response.content) == (200, b"{}")
            assert response.headers["content-type"] == "application/x-amz-json-1.0"  # case-insensitive
        assert server.accepted == 1
        session.close()


def test_the_request_on_the_wire_carries_what_botocore_prepared() -> None:
    """Breaks if the target, Host, Content-Length, a header or the body are not written as HTTP/1.1 wants."""
    with serving(answering(OK)) as server:
        session = LeanHttpSession()
        session.send(request(server.port, b'{"Key": "\xc3\xa9"}', path="/a/b?x=1&y=2"))
        raw = server.requests[0]
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"POST /a/b?x=1&y=2 HTTP/1.1"
        assert f"Host: 127.0.0.1:{server.port}".encode() in lines
        assert b"X-Amz-Target: DynamoDB_20120810.GetItem" in lines
        assert b"Content-Length: 13" in lines
        assert body == b'{"Key": "\xc3\xa9"}'
        session.close()


def test_repeated_fields_are_joined_folded_ones_continued_and_chunks_decoded() -> None:
    """Breaks if a repeated header keeps only one value (urllib3 joins them: botocore's ResponseMetadata would
    differ), a folded line is taken for a field, or a chunked body is not decoded."""
    chunked = (b"HTTP/1.1 200 OK\r\nServer: Werkzeug\r\nServer: amazon.com\r\nX-Long: a\r\n  b\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n")
    with serving(answering(chunked, OK)) as server:
        session = LeanHttpSession()
        response = session.send(request(server.port))
        assert response.content == b"abcde"
        assert response.headers["server"] == "Werkzeug, amazon.com"
        assert response.headers["x-long"] == "a b"
        assert session.send(request(server.port)).content == b"{}"  # the chunked answer was read to its end
        assert server.accepted == 1
        session.close()


def test_an_answer_that_closes_or_is_framed_by_the_end_is_not_kept() -> None:
    """Breaks if a connection the server closes after answering (Connection: close, or a body read to the
    connection's end) is reused: the next request would find it ended."""
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    unframed = b"HTTP/1.1 200 OK\r\n\r\n{\"a\": 1}"

    def serve(server: Scripted, connection: socket.socket, number: int) -> None:
        if read_request(connection, server) is not None:
            connection.sendall(closing if number == 1 else unframed)
            connection.shutdown(socket.SHUT_WR)

    with serving(serve) as server:
        session = LeanHttpSession()
        assert session.send(request(server.port)).content == b"{}"
        assert session.send(request(server.port)).content == b'{"a": 1}'
        assert session.send(request(server.port)).content == b'{"a": 1}'
        assert server.accepted == 3
        session.close()


def test_an_idle_connection_the_endpoint_ended_is_replaced_without_an_error() -> None:
    """Breaks if a kept connection the endpoint closed meanwhile (restarted, stopping) fails the next request:
    nothing was answered on it, so the request goes on a new connection, as urllib3 does."""
    def serve(server: Scripted, connection: socket.socket, number: int) -> None:
        if read_request(connection, server) is not None:
            connection.sendall(OK)  # then the connection ends (keep-alive announced, but closed)

    with serving(serve) as server:
        session = LeanHttpSession()
        assert session.send(request(server.port)).status_code == 200
        time.sleep(0.05)
        assert session.send(request(server.port)).status_code == 200
        assert server.accepted == 2
        session.close()


def test_a_kept_connection_ended_while_the_request_was_sent_is_retried_on_a_new_one() -> None:
    """The endpoint ends the idle connection after the session checked it: the request finds the end before
    any answer. Breaks if that is an error (only a connection that answered part of something cannot be
    retried by the session)."""
    def serve(server: Scripted, connection: socket.socket, number: int) -> None:
        if read_request(connection, server) is None:
            return
        connection.sendall(OK)
        if number == 1 and read_request(connection, server) is not None:
            return  # read the second request and end without answering it

    with serving(serve) as server:
        session = LeanHttpSession()
        session.send(request(server.port))
        assert session.send(request(server.port)).content == b"{}"
        assert server.accepted == 2 and len(server.requests) == 3
        session.close()


def test_an_answer_cut_short_is_a_closed_connection_not_a_short_body() -> None:
    """Breaks if a body shorter than its Content-Length is returned (botocore would parse half an answer) or
    retried by the session (part of an answer came: the request may have been applied; botocore's retry
    policy decides)."""
    def serve(server: Scripted, connection: socket.socket, _: int) -> None:
        if read_request(connection, server) is not None:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\"")

    with serving(serve) as server:
        session = LeanHttpSession()
        with pytest.raises(ConnectionClosedError):
            session.send(request(server.port))
        assert len(server.requests) == 1
        session.close()


def test_a_fresh_connection_ended_before_an_answer_is_a_closed_connection() -> None:
    """Breaks if the session retries on new connections forever, or returns something for no answer."""
    def serve(server: Scripted, connection: socket.socket, _: int) -> None:
        read_request(connection, server)

    with serving(serve) as server:
        session = LeanHttpSession()
        with pytest.raises(ConnectionClosedError):
            session.send(request(server.port))
        assert server.accepted == 1
        session.close()


def test_silence_is_a_read_timeout_and_a_refused_port_a_connection_error() -> None:
    """Breaks if a stalled endpoint blocks the caller forever (botocore's read_timeout, or the request's own
    override, must hold) or if either failure is not the botocore exception its retries expect."""
    answered = threading.Event()

    def serve(server: Scripted, connection: socket.socket, _: int) -> None:
        read_request(connection, server)
        answered.wait(5)

    with serving(serve) as server:
        with pytest.raises(ReadTimeoutError):
            LeanHttpSession(read_timeout=0.2).send(request(server.port))
        with pytest.raises(ReadTimeoutError):
            LeanHttpSession(read_timeout=30).send(request(server.port, read_timeout=0.2))
        answered.set()
    unused = socket.socket()
    unused.bind(("127.0.0.1", 0))
    port = unused.getsockname()[1]
    unused.close()
    with pytest.raises(EndpointConnectionError):
        LeanHttpSession().send(request(port))


def test_an_interim_answer_is_followed_by_the_answer() -> None:
    """Breaks if a 100 Continue is returned as the answer."""
    with serving(answering(b"HTTP/1.1 100 Continue\r\n\r\n" + OK)) as server:
        session = LeanHttpSession()
        response = session.send(request(server.port))
        assert (response.status_code, response.content) == (200, b"{}")
        session.close()


def test_a_forked_child_opens_connections_of_its_own() -> None:
    """Breaks if a child forked from a process with kept connections (the worker forks its handlers' process)
    keeps them: parent and child would read each other's answers off one socket."""
    with serving(answering(OK)) as server:
        session = LeanHttpSession()
        session.send(request(server.port))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its copy of the session has no connection; its request opens one
            try:
                kept = sum(len(connections) for connections in session._idle.values())
                ok = session.send(request(server.port)).status_code == 200
                os.write(write, b"%d %d" % (kept, ok))
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 100) == b"0 1"
        assert session.send(request(server.port)).status_code == 200
        assert server.accepted == 2
        session.close()


def test_the_transport_is_for_a_plain_http_endpoint_only() -> None:
    """Breaks if the lean client is accepted for AWS (no endpoint) or for TLS, which the session does not
    speak, if ONWARD_CLIENT_WRAPPER takes a malformed or missing name, or if the wrapper does not reach the
    clients of the JSON services (and only theirs)."""
    lean_wrapper = {"ONWARD_CLIENT_WRAPPER": WRAPPER, "AWS_DEFAULT_REGION": "us-east-1"}
    with pytest.raises(ValueError, match="plain-HTTP"):
        Settings.from_environment(lean_wrapper).client("dynamodb")
    with pytest.raises(ValueError, match="plain-HTTP"):
        Settings.from_environment({**lean_wrapper, "AWS_ENDPOINT_URL": "https://127.0.0.1:1"}).client("dynamodb")
    with pytest.raises(InvalidSetting, match=r"package\.module:function"):
        Settings.from_environment({"ONWARD_CLIENT_WRAPPER": "not a name"})
    missing = Settings.from_environment({**lean_wrapper, "ONWARD_CLIENT_WRAPPER": "onward_infra.nowhere:wrap"})
    with pytest.raises(InvalidSetting, match="cannot be imported"):
        missing.client("dynamodb")
    local = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "us-east-1"}
    lean = Settings.from_environment({**local, "ONWARD_CLIENT_WRAPPER": WRAPPER})
    for service in ("dynamodb", "dynamodbstreams", "kinesis"):
        assert isinstance(lean.client(service)._endpoint.http_session, LeanHttpSession)
    assert not isinstance(lean.client("cloudformation")._endpoint.http_session, LeanHttpSession)
    assert not isinstance(Settings.from_environment(local).client("dynamodb")._endpoint.http_session,
                          LeanHttpSession)
    import boto3

    secure = boto3.client("dynamodb", endpoint_url="https://127.0.0.1:1", region_name="us-east-1")
    with pytest.raises(ValueError, match="plain-HTTP"):
        use_lean_http(secure)

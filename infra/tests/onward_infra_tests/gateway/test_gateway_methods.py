"""What a client sends the local gateway (infra/onward_infra/gateway.py) never earns a 5xx: methods it does not
forward, transfer codings it does not decode and HTTP versions it does not serve are the client's to fix,
so they are 4xx problems (405 with `Allow`, or 400), over raw sockets.

Without the gateway's own check of the method (its parse_request), BaseHTTPRequestHandler answers any method
without a `do_<METHOD>` with 501; without `is_chunked` refusing every coding list but `chunked` alone with
400, `gzip, chunked` is a 501; without send_error turning the base class's refusals into 4xx, `HTTP/2.0` is
a 505. A 5xx tells a client to retry the same request later, and counts against the API's error alarms.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onward_infra.gateway import FORWARDED_METHODS, LocalGateway
from onward_infra_tests.gateway.raw_http import assert_problem, echo_handler, exchange
from onward_infra_tests.gateway.served_api import serve_api

pytestmark = pytest.mark.integration

CLIENT_TIMEOUT_S = 0.5
TCHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # RFC 9110 5.6.2
ODD_METHODS = ["QUERY", "PROPFIND", "MKCOL", "LOCK", "BREW", "M-SEARCH", "PRI", "get", "Post", "X" * 200,
               "TRACE", "CONNECT"]
ODD_CODINGS = ["gzip, chunked", "chunked, chunked", "deflate, chunked", "br, chunked", "x-custom, chunked",
               "gzip", "identity", "chunked, gzip", "chunked;q=1", ", ,", "gzip\r\nTransfer-Encoding: chunked"]


@pytest.fixture(scope="module")
def gateway() -> Iterator[LocalGateway]:
    with LocalGateway(echo_handler, port=0, client_timeout_s=CLIENT_TIMEOUT_S) as running:
        yield running


def allowed(header: str) -> list[str]:
    return [method.strip() for method in header.split(",")]


@pytest.mark.parametrize("method", ODD_METHODS)
def test_a_method_the_gateway_does_not_forward_is_a_405_naming_the_forwarded_methods(gateway, method):
    """QUERY, WebDAV's methods, a lower-case `get` (methods are case-sensitive), TRACE, CONNECT: 405 with
    Allow listing what the gateway forwards (API Gateway's HTTP API methods), never echoing the method.
    Before: 501 (BaseHTTPRequestHandler's answer for a method with no do_<METHOD>), for all but TRACE and
    CONNECT."""
    reply = exchange(gateway, f"{method} /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello".encode())
    problem = assert_problem(reply, 405)
    assert allowed(reply.headers["allow"]) == list(FORWARDED_METHODS)
    assert method not in json.dumps(problem)
    assert reply.closed, "the body was not read: the connection cannot be reused"


@pytest.mark.parametrize("method", ["F<b>OO", "GE(T", 'G"T', "GET/", "\x7fGET"])
def test_a_method_that_is_not_an_http_token_is_a_400_that_does_not_echo_it(gateway, method):
    """A request line whose method has characters no method can have is malformed (400). Before: 501, and
    the method reached `hasattr(self, "do_" + method)`."""
    reply = exchange(gateway, f"{method} /jobs HTTP/1.1\r\nHost: x\r\n\r\n".encode("latin-1"))
    problem = assert_problem(reply, 400)
    assert b"<b>" not in reply.body and method not in json.dumps(problem)
    assert reply.closed


@pytest.mark.parametrize("codings", ["chunked\r\nContent-Length: 5", *ODD_CODINGS])
def test_transfer_codings_other_than_chunked_alone_are_a_400_that_closes(gateway, codings):
    """Only `chunked` alone is decoded; anything else (another coding before it, chunked twice, chunked
    not last, with Content-Length: a request-smuggling shape) leaves the body's framing unknown to the
    gateway, so the connection closes after a 400 naming what it decodes. Before: `gzip, chunked` and
    `chunked, chunked` were 501s."""
    reply = exchange(gateway, f"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {codings}\r\n\r\n"
                              "5\r\nhello\r\n0\r\n\r\n".encode())
    problem = assert_problem(reply, 400)
    assert "chunked" in problem["detail"]
    assert reply.closed


@pytest.mark.parametrize("request_line", ["GET /jobs HTTP/2.0", "PRI * HTTP/2.0", "GET /jobs HTTP/3.1",
                                          "GET /jobs HTTP/10.0", "GET /jobs HTTP/0.9", "GET /jobs HTTP/1.9"])
@pytest.mark.parametrize("framing", ["", "Transfer-Encoding: chunked\r\n"])
def test_an_http_version_the_gateway_does_not_serve_is_a_400(gateway, request_line, framing):
    """HTTP/2 and later over this HTTP/1.1 connection: 400 naming the versions served. Before: 505. HTTP/0.9
    or 1.9 named in a request line: 400 too; before, the base class took them, and for "HTTP/0.9" wrote no
    headers, so the answer failed unsent (the connection closed without a word, found by the fuzz below)."""
    reply = exchange(gateway, f"{request_line}\r\nHost: x\r\n{framing}\r\n0\r\n\r\n".encode())
    problem = assert_problem(reply, 400)
    assert "HTTP/1.1" in problem["detail"]
    assert reply.closed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.one_of(st.sampled_from([*FORWARDED_METHODS, *ODD_METHODS]), st.text(TCHARS, min_size=1,
                                                                                     max_size=24)),
       codings=st.lists(st.sampled_from(["chunked", "gzip", "deflate", "identity", "x-zz", "CHUNKED", " "]),
                        max_size=3),
       version=st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.9", "HTTP/0.9"]))
def test_nothing_a_client_sends_of_methods_codings_and_versions_is_a_5xx(gateway, method, codings, version):
    """Fuzzed method tokens, Transfer-Encoding lists and HTTP versions, with a chunked body: every answer is
    under 500, and a refusal is a problem. Before: unknown methods and codings were 501, HTTP/2.0 was 505."""
    coding_header = f"Transfer-Encoding: {', '.join(codings)}\r\n" if codings else "Content-Length: 19\r\n"
    reply = exchange(gateway, f"{method} /jobs {version}\r\nHost: x\r\n{coding_header}Connection: close\r\n\r\n"
                              "5\r\nhello\r\n0\r\n\r\n".encode(), head=method == "HEAD")
    assert reply.status < 500, (method, codings, version, reply)
    if reply.status >= 400 and method != "HEAD":
        assert_problem(reply, reply.status)


def test_the_real_api_behind_the_gateway_answers_odd_methods_and_codings_with_4xx(stack_environment, monkeypatch):
    """The same with onward.api.app.handler behind the gateway: QUERY and a coded body are refused by the
    gateway (405, 400), and a method the gateway forwards but a route does not have is the handler's 405
    with that route's Allow."""
    with serve_api(monkeypatch, {"acme": "acme-secret"}, "operator-secret") as url:
        assert_problem(exchange(url, b"QUERY /jobs HTTP/1.1\r\nHost: x\r\n\r\n"), 405)
        assert_problem(exchange(url, b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked"
                                     b"\r\n\r\n0\r\n\r\n"), 400)
        patched = exchange(url, b"PATCH /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert_problem(patched, 405)
        assert allowed(patched.headers["allow"]) == ["GET"]

"""Sends one signed delivery over HTTP(S) to an address checked at the moment of sending: the host is resolved,
EVERY address it answers must pass the URL rules (onward.domain.webhooks.UrlRules), and the connection goes to
the first of those same addresses while the Host header and the TLS server name stay the URL's host (so the
certificate is still verified against it). A name that resolved to a public address at registration and to
169.254.169.254 now (DNS rebinding) is refused here, and no second lookup happens between check and connect.
Redirects are not followed (a 3xx is a failed send). `timeout_s` bounds the connect and each read and write.

The standard library's http.client, not a third-party client: the Lambda functions ship the onward package
alone over the runtime's boto3 and the Powertools layer (Makefile's build targets), and a pinned connection
is one small override of `connect` (ssl.SSLContext.wrap_socket's server_hostname does SNI and the hostname check:
https://docs.python.org/3/library/ssl.html#ssl.SSLContext.wrap_socket).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from onward.domain.webhooks import Address, UnsafeWebhookUrl, UrlRules

DEFAULT_TIMEOUT_S = 5.0
USER_AGENT = "Onward-Webhooks/1"
MAX_ANSWER_BYTES = 4096  # what is read of an answer's body (its status is what counts)

Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (an address literal resolves to itself); [] when it resolves to none."""
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return []
    return sorted({str(info[4][0]) for info in found})


def checked_addresses(rules: UrlRules, url: str, resolver: Resolver = resolve) -> list[Address]:
    """The addresses a delivery to `url` may connect to now; UnsafeWebhookUrl when the URL or any of them fails."""
    host, port = rules.host_of(url)
    return rules.check(url, resolver(host, port))


@dataclass(frozen=True)
class SendOutcome:
    delivered: bool
    status_code: int | None = None
    error: str | None = None


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHttps(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        plain = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(plain, server_hostname=self.host)


class HttpSender:
    """POSTs a delivery; safe to share between threads (a connection per send)."""

    def __init__(self, rules: UrlRules, timeout_s: float = DEFAULT_TIMEOUT_S, resolver: Resolver = resolve,
                 tls: ssl.SSLContext | None = None) -> None:
        self._rules = rules
        self._resolver = resolver
        self._timeout_s = timeout_s
        self._tls = tls or ssl.create_default_context()

    def send(self, url: str, body: bytes, headers: dict[str, str]) -> SendOutcome:
        try:
            addresses = checked_addresses(self._rules, url, self._resolver)
        except UnsafeWebhookUrl as refusal:
            return SendOutcome(False, error=f"refused: {refusal}")
        parts = urlsplit(url)
        host, port = self._rules.host_of(url)
        connection: http.client.HTTPConnection = (
            _PinnedHttps(host, port, str(addresses[0]), self._timeout_s, self._tls) if parts.scheme == "https"
            else _PinnedHttp(host, port, str(addresses[0]), self._timeout_s))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("POST", target, body=body, headers={
                **headers, "Content-Type": "application/json", "User-Agent": USER_AGENT})
            answer = connection.getresponse()
            answer.read(MAX_ANSWER_BYTES)
        except TimeoutError:
            return SendOutcome(False, error="timed out")
        except (OSError, http.client.HTTPException) as error:
            return SendOutcome(False, error=f"{type(error).__name__}: {error}"[:300])
        finally:
            connection.close()
        if 200 <= answer.status < 300:
            return SendOutcome(True, answer.status)
        return SendOutcome(False, answer.status, f"answered {answer.status}")

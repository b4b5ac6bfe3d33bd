"""The client's integration tests run against the whole platform as `onward up` runs it (workers, reaper,
heartbeats, relay and projector pollers, the HTTP API behind the local gateway) on the embedded endpoint, with
the tokens below, and a transport that counts what the client sent and what it got back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from onward.bootstrap import Deployment
from onward.runtime.demo_jobs import registry
from onward_infra.platform import LocalPlatform, PlatformOptions

TOKENS = {"acme": "acme-client-secret", "globex": "globex-client-secret"}
OPERATOR = "operator-client-secret"


@pytest.fixture
def platform(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPlatform]:
    monkeypatch.setenv("ONWARD_TOKENS", ",".join(f"{tenant}={secret}" for tenant, secret in TOKENS.items()))
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", OPERATOR)
    monkeypatch.setenv("ONWARD_JOB_TYPES", ",".join(sorted(registry.types)))
    options = PlatformOptions(workers=2, lease_s=3.0, heartbeat_interval_s=0.4, poll_idle_s=0.1, http_port=0)
    with LocalPlatform(Deployment.from_environment(), registry, options) as running:
        yield running


@dataclass
class Seen:
    """What went over the wire: (method, path, status) per answer, the If-None-Match of each GET."""

    answers: list[tuple[str, str, int]] = field(default_factory=list)
    conditional: list[str | None] = field(default_factory=list)

    def statuses(self, method: str, prefix: str) -> list[int]:
        return [status for sent, path, status in self.answers if sent == method and path.startswith(prefix)]


class CountingTransport(httpx.HTTPTransport):
    def __init__(self, seen: Seen) -> None:
        super().__init__()
        self.seen = seen

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.seen.answers.append((request.method, request.url.path, response.status_code))
        if request.method == "GET":
            self.seen.conditional.append(request.headers.get("If-None-Match"))
        return response


class AsyncCountingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, seen: Seen) -> None:
        super().__init__()
        self.seen = seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.seen.answers.append((request.method, request.url.path, response.status_code))
        return response

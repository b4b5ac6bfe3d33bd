"""What the HTTP API tests share: the API served on 127.0.0.1 by the local gateway with given tokens, and
one HTTP call that answers 4xx/5xx as values instead of exceptions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from onward_infra.gateway import LocalGateway


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: Any  # decoded JSON, None when empty


def http_call(url: str, method: str, path: str, *, token: str | None = None, body: Any = None,
              raw: bytes | None = None, headers: dict[str, str] | None = None) -> HttpAnswer:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, method=method, headers=dict(headers or {}))
    if data is not None and not any(name.lower() == "content-type" for name in (headers or {})):
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, reply_headers, payload = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, reply_headers, payload = error.code, dict(error.headers), error.read()
    return HttpAnswer(status, {k.lower(): v for k, v in reply_headers.items()},
                      json.loads(payload) if payload else None)


@contextmanager
def serve_api(monkeypatch: pytest.MonkeyPatch, tokens: dict[str, str], operator: str) -> Iterator[str]:
    """The API with these local tokens (the default job types), on an ephemeral port; yields its URL. The
    deployment's environment must already be in os.environ (the `stack_environment` fixture): the API takes
    the Deployment of the environment it finds (onward/bootstrap.py), this test's."""
    monkeypatch.setenv("ONWARD_TOKENS", ",".join(f"{tenant}={secret}" for tenant, secret in tokens.items()))
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", operator)
    monkeypatch.delenv("ONWARD_AUTH", raising=False)
    monkeypatch.delenv("ONWARD_JOB_TYPES", raising=False)
    with LocalGateway(port=0) as gateway:
        yield gateway.url

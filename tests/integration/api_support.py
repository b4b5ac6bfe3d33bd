"""What the HTTP API tests share: the API served on 127.0.0.1 by the local gateway with given tokens
(`serve_api`, from the local stack's tests, which serve it too), and one HTTP call that answers 4xx/5xx as
values instead of exceptions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from onward_infra_tests.gateway.served_api import serve_api

__all__ = ["HttpAnswer", "http_call", "serve_api"]


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

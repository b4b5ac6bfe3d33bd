"""The product's HTTP API served on 127.0.0.1 by the local gateway with given tokens: what the gateway's tests
put behind it, and the product's API tests use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from onward_infra.gateway import LocalGateway


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

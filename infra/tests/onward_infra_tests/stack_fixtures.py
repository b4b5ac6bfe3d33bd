"""The embedded AWS endpoint as pytest fixtures, shared by the product's tests and the local stack's own (the
repository's conftest.py loads this plugin for both): one endpoint per test session (real HTTP on 127.0.0.1)
and a deployment of template.yaml per test (`environment`), so tests never see each other's jobs:

- a test that runs the stream pipeline (asks for `pipeline`) or is marked `own_stack` gets a stack of its
  own, freshly deployed: streams and Kinesis start empty only there;
- any other test borrows the session's shared stack (onward_infra.shared_stack.SharedStack), every table emptied and
  checked empty before it is handed over. A test that reads or writes a stream (or changes a table, stream
  or queue) on it errors at teardown: mark it `own_stack`. One that leaves a thread running, or anything
  that names the stack between tests, gets the shared stack replaced by a fresh one.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from onward.settings import Settings
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.shared_stack import SharedStack

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

_stack_numbers = itertools.count()
# AWS's topology, not the fastest: every table's DynamoDB stream has several open shards (a test that needs
# one, or splits, says so with an endpoint of its own).
SESSION_STREAM_SHARDS = 4


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "own_stack: a fresh stack of its own (it reads streams), not the shared one")


@pytest.fixture(scope="session")
def endpoint() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint(stream_shards=SESSION_STREAM_SHARDS) as running:
        yield running


@pytest.fixture(scope="session")
def shared_stack(endpoint: EmbeddedEndpoint) -> SharedStack:
    return SharedStack(endpoint)


@pytest.fixture
def environment(request: pytest.FixtureRequest, endpoint: EmbeddedEndpoint,
                shared_stack: SharedStack) -> Iterator[dict[str, str]]:
    """A deployment of template.yaml's data resources with every table empty, as the environment naming them:
    a fresh one for a test that asks for `pipeline` or is marked `own_stack`, else the shared one (above)."""
    if "pipeline" in request.fixturenames or request.node.get_closest_marker("own_stack"):
        yield endpoint.deploy(f"test-{next(_stack_numbers)}").environment
        return
    yield shared_stack.lend().environment
    if misuse := shared_stack.give_back():
        pytest.fail(f"{request.node.nodeid} made {misuse} on the shared stack: mark it own_stack", pytrace=False)


@pytest.fixture
def settings(environment: dict[str, str], endpoint: EmbeddedEndpoint) -> Settings:
    return Settings.from_environment(environment)


@pytest.fixture
def dynamodb(endpoint: EmbeddedEndpoint) -> Any:
    return endpoint.client("dynamodb")


@pytest.fixture
def stack_environment(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The deployment's environment in os.environ, as Lambda would give it to the handlers."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    return environment

"""Shared fixtures: one embedded AWS endpoint per test session (real HTTP on 127.0.0.1) and a deployment of
template.yaml per test (`environment`), so tests never see each other's jobs:

- a test that runs the stream pipeline (asks for `pipeline`) or is marked `own_stack` gets a stack of its
  own, freshly deployed: streams and Kinesis start empty only there;
- any other test borrows the session's shared stack (onward_infra.endpoint.SharedStack), every table emptied and
  checked empty before it is handed over. A test that reads or writes a stream (or changes a table, stream
  or queue) on it errors at teardown: mark it `own_stack`. One that leaves a thread running, or anything
  that names the stack between tests, gets the shared stack replaced by a fresh one.

Tiers, marked at collection: `unit`, `contract`, `e2e` and `soak` by directory; `integration` for every test
that needs the embedded endpoint (it asks for the `endpoint` fixture, or says so with the mark); `fast` for
every test that needs neither the endpoint nor a process of its own (`make test-fast` runs these).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint, SharedStack
from tests.support import ManualClock

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

_stack_numbers = itertools.count()
TESTS = Path(__file__).resolve().parent
DIRECTORY_TIERS = ("unit", "contract", "e2e", "soak")
SLOW_TIERS = ("e2e", "soak")  # by directory, or marked so (a test that runs a tool of its own)
# AWS's topology, not the fastest: every table's DynamoDB stream has several open shards (a test that needs
# one, or splits, says so with an endpoint of its own).
SESSION_STREAM_SHARDS = 4


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "own_stack: a fresh stack of its own (it reads streams), not the shared one")


def _tier_of(path: Path) -> str | None:
    """The tier folder a test file is in (tests/<tier>/..., at any depth: unit and integration mirror onward/'s
    folders inside them)."""
    return path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier_of(Path(str(item.path)).resolve())
        if tier in DIRECTORY_TIERS:
            item.add_marker(tier)
        needs_endpoint = "endpoint" in getattr(item, "fixturenames", ()) or item.get_closest_marker("integration")
        if needs_endpoint and not item.get_closest_marker("integration"):
            item.add_marker("integration")
        if not needs_endpoint and not any(item.get_closest_marker(slow) for slow in SLOW_TIERS):
            item.add_marker("fast")


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
def dynamodb(endpoint: EmbeddedEndpoint):
    return endpoint.client("dynamodb")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(settings: Settings, dynamodb, clock: ManualClock) -> JobStore:
    return JobStore(settings, client=dynamodb, clock=clock)


@pytest.fixture
def stack_environment(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The deployment's environment in os.environ, as Lambda would give it to the handlers."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    return environment


@pytest.fixture
def pipeline(stack_environment, settings, endpoint):
    from onward_infra.pipeline import LocalPipeline

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    return LocalPipeline.build(settings, clients)


# --- the job store on either backend (tests/contract/backends.py) -------------------------------------------

@pytest.fixture
def memory_store(clock: ManualClock) -> JobStore:
    """A JobStore over a fresh in-memory recorder with the ManualClock: no AWS, milliseconds per test."""
    return JobStore.in_memory(clock=clock)


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def store_backend(request: pytest.FixtureRequest, clock: ManualClock):
    """Each backend of the job store in turn: in memory (fast tier), then DynamoDB on the embedded endpoint
    (the `environment` fixture's stack; marked `integration`). Tests on it hold for both, as the contract
    suite does."""
    from tests.contract.backends import DynamoBackend, MemoryBackend

    if request.param == "memory":
        return MemoryBackend(clock)
    return DynamoBackend(clock, request.getfixturevalue("settings"), request.getfixturevalue("dynamodb"))

"""Shared fixtures: one embedded AWS endpoint per test session (real HTTP on 127.0.0.1) and a fresh
CloudFormation stack from template.yaml per test, so tests never see each other's jobs."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from infra.endpoint import EmbeddedEndpoint
from onward.settings import Settings
from onward.store import JobStore
from tests.support import ManualClock

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

_stack_numbers = itertools.count()


@pytest.fixture(scope="session")
def endpoint() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint() as running:
        yield running


@pytest.fixture
def environment(endpoint: EmbeddedEndpoint) -> dict[str, str]:
    """A fresh deployment of template.yaml's data resources, as the environment naming them."""
    return endpoint.deploy(f"test-{next(_stack_numbers)}").environment


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
    from infra.pipeline import LocalPipeline

    clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
    return LocalPipeline.build(settings, clients)

"""The product's fixtures: the job store on the embedded endpoint (`store`, its `clock`), the stream pipeline
run by the local pollers (`pipeline`), and the job store on either backend (`store_backend`, `memory_store`).
The endpoint, its stacks and the tiers come from the repository's conftest.py (one plugin for the product's
tests and the local stack's own: infra/tests/onward_infra_tests/stack_fixtures.py).
"""

from __future__ import annotations

import pytest

from onward.settings import Settings
from onward.store.service import JobStore
from tests.support import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(settings: Settings, dynamodb, clock: ManualClock) -> JobStore:
    return JobStore(settings, client=dynamodb, clock=clock)


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

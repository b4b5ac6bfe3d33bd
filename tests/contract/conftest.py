"""The contract suites' fixtures: each store backend in turn (tests/conftest.py's `store_backend`), and a
store over it."""

from __future__ import annotations

import pytest

from onward.store.service import JobStore
from tests.contract.backends import StoreBackend


@pytest.fixture
def backend(store_backend: StoreBackend) -> StoreBackend:
    return store_backend


@pytest.fixture
def store(backend: StoreBackend) -> JobStore:
    return backend.store()

"""The shared count of a tenant's API requests per quota window (onward.store.ports.request_counts) on both
backends: a window never passes its limit, whatever the grants asked; a grant that does not fit is cut to one
request; tenants and windows are counted apart."""

from __future__ import annotations

from onward.store.dynamo.request_counts import DynamoRequestCounter
from onward.store.memory.request_counts import MemoryRequestCounter
from onward.store.ports.request_counts import RequestCounter
from tests.contract.backends import DynamoBackend, StoreBackend


def counter_of(backend: StoreBackend) -> RequestCounter:
    if isinstance(backend, DynamoBackend):
        return DynamoRequestCounter(backend.client, backend.settings.jobs_table)
    return MemoryRequestCounter()


def test_grants_stop_at_the_windows_limit_the_last_one_cut_to_single_requests(backend: StoreBackend) -> None:
    """Breaks without the condition on `used`: grants would run past the limit (a tenant over its quota)."""
    counter = counter_of(backend)
    taken = [counter.take("acme", 0, 4, 10) for _ in range(5)]
    assert taken == [4, 4, 1, 1, 0]
    assert counter.take("acme", 0, 1, 10) == 0


def test_tenants_and_windows_are_counted_apart(backend: StoreBackend) -> None:
    """Breaks if the key left out the tenant (one tenant's requests spending another's quota) or the window
    (a tenant refused for good once it reached one window's limit)."""
    counter = counter_of(backend)
    assert counter.take("acme", 0, 3, 3) == 3
    assert counter.take("acme", 0, 1, 3) == 0
    assert counter.take("globex", 0, 3, 3) == 3
    assert counter.take("acme", 10_000, 3, 3) == 3

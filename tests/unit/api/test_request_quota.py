"""Each tenant's request quota as the API's execution environments admit requests (onward.api.quota over the
in-memory count): never more than a window's limit across environments, a refusal that says when to retry, no
tenant spending another's quota, and what one request costs in shared writes."""

from __future__ import annotations

import pytest

from onward.api.quota import TenantAllowances
from onward.domain.request_quota import QUOTA_WINDOW_MS, RequestQuota, retry_after_s
from onward.store.memory.request_counts import MemoryRequestCounter

pytestmark = pytest.mark.fast


def admitted(allowances: TenantAllowances, tenant: str, requests: int, now_ms: int) -> int:
    return sum(allowances.admit(tenant, now_ms) is None for _ in range(requests))


def test_a_tenant_over_its_quota_is_refused_until_the_window_turns_and_others_are_not() -> None:
    """Breaks without the quota: a tenant's flood would be admitted whole, taking the API's concurrency from
    every other tenant."""
    allowances = TenantAllowances(RequestQuota(per_second=5), MemoryRequestCounter())
    assert admitted(allowances, "noisy", 200, now_ms=3_000) == 50  # 5 a second over a 10 s window
    refusal = allowances.admit("noisy", 3_000)
    assert refusal is not None and refusal.retry_after_s == 7 == retry_after_s(3_000)
    assert admitted(allowances, "quiet", 10, now_ms=3_000) == 10
    assert admitted(allowances, "noisy", 10, now_ms=QUOTA_WINDOW_MS) == 10


def test_environments_together_never_pass_the_limit_and_each_gets_its_share() -> None:
    """Several execution environments (Lambda's concurrent instances) share one count: breaks if each kept a
    local bucket of the whole quota (N environments, N times the quota)."""
    counter = MemoryRequestCounter()
    quota = RequestQuota(per_second=100)  # 1,000 a window, grants of 20
    environments = [TenantAllowances(quota, counter) for _ in range(10)]
    total = 0
    for _ in range(200):
        total += sum(admitted(environment, "acme", 1, now_ms=0) for environment in environments)
    assert total == quota.window_limit == 1000


def test_a_request_costs_a_shared_write_once_a_grant() -> None:
    """What the quota bills: a write per grant (limit / 50), not per request; a tenant refused for the rest of a
    window costs none."""
    counter = MemoryRequestCounter()
    allowances = TenantAllowances(RequestQuota(per_second=100), counter)
    admitted(allowances, "acme", 3000, now_ms=0)
    assert counter.takes == 50 + 2  # 50 grants of 20, then a grant and a single request found the window spent


def test_no_quota_needs_no_count_and_a_failed_count_admits() -> None:
    """0 is no quota; a count that fails (DynamoDB unreachable) admits the request rather than refuse every
    tenant: breaks if the quota turned its own failure into an outage."""
    assert admitted(TenantAllowances(RequestQuota(per_second=0), None), "acme", 100, now_ms=0) == 100
    with pytest.raises(ValueError, match="needs the shared count"):
        TenantAllowances(RequestQuota(per_second=1), None)

    class Failing:
        def take(self, tenant_id: str, window_start_ms: int, amount: int, limit: int) -> int:
            raise ConnectionError("unreachable")

    assert admitted(TenantAllowances(RequestQuota(per_second=1), Failing()), "acme", 30, now_ms=0) == 30


def test_a_quota_below_one_request_a_window_still_admits_one() -> None:
    assert RequestQuota(per_second=0.01).window_limit == 1
    assert RequestQuota(per_second=0.01).grant == 1

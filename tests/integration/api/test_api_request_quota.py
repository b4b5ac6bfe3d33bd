"""Each tenant's request quota over HTTP on the local stack (the local gateway, the API handler, the count in
the jobs table on the embedded endpoint): a tenant's flood is answered 429 with Retry-After past its quota,
while another tenant and an operator bound to no tenant go on as before."""

from __future__ import annotations

import time

import pytest

from onward.domain.request_quota import QUOTA_WINDOW_MS
from tests.integration.api_support import http_call, serve_api

pytestmark = pytest.mark.integration

TOKENS = {"noisy": "noisy-sec-4e1b7a", "quiet": "quiet-sec-90c3d2"}
OPERATOR = "operator-sec-c81f05"
PER_SECOND = 2  # 20 requests a window


def at_a_window_start() -> float:
    """Wait for the next window to begin (so the flood below falls in one window); when it began."""
    now_ms = time.time() * 1000
    time.sleep((QUOTA_WINDOW_MS - now_ms % QUOTA_WINDOW_MS) / 1000 + 0.05)
    return time.time()


def test_a_tenants_flood_is_refused_past_its_quota_and_no_one_else_is(stack_environment, monkeypatch) -> None:
    """Breaks without the per-tenant quota (the noisy tenant's 30 requests all admitted, nothing refused) and
    with one bucket shared by every tenant (the quiet tenant refused for the noisy one's flood)."""
    monkeypatch.setenv("ONWARD_TENANT_REQUESTS_PER_S", str(PER_SECOND))
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        began = at_a_window_start()
        noisy = [http_call(url, "GET", "/jobs?limit=1", token=TOKENS["noisy"]) for _ in range(30)]
        quiet = [http_call(url, "GET", "/jobs?limit=1", token=TOKENS["quiet"]) for _ in range(10)]
        operator = http_call(url, "GET", "/jobs?limit=1&tenant=noisy", token=OPERATOR)
        elapsed_s = time.time() - began
    assert elapsed_s < QUOTA_WINDOW_MS / 1000, f"the requests took {elapsed_s:.1f} s: more than one window"
    assert [answer.status for answer in noisy] == [200] * 20 + [429] * 10
    refused = noisy[-1]
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.body["type"].endswith("/request-quota")
    assert 1 <= int(refused.headers["retry-after"]) <= QUOTA_WINDOW_MS / 1000
    assert [answer.status for answer in quiet] == [200] * 10
    assert operator.status == 200  # an operator bound to no tenant is not counted against the tenant it reads

"""Each tenant's request quota, as one execution environment of the API admits requests: it holds a grant of
the tenant's current window (onward.domain.request_quota) taken from the shared count (RequestCounter), spends
it one request at a time, and takes the next grant when it runs out. Once the window's limit is reached the
tenant's requests are refused here until the window turns, without another shared write. Requests acting for
no tenant (an operator bound to none) are not counted. Should the shared count fail, the request is admitted
(logged): the quota protects the platform from a noisy tenant, it must not add an outage of its own."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from onward.api.observability import logger
from onward.domain.request_quota import RequestQuota, retry_after_s, window_start
from onward.store.ports.request_counts import RequestCounter


@dataclass
class _Held:
    left: int
    exhausted: bool = False


@dataclass(frozen=True)
class Refusal:
    retry_after_s: int
    per_second: float


class TenantAllowances:
    def __init__(self, quota: RequestQuota, counter: RequestCounter | None) -> None:
        """`counter`: the shared count, None only when the quota is not enforced."""
        if quota.enforced and counter is None:
            raise ValueError("an enforced quota needs the shared count")
        self.quota = quota
        self._counter = counter
        self._held: dict[str, _Held] = {}  # of the current window only: windows are the same for every tenant
        self._window_start_ms = -1
        self._lock = threading.Lock()

    def admit(self, tenant_id: str, now_ms: int) -> Refusal | None:
        """None when the request may go on; the Refusal (when to retry) when the tenant is over its quota."""
        if self._counter is None:
            return None
        window = window_start(now_ms)
        with self._lock:
            if window != self._window_start_ms:
                self._held.clear()
                self._window_start_ms = window
            held = self._held.setdefault(tenant_id, _Held(0))
            if held.left == 0 and not held.exhausted:
                try:
                    held.left = self._counter.take(tenant_id, window, self.quota.grant, self.quota.window_limit)
                except Exception as error:  # noqa: BLE001 - any failure of the shared count admits (see above)
                    logger.warning("request quota not counted: admitted", extra={
                        "tenant_id": tenant_id, "error": type(error).__name__})
                    return None
                held.exhausted = held.left == 0
            if held.exhausted:
                return Refusal(retry_after_s(now_ms), self.quota.per_second)
            held.left -= 1
            return None

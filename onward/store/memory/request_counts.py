"""The in-memory twin of the shared request counts (onward.store.ports.request_counts), for tests and one
process."""

from __future__ import annotations

import threading


class MemoryRequestCounter:
    def __init__(self) -> None:
        self._used: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self.takes = 0  # calls that reached the shared count: what DynamoDB would bill

    def take(self, tenant_id: str, window_start_ms: int, amount: int, limit: int) -> int:
        with self._lock:
            key = (tenant_id, window_start_ms)
            used = self._used.get(key, 0)
            for asked in (amount, 1) if amount > 1 else (amount,):
                self.takes += 1
                if used + asked <= limit:
                    self._used[key] = used + asked
                    return asked
            return 0

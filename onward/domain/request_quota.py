"""A tenant's request quota on the HTTP API: at most `per_second` requests a second, counted per tenant in
windows of QUOTA_WINDOW_MS. A window's allowance is handed to the API's execution environments in grants of
about 1/GRANTS_PER_WINDOW of it (onward.api.quota), so a request costs a shared write only once a grant: a
tenant is never admitted past its window's limit, and gets at least its limit less what the environments
hold unspent when the window turns (at most one grant each)."""

from __future__ import annotations

import math
from dataclasses import dataclass

QUOTA_WINDOW_MS = 10_000
GRANTS_PER_WINDOW = 50


@dataclass(frozen=True)
class RequestQuota:
    per_second: float  # 0: no quota

    @property
    def enforced(self) -> bool:
        return self.per_second > 0

    @property
    def window_limit(self) -> int:
        """Requests a tenant may make in one window."""
        return max(1, math.floor(self.per_second * QUOTA_WINDOW_MS / 1000))

    @property
    def grant(self) -> int:
        """How many of a window's requests an execution environment takes at a time."""
        return max(1, self.window_limit // GRANTS_PER_WINDOW)


def window_start(now_ms: int) -> int:
    return now_ms - now_ms % QUOTA_WINDOW_MS


def retry_after_s(now_ms: int) -> int:
    """Whole seconds until the window of `now_ms` ends (at least 1): a Retry-After header's value."""
    return max(1, math.ceil((window_start(now_ms) + QUOTA_WINDOW_MS - now_ms) / 1000))

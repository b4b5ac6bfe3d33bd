"""Recent claims per tenant, minute by minute: how the workers were shared out lately, for operators.

Every claim commits one outbox event whose status is `running`, so the outbox holds every claim of the window
(onward.store.claim_log; read from its `by_time` index by onward.store.dynamo.claim_log). This counts attempts
started, not worker time: a tenant with long jobs gets fewer claims for the same share of the pool. Worker
time per tenant is kept only as a running total that a returning tenant's lift raises (onward.domain.dispatch:
no banked credit), so no window of it can be read back honestly.

The index is eventually consistent (a claim of the last moment may be missing) and a read is bounded by
`max_examined` outbox entries: the answer says whether it saw the whole window. A count of one tenant's claims
(`tenant_id`) reads none of the other tenants' entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from onward.domain.clock import EpochMs
from onward.store.claim_log import ClaimLog

MAX_EXAMINED = 20_000


@dataclass(frozen=True)
class ClaimCounts:
    """Claims per tenant in each of the window's buckets (oldest first): bucket i covers
    [since_ms + i * bucket_ms, since_ms + (i + 1) * bucket_ms)."""

    since_ms: EpochMs
    until_ms: EpochMs
    bucket_ms: int
    by_tenant: dict[str, list[int]]
    examined: int  # outbox entries read
    complete: bool  # every entry of the window was read

    @property
    def buckets(self) -> int:
        return -(-(self.until_ms - self.since_ms) // self.bucket_ms)

    def total(self, tenant_id: str) -> int:
        return sum(self.by_tenant.get(tenant_id, ()))


class RecentClaims:
    """Counts claims in a recent window from the claims the outbox records."""

    def __init__(self, log: ClaimLog) -> None:
        self._log = log

    def count(self, now_ms: EpochMs, *, window_s: int = 300, bucket_s: int = 60,
              max_examined: int = MAX_EXAMINED, tenant_id: str | None = None) -> ClaimCounts:
        """Every tenant's claims in the window, or only `tenant_id`'s."""
        since = now_ms - window_s * 1000
        bucket_ms = bucket_s * 1000
        buckets = -(-(window_s * 1000) // bucket_ms)
        read = self._log.claims(since, now_ms, max_examined=max_examined, tenant_id=tenant_id)
        by_tenant: dict[str, list[int]] = {}
        for tenant, at in read.claims:
            if not since <= at <= now_ms:
                continue  # decided after this count began
            counts = by_tenant.setdefault(tenant, [0] * buckets)
            counts[min(buckets - 1, (at - since) // bucket_ms)] += 1
        return ClaimCounts(since, now_ms, bucket_ms, by_tenant, read.examined, read.complete)

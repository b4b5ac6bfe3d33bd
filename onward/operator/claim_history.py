"""Recent claims per tenant, minute by minute: how the workers were shared out lately, for operators.

Every claim commits one outbox event whose status is `running` (a cancel request on a running job commits
one too, flagged `cancel_requested`, and is not counted), so the outbox's `by_time` index (partition: the
hour and a time shard, sort: `occurred_at`, the writer's decision time) holds every claim of the window: one
Query per time shard of each hour touched, page after page. This counts attempts started, not worker time:
a tenant with long jobs gets fewer claims for the same share of the pool. Worker time per tenant is kept only
as a running total that a returning tenant's lift raises (onward.domain.dispatch: no banked credit), so no window of
it can be read back honestly.

The index is eventually consistent (a claim of the last moment may be missing) and a read is bounded by
`max_examined` outbox entries: the answer says whether it saw the whole window. A count of one tenant's claims
(`tenant_id`) filters the others out in DynamoDB: none of their entries reaches the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onward.domain.clock import EpochMs, epoch_ms, iso
from onward.domain.states import JobState
from onward.store.dynamo.keys import time_buckets

HOUR_MS = 3_600_000
MAX_EXAMINED = 20_000
QUERY_LIMIT = 1_000


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
    """Counts claims in a recent window from the outbox's `by_time` index."""

    def __init__(self, client: Any, outbox_table: str) -> None:
        self._db = client
        self._table = outbox_table

    def count(self, now_ms: EpochMs, *, window_s: int = 300, bucket_s: int = 60,
              max_examined: int = MAX_EXAMINED, tenant_id: str | None = None) -> ClaimCounts:
        """Every tenant's claims in the window, or only `tenant_id`'s."""
        since = now_ms - window_s * 1000
        bucket_ms = bucket_s * 1000
        buckets = -(-(window_s * 1000) // bucket_ms)
        by_tenant: dict[str, list[int]] = {}
        examined = 0
        buckets_read = [bucket for hour in range(since - since % HOUR_MS, now_ms + 1, HOUR_MS)
                        for bucket in time_buckets(iso(hour)[:13])]
        for bucket in buckets_read:
            request: dict[str, Any] = {
                "TableName": self._table, "IndexName": "by_time",
                "KeyConditionExpression": "time_bucket = :b AND occurred_at >= :since",
                "FilterExpression": "#s = :running AND cancel_requested = :no"
                                    + ("" if tenant_id is None else " AND tenant_id = :t"),
                "ProjectionExpression": "tenant_id, occurred_at",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":b": {"S": bucket}, ":since": {"S": iso(since)},
                                              ":running": {"S": JobState.RUNNING.value}, ":no": {"BOOL": False},
                                              **({} if tenant_id is None else {":t": {"S": tenant_id}})},
            }
            start: dict[str, Any] | None = None
            while True:
                if examined >= max_examined:
                    return ClaimCounts(since, now_ms, bucket_ms, by_tenant, examined, complete=False)
                page = self._db.query(**request, Limit=min(QUERY_LIMIT, max_examined - examined),
                                      **({"ExclusiveStartKey": start} if start else {}))
                examined += page.get("ScannedCount", len(page["Items"]))
                for item in page["Items"]:
                    at = epoch_ms(item["occurred_at"]["S"])
                    if not since <= at <= now_ms:
                        continue  # decided after this count began
                    counts = by_tenant.setdefault(item["tenant_id"]["S"], [0] * buckets)
                    counts[min(buckets - 1, (at - since) // bucket_ms)] += 1
                start = page.get("LastEvaluatedKey")
                if start is None:
                    break
        return ClaimCounts(since, now_ms, bucket_ms, by_tenant, examined, complete=True)

"""The claims of a window from the outbox's `by_time` index (partition: the hour and a time shard, sort:
`occurred_at`, the writer's decision time; keys.py): one Query per time shard of each hour touched, page
after page. A cancel request on a running job commits a `running` event too, flagged `cancel_requested`, and
is not a claim. The index is eventually consistent (a claim of the last moment may be missing). Only one
tenant's claims (`tenant_id`) are filtered in DynamoDB: none of the others' entries reaches the caller."""

from __future__ import annotations

from typing import Any

from onward.domain.clock import EpochMs, epoch_ms, iso
from onward.domain.states import JobState
from onward.store.claim_log import ClaimsRead
from onward.store.dynamo.keys import time_buckets

HOUR_MS = 3_600_000
QUERY_LIMIT = 1_000


class DynamoClaimLog:
    """The claims recorded in a deployment's outbox table (onward.store.claim_log.ClaimLog)."""

    def __init__(self, client: Any, outbox_table: str) -> None:
        self._db = client
        self._table = outbox_table

    def claims(self, since: EpochMs, until: EpochMs, *, max_examined: int,
               tenant_id: str | None = None) -> ClaimsRead:
        found: list[tuple[str, EpochMs]] = []
        examined = 0
        buckets = [bucket for hour in range(since - since % HOUR_MS, until + 1, HOUR_MS)
                   for bucket in time_buckets(iso(hour)[:13])]
        for bucket in buckets:
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
                    return ClaimsRead(found, examined, complete=False)
                page = self._db.query(**request, Limit=min(QUERY_LIMIT, max_examined - examined),
                                      **({"ExclusiveStartKey": start} if start else {}))
                examined += page.get("ScannedCount", len(page["Items"]))
                found += [(item["tenant_id"]["S"], epoch_ms(item["occurred_at"]["S"])) for item in page["Items"]]
                start = page.get("LastEvaluatedKey")
                if start is None:
                    break
        return ClaimsRead(found, examined, complete=True)

"""A status view and its `by_listing` index in memory, answering the reader's requests as DynamoDB would
(onward/pipeline/view.py): Query by `listing_pk`, newest `occurred_at` first, `Limit` entries evaluated,
ExclusiveStartKey, the JobFilter's FilterExpression applied after the limit (ScannedCount counts both),
LastEvaluatedKey when the limit stopped it; BatchGetItem of the rows. Every request is recorded."""

from __future__ import annotations

import threading
from typing import Any

from onward.pipeline.listing import listing_key
from onward.store.dynamo.attributes import to_item


def row(job_id: str, occurred_at: str, status: str = "queued", job_type: str = "demo.echo",
        tenant_id: str = "acme") -> dict[str, Any]:
    return {"job_id": job_id, "tenant_id": tenant_id, "type": job_type, "status": status, "version": 1,
            "attempt": 0, "occurred_at": occurred_at, "projected_at": occurred_at, "digest": "d",
            "listing_pk": listing_key(tenant_id, job_id)}


class FakeListingIndex:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = {r["job_id"]: r for r in rows}  # what the index holds
        self.table = dict(self.rows)  # what the table holds (a test may move a row on without the index)
        self.queries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def query(self, **request: Any) -> dict[str, Any]:
        with self._lock:
            self.queries.append(request)
        assert request["IndexName"] == "by_listing" and request["ScanIndexForward"] is False
        values = request["ExpressionAttributeValues"]
        partition = values[":p"]["S"]
        entries = sorted((r for r in self.rows.values() if r["listing_pk"] == partition),
                         key=lambda r: (r["occurred_at"], r["job_id"]), reverse=True)
        start = request.get("ExclusiveStartKey")
        if start is not None:
            assert start["listing_pk"]["S"] == partition
            after = (start["occurred_at"]["S"], start["job_id"]["S"])
            entries = [r for r in entries if (r["occurred_at"], r["job_id"]) < after]
        evaluated = entries[:request["Limit"]]
        matched = [r for r in evaluated if _passes(r, request.get("FilterExpression"), values)]
        projected = [{name: r[name] for name in ("job_id", "occurred_at", "status", "type", "listing_pk")}
                     for r in matched]
        page: dict[str, Any] = {"Items": [to_item(p) for p in projected], "ScannedCount": len(evaluated)}
        if len(entries) > len(evaluated):
            last = evaluated[-1]
            page["LastEvaluatedKey"] = to_item({"job_id": last["job_id"], "listing_pk": partition,
                                                "occurred_at": last["occurred_at"]})
        return page

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        (table, asked), = RequestItems.items()
        assert asked["ConsistentRead"] is True
        found = [self.table[key["job_id"]["S"]] for key in asked["Keys"] if key["job_id"]["S"] in self.table]
        return {"Responses": {table: [to_item(r) for r in found]}}


def _passes(entry: dict[str, Any], expression: str | None, values: dict[str, Any]) -> bool:
    """The JobFilter's expression (onward.pipeline.view.JobFilter.expression), evaluated on one entry."""
    if expression is None:
        return True
    statuses = {value["S"] for name, value in values.items() if name.startswith(":s")}
    if statuses and entry["status"] not in statuses:
        return False
    if ":ty" in values and entry["type"] != values[":ty"]["S"]:
        return False
    return ":id" not in values or entry["job_id"].startswith(values[":id"]["S"])

"""Reading the status view (the projection the browser reads; the job table stays the authority)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from onward.dynamo import from_item
from onward.models import StatusView

Key = dict[str, Any]  # a DynamoDB LastEvaluatedKey of the by_tenant index
MAX_PAGE_QUERIES = 10  # a status filter can leave pages thin: stop after this many queries


class StatusViewReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, job_id: str) -> StatusView | None:
        item = self._db.get_item(TableName=self._table, Key={"job_id": {"S": job_id}}).get("Item")
        return None if item is None else StatusView.model_validate(from_item(item))

    def for_tenant(
        self, tenant_id: str, *, limit: int, status: str | None = None, start: Key | None = None
    ) -> tuple[list[StatusView], Key | None]:
        """Up to `limit` of a tenant's jobs, the most recently changed first (the `by_tenant` index), with
        only `status` if given; and the key to continue from (None: no more)."""
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": "by_tenant", "ScanIndexForward": False,
            "KeyConditionExpression": "tenant_id = :t", "ExpressionAttributeValues": {":t": {"S": tenant_id}},
        }
        if status is not None:
            request["FilterExpression"] = "#s = :s"
            request["ExpressionAttributeNames"] = {"#s": "status"}
            request["ExpressionAttributeValues"][":s"] = {"S": status}
        views: list[StatusView] = []
        for _ in range(MAX_PAGE_QUERIES):
            page = self._db.query(**request, Limit=limit - len(views),
                                  **({"ExclusiveStartKey": start} if start else {}))
            views.extend(StatusView.model_validate(from_item(item)) for item in page["Items"])
            start = page.get("LastEvaluatedKey")
            if start is None or len(views) >= limit:
                break
        return views, start

    def all(self) -> Iterator[StatusView]:
        """Every view row (a scan: for rebuilds and audits)."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                yield StatusView.model_validate(from_item(item))

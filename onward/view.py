"""Reading the status view (the projection the browser reads; the job table stays the authority)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from onward.dynamo import from_item
from onward.models import StatusView

Key = dict[str, Any]  # a DynamoDB LastEvaluatedKey of the by_tenant index
MAX_PAGE_QUERIES = 10  # a status filter can leave pages thin: stop after this many queries
BATCH_GET_KEYS = 100  # BatchGetItem's limit


class StatusViewReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, job_id: str) -> StatusView | None:
        """The job's row, read consistently: a reader never sees an older version than one read before."""
        item = self._db.get_item(TableName=self._table, Key={"job_id": {"S": job_id}},
                                 ConsistentRead=True).get("Item")
        return None if item is None else StatusView.model_validate(from_item(item))

    def for_tenant(
        self, tenant_id: str, *, limit: int, status: str | None = None, start: Key | None = None
    ) -> tuple[list[StatusView], Key | None]:
        """Up to `limit` of a tenant's jobs, the most recently changed first (the `by_tenant` index), with
        only `status` if given; and the key to continue from (None: no more).

        An index cannot be read consistently, so it only chooses the jobs: their rows are then read
        consistently from the table (one BatchGetItem per page), and a listing never shows a job older than a
        read before it did. A job whose consistent row no longer has `status` is left out."""
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": "by_tenant", "ScanIndexForward": False,
            "KeyConditionExpression": "tenant_id = :t", "ExpressionAttributeValues": {":t": {"S": tenant_id}},
        }
        if status is not None:
            request["FilterExpression"] = "#s = :s"
            request["ExpressionAttributeNames"] = {"#s": "status"}
            request["ExpressionAttributeValues"][":s"] = {"S": status}
        chosen: list[str] = []
        for _ in range(MAX_PAGE_QUERIES):
            page = self._db.query(**request, Limit=limit - len(chosen), ProjectionExpression="job_id",
                                  **({"ExclusiveStartKey": start} if start else {}))
            chosen.extend(item["job_id"]["S"] for item in page["Items"])
            start = page.get("LastEvaluatedKey")
            if start is None or len(chosen) >= limit:
                break
        current = self._consistent(chosen)
        views = [current[job_id] for job_id in chosen if job_id in current
                 and (status is None or current[job_id].status.value == status)]
        return views, start

    def _consistent(self, job_ids: list[str]) -> dict[str, StatusView]:
        """The rows of these jobs, read consistently (BatchGetItem, unprocessed keys asked again)."""
        found: dict[str, StatusView] = {}
        keys = [{"job_id": {"S": job_id}} for job_id in dict.fromkeys(job_ids)]
        for start in range(0, len(keys), BATCH_GET_KEYS):
            request: dict[str, Any] = {self._table: {"Keys": keys[start:start + BATCH_GET_KEYS],
                                                     "ConsistentRead": True}}
            for round_ in itertools.count():
                answer = self._db.batch_get_item(RequestItems=request)
                for item in answer["Responses"].get(self._table, []):
                    view = StatusView.model_validate(from_item(item))
                    found[view.job_id] = view
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(min(1.0, 0.05 * 2 ** round_))  # DynamoDB held some back: ask again, less eagerly
        return found

    def all(self) -> Iterator[StatusView]:
        """Every view row (a scan: for rebuilds and audits)."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                yield StatusView.model_validate(from_item(item))

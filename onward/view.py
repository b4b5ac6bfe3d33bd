"""Reading the status view (the projection the browser reads; the job table stays the authority)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from onward.dynamo import from_item
from onward.models import StatusView


class StatusViewReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, job_id: str) -> StatusView | None:
        item = self._db.get_item(TableName=self._table, Key={"job_id": {"S": job_id}}).get("Item")
        return None if item is None else StatusView.model_validate(from_item(item))

    def all(self) -> Iterator[StatusView]:
        """Every view row (a scan: for rebuilds and audits)."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                yield StatusView.model_validate(from_item(item))

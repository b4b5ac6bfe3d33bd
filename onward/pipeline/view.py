"""Reading the status view (the projection the browser reads; the job table stays the authority)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from onward.domain.models import StatusView
from onward.store.dynamo.attributes import from_item, tenant_string_key
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.tenant_reads import tenant_item

Key = dict[str, Any]  # a DynamoDB LastEvaluatedKey of the by_tenant index
_LISTING_KEY = frozenset({"job_id", "tenant_id", "occurred_at"})  # the by_tenant index key of a view row
MAX_PAGE_QUERIES = 10  # a filter can leave pages thin: stop after this many queries
FILTERED_QUERY_LIMIT = 100  # items one query of a filtered listing evaluates (a match may be rare)
MAX_COUNTED = 10_000  # index entries a count reads at most (newest first); beyond, the counts say so
COUNT_QUERY_LIMIT = 1_000


@dataclass(frozen=True)
class JobFilter:
    """Which of a tenant's jobs a listing shows: any of `statuses` (empty: every status), of `job_type`
    (None: every type), whose id starts with `id_prefix` (None: every id). Statuses are re-checked on the
    consistent rows; type and id never change."""

    statuses: frozenset[str] = field(default_factory=frozenset)
    job_type: str | None = None
    id_prefix: str | None = None

    @property
    def narrows(self) -> bool:
        return bool(self.statuses) or self.job_type is not None or self.id_prefix is not None

    def expression(self) -> dict[str, Any]:
        """The Query's FilterExpression with its names and values ({} when it filters nothing)."""
        terms: list[str] = []
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if self.statuses:
            names["#s"] = "status"
            placeholders = []
            for number, status in enumerate(sorted(self.statuses)):
                values[f":s{number}"] = {"S": status}
                placeholders.append(f":s{number}")
            terms.append(f"#s IN ({', '.join(placeholders)})")
        if self.job_type is not None:
            names["#ty"] = "type"
            values[":ty"] = {"S": self.job_type}
            terms.append("#ty = :ty")
        if self.id_prefix is not None:
            values[":id"] = {"S": self.id_prefix}
            terms.append("begins_with(job_id, :id)")
        if not terms:
            return {}
        request: dict[str, Any] = {"FilterExpression": " AND ".join(terms), "ExpressionAttributeValues": values}
        if names:
            request["ExpressionAttributeNames"] = names
        return request


@dataclass(frozen=True)
class StatusCounts:
    """How many of a tenant's jobs the view holds in each status, over the `examined` newest index entries;
    `complete` when that was all of them."""

    counts: dict[str, int]
    examined: int
    complete: bool


def listing_start(position: object, tenant_id: str) -> Key | None:
    """A position a tenant's listing handed out (`StatusViewReader.for_tenant`'s key to continue from, as the
    caller got it back), to start that tenant's listing from; None when it is not one: it never widens a
    listing to another tenant's jobs."""
    return tenant_string_key(position, _LISTING_KEY, tenant_id)


class StatusViewReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, job_id: str, tenant_id: str | None = None) -> StatusView | None:
        """The job's row, read consistently: a reader never sees an older version than one read before. With
        `tenant_id`, only that tenant's: another tenant's row is None exactly as a missing one, by the same
        read (onward.store.dynamo.tenant_reads)."""
        key = {"job_id": {"S": job_id}}
        item = (self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
                if tenant_id is None else tenant_item(self._db, self._table, key, tenant_id))
        return None if item is None else StatusView.model_validate(from_item(item))

    def for_tenant(
        self, tenant_id: str, *, limit: int, status: str | None = None, where: JobFilter | None = None,
        start: Key | None = None,
    ) -> tuple[list[StatusView], Key | None]:
        """Up to `limit` of a tenant's jobs, the most recently changed first (the `by_tenant` index), only
        those `where` (or in `status`) selects; and the key to continue from (None: no more).

        An index cannot be read consistently, so it only chooses the jobs: their rows are then read
        consistently from the table (one BatchGetItem per page), and a listing never shows a job older than a
        read before it did. A job whose consistent row no longer has a selected status is left out.

        A filtered listing evaluates up to FILTERED_QUERY_LIMIT entries per query and MAX_PAGE_QUERIES queries
        per call, so a rare match can leave a page short (even empty) with a key to go on from: the caller
        searches further with it. The key is the last entry shown when the page was cut short of a query's
        matches, so none is skipped."""
        where = where or JobFilter()
        if status is not None:
            where = JobFilter(frozenset({status}), where.job_type, where.id_prefix)
        expression = where.expression()
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": "by_tenant", "ScanIndexForward": False,
            "KeyConditionExpression": "tenant_id = :t", "ProjectionExpression": "job_id, occurred_at",
            **expression,
            "ExpressionAttributeValues": {":t": {"S": tenant_id}, **expression.get("ExpressionAttributeValues", {})},
        }
        chosen: list[dict[str, Any]] = []
        for _ in range(MAX_PAGE_QUERIES):
            wanted = limit - len(chosen)
            page = self._db.query(**request, Limit=max(wanted, FILTERED_QUERY_LIMIT) if where.narrows else wanted,
                                  **({"ExclusiveStartKey": start} if start else {}))
            items = page["Items"]
            chosen.extend(items[:wanted])
            start = page.get("LastEvaluatedKey")
            if len(items) > wanted:  # more matches than the page holds: go on after the last one shown
                start = _index_key(tenant_id, chosen[-1])
            if start is None or len(chosen) >= limit:
                break
        job_ids = [item["job_id"]["S"] for item in chosen]
        current = self.get_many(job_ids)
        views = [current[job_id] for job_id in job_ids if job_id in current
                 and (not where.statuses or current[job_id].status.value in where.statuses)]
        return views, start

    def count_by_status(self, tenant_id: str, *, job_type: str | None = None,
                        max_examined: int = MAX_COUNTED) -> StatusCounts:
        """The tenant's jobs per status (of `job_type` only, if given), from the `by_tenant` index, newest
        first: at most `max_examined` entries are read (the cost of a count is the entries it reads), and the
        answer says whether that was all. The index is eventually consistent: a count can be a moment behind
        the rows a listing shows."""
        expression = JobFilter(job_type=job_type).expression()
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": "by_tenant", "ScanIndexForward": False,
            "KeyConditionExpression": "tenant_id = :t", "ProjectionExpression": "#s",
            **expression,
            "ExpressionAttributeNames": {"#s": "status", **expression.get("ExpressionAttributeNames", {})},
            "ExpressionAttributeValues": {":t": {"S": tenant_id}, **expression.get("ExpressionAttributeValues", {})},
        }
        counts: dict[str, int] = {}
        examined = 0
        start: Key | None = None
        while examined < max_examined:
            page = self._db.query(**request, Limit=min(COUNT_QUERY_LIMIT, max_examined - examined),
                                  **({"ExclusiveStartKey": start} if start else {}))
            examined += page.get("ScannedCount", len(page["Items"]))
            for item in page["Items"]:
                status = item["status"]["S"]
                counts[status] = counts.get(status, 0) + 1
            start = page.get("LastEvaluatedKey")
            if start is None:
                return StatusCounts(counts, examined, complete=True)
        return StatusCounts(counts, examined, complete=False)

    def get_many(self, job_ids: list[str]) -> dict[str, StatusView]:
        """The rows of these jobs by job id, read consistently (onward.store.dynamo.batch_reads: KeysHeldBack
        when DynamoDB keeps holding keys back); a job the view has not seen is left out."""
        keys = [{"job_id": {"S": job_id}} for job_id in dict.fromkeys(job_ids)]
        views = (StatusView.model_validate(from_item(item))
                 for item in batch_get(self._db, self._table, keys, consistent=True).items)
        return {view.job_id: view for view in views}

    def all(self) -> Iterator[StatusView]:
        """Every view row (a scan: for rebuilds and audits)."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                yield StatusView.model_validate(from_item(item))


def _index_key(tenant_id: str, entry: dict[str, Any]) -> Key:
    """The `by_tenant` position of an index entry (table key and index key), as a LastEvaluatedKey."""
    return {"job_id": entry["job_id"], "tenant_id": {"S": tenant_id}, "occurred_at": entry["occurred_at"]}

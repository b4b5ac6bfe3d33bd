"""Reading the status view (the projection the browser reads; the job table stays the authority)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from onward.domain.models import StatusView
from onward.pipeline.listing import (
    LISTING_ATTRIBUTE,
    LISTING_SHARDS,
    Position,
    Query,
    at_once,
    index_key,
    listing_partition,
    merge_newest_first,
    read_position,
)
from onward.pipeline.tag_index import TAG_ITEM_PREFIX, is_tag_entry, tag_query
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.batch_reads import batch_get
from onward.store.dynamo.tenant_reads import tenant_item

Key = Position  # where a tenant's listing goes on: each listing shard's place (onward.pipeline.listing)
MAX_PAGE_QUERIES = 10  # a filter can leave pages thin: stop after this many queries beyond one per shard
FILTERED_QUERY_LIMIT = 100  # items one query of a filtered listing evaluates (a match may be rare)
MAX_COUNTED = 10_000  # index entries a count reads at most (each shard's newest); beyond, the counts say so
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

    def expression(self, id_base: str = "") -> dict[str, Any]:
        """The Query's FilterExpression with its names and values ({} when it filters nothing); `id_base`: what
        the items' `job_id` starts with before the job's id (a tag entry's prefix)."""
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
            values[":id"] = {"S": id_base + self.id_prefix}
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
    """A position a tenant's listing handed out (`StatusViewReader.for_tenant`'s position to continue from, as
    the caller got it back), to start that tenant's listing from; None when it is not one (another tenant's
    included): it never widens a listing to another tenant's jobs, nor starts a shard at a job of another."""
    return read_position(position, tenant_id)


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
        start: Key | None = None, tag: tuple[str, str] | None = None,
    ) -> tuple[list[StatusView], Key | None]:
        """Up to `limit` of a tenant's jobs, the most recently changed first (the `by_listing` index, its
        shards merged: onward.pipeline.listing), only those `where` (or in `status`) selects; and the position
        to continue from (None: no more).

        An index cannot be read consistently, so it only chooses the jobs: their rows are then read
        consistently from the table (one BatchGetItem per page), and a listing never shows a job older than a
        read before it did. A job whose consistent row no longer has a selected status is left out.

        A filtered listing evaluates up to FILTERED_QUERY_LIMIT entries per query, one query per shard and
        MAX_PAGE_QUERIES more per call, so a rare match can leave a page short (even empty) with a position
        to go on from: the caller searches further with it. In each shard the position is the last entry
        shown when the page was cut short of a query's matches, so none is skipped.

        With `tag` (key, value), only the jobs carrying it: the `by_tag` index (onward.pipeline.tag_index) chooses
        them instead, with the same filters, shards and positions."""
        where = where or JobFilter()
        if status is not None:
            where = JobFilter(frozenset({status}), where.job_type, where.id_prefix)
        query = self._shard_query(tenant_id, where.expression(TAG_ITEM_PREFIX if tag else ""), "job_id, occurred_at",
                                  tag)
        chosen, position = merge_newest_first(
            query, tenant_id, start, limit=limit, max_queries=LISTING_SHARDS + MAX_PAGE_QUERIES,
            per_query=(lambda wanted: max(wanted, FILTERED_QUERY_LIMIT)) if where.narrows else (lambda wanted: wanted))
        job_ids = [item["job_id"]["S"] for item in chosen]
        current = self.get_many(job_ids)
        views = [current[job_id] for job_id in job_ids if job_id in current
                 and (not where.statuses or current[job_id].status.value in where.statuses)]
        return views, position

    def count_by_status(self, tenant_id: str, *, job_type: str | None = None,
                        max_examined: int = MAX_COUNTED, tag: tuple[str, str] | None = None) -> StatusCounts:
        """The tenant's jobs per status (of `job_type` only, if given), from the `by_listing` index, each
        shard newest first: at most `max_examined` entries are read in all, shared by the shards (the cost of
        a count is the entries it reads), and the answer says whether that was all. The index is eventually
        consistent: a count can be a moment behind the rows a listing shows. With `tag` (key, value), only the
        jobs carrying it (the `by_tag` index)."""
        expression = JobFilter(job_type=job_type).expression()
        names = {"#s": "status", **expression.get("ExpressionAttributeNames", {})}
        query = self._shard_query(tenant_id, {**expression, "ExpressionAttributeNames": names}, "#s", tag)
        counts: dict[str, int] = {}
        examined = 0
        after: dict[int, list[str] | None] = dict.fromkeys(range(LISTING_SHARDS))
        done: set[int] = set()
        while examined < max_examined and len(done) < LISTING_SHARDS:
            # The budget left, shared by the shards not done (a shard that ends early leaves its share to others).
            left = max_examined - examined
            open_shards = [shard for shard in range(LISTING_SHARDS) if shard not in done][:left]
            share = min(COUNT_QUERY_LIMIT, max(1, left // len(open_shards)))
            pages = at_once(partial(_count_page, query, after, share), open_shards)
            for shard, page in zip(open_shards, pages, strict=True):
                examined += page.get("ScannedCount", len(page["Items"]))
                for item in page["Items"]:
                    status = item["status"]["S"]
                    counts[status] = counts.get(status, 0) + 1
                last = page.get("LastEvaluatedKey")
                after[shard] = None if last is None else [last["occurred_at"]["S"], last["job_id"]["S"]]
                if last is None:
                    done.add(shard)
        return StatusCounts(counts, examined, complete=len(done) == LISTING_SHARDS)

    def _shard_query(self, tenant_id: str, expression: dict[str, Any], projection: str,
                     tag: tuple[str, str] | None = None) -> Query:
        """A query of one shard of the tenant's listing (or of its jobs tagged `tag`), newest first, projecting
        `projection`, filtered by `expression` (a JobFilter's, with any names the projection uses)."""
        if tag is not None:
            parts = {"ProjectionExpression": projection,
                     **{name: part for name, part in expression.items() if name != "ExpressionAttributeValues"}}
            values = expression.get("ExpressionAttributeValues", {})
            return tag_query(self._db, self._table, tenant_id, tag, parts, values)
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": "by_listing", "ScanIndexForward": False,
            "KeyConditionExpression": f"{LISTING_ATTRIBUTE} = :p", "ProjectionExpression": projection,
            **{name: part for name, part in expression.items() if name != "ExpressionAttributeValues"}}
        values = expression.get("ExpressionAttributeValues", {})

        def query(shard: int, after: list[str] | None, limit: int) -> dict[str, Any]:
            page: dict[str, Any] = self._db.query(
                **request, Limit=limit,
                ExpressionAttributeValues={":p": {"S": listing_partition(tenant_id, shard)}, **values},
                **({"ExclusiveStartKey": index_key(tenant_id, shard, after)} if after else {}))
            return page

        return query

    def get_many(self, job_ids: list[str]) -> dict[str, StatusView]:
        """The rows of these jobs by job id, read consistently (onward.store.dynamo.batch_reads: KeysHeldBack
        when DynamoDB keeps holding keys back); a job the view has not seen is left out."""
        keys = [{"job_id": {"S": job_id}} for job_id in dict.fromkeys(job_ids)]
        views = (StatusView.model_validate(from_item(item))
                 for item in batch_get(self._db, self._table, keys, consistent=True).items)
        return {view.job_id: view for view in views}

    def all(self) -> Iterator[StatusView]:
        """Every view row (a scan: for rebuilds and audits); the tag index's entries are not rows."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                if not is_tag_entry(item):
                    yield StatusView.model_validate(from_item(item))


def _count_page(query: Query, after: dict[int, list[str] | None], limit: int, shard: int) -> dict[str, Any]:
    """A count's next page of one shard, after where its previous one ended."""
    return query(shard, after[shard], limit)

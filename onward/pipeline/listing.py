"""The status view's listing index, sharded: the partition a job's row is listed in, a tenant's listing read
newest first across its partitions (a k-way merge), and the position a page ends at (what a cursor carries).

A view row's upsert moves its index entry (the sort key `occurred_at` changes: a delete and a put), so a job
costs about 5 index writes (created, claimed, ended). On one partition per tenant that stops a tenant near
200 jobs/s at DynamoDB's 1,000 write units per partition; spread over LISTING_SHARDS partitions
(`<tenant>#<n>`, n a stable hash of the job id) one tenant at 1,000 jobs/s costs each about 310 units, and
the index projects only what listing and counting filter on (`status`, `type`), so an entry is one unit.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from onward.domain.text_patterns import JOB_ID

LISTING_ATTRIBUTE = "listing_pk"  # the `by_listing` index's partition key on a view row: `<tenant>#<n>`
LISTING_SHARDS = 16  # fixed: a row's partition is a function of it (changing it re-lists every row)
DONE = "done"  # a shard whose entries a listing has all been through

# A listing's position, as JSON values: {"tenant": <id>, "shards": {"<n>": null | "done" | [occurred_at, job_id]}}
Position = dict[str, Any]
Entry = dict[str, Any]  # an index entry as a Query returns it (DynamoDB's wire format)
# (shard, after: the (occurred_at, job_id) to go on after or None for its newest, Limit) -> a Query's page
Query = Callable[[int, list[str] | None, int], dict[str, Any]]

_T = TypeVar("_T")
_R = TypeVar("_R")

# Shared by the process, as a warm Lambda keeps it (threads start on first use): a listing's shards are
# queried at once.
_queries = ThreadPoolExecutor(max_workers=LISTING_SHARDS, thread_name_prefix="onward-listing")


def at_once(call: Callable[[_T], _R], each: Sequence[_T]) -> list[_R]:
    """`call` on each of `each` (a listing's shards) on the listing's threads at once, the answers in order."""
    return list(_queries.map(call, each))


def listing_shard(job_id: str) -> int:
    """The shard of a tenant's listing a job is in: stable across processes and deploys (CRC-32 of its id)."""
    return zlib.crc32(job_id.encode()) % LISTING_SHARDS


def listing_partition(tenant_id: str, shard: int) -> str:
    return f"{tenant_id}#{shard}"


def listing_key(tenant_id: str, job_id: str) -> str:
    """The `listing_pk` a job's view row carries."""
    return listing_partition(tenant_id, listing_shard(job_id))


def index_key(tenant_id: str, shard: int, after: Sequence[str]) -> dict[str, Any]:
    """The ExclusiveStartKey of a shard's query that goes on after the entry `after` = (occurred_at, job_id)."""
    occurred_at, job_id = after
    return {"job_id": {"S": job_id}, LISTING_ATTRIBUTE: {"S": listing_partition(tenant_id, shard)},
            "occurred_at": {"S": occurred_at}}


def read_position(value: object, tenant_id: str) -> Position | None:
    """A position a listing of `tenant_id` handed out, as a caller sent it back; None when it is not one: the
    tenant's, with a place for every shard, each null (from its newest), "done", or [occurred_at, job_id] of a
    job listed in that shard, and not every shard done."""
    if not (isinstance(value, dict) and set(value) == {"tenant", "shards"} and value["tenant"] == tenant_id):
        return None
    shards = value["shards"]
    if not isinstance(shards, dict) or set(shards) != {str(shard) for shard in range(LISTING_SHARDS)}:
        return None
    for name, held in shards.items():
        if held is None or held == DONE:
            continue
        if not (isinstance(held, list) and len(held) == 2 and all(isinstance(part, str) for part in held)):
            return None
        occurred_at, job_id = held
        if len(occurred_at) > 64 or not JOB_ID.matches(job_id) or listing_shard(job_id) != int(name):
            return None
    return value if any(held != DONE for held in shards.values()) else None


@dataclass
class _Shard:
    """One shard's progress through a page: `resume` is where the page ends in it (None: its newest, DONE: its
    end), `buffer` what its last query returned and the merge has not taken, `then` that query's
    LastEvaluatedKey as (occurred_at, job_id) (None: the query reached the shard's end)."""

    number: int
    resume: list[str] | str | None
    buffer: deque[Entry] = field(default_factory=deque)
    then: list[str] | None = None

    @property
    def waiting(self) -> bool:
        """It must be queried before the merge can take anything: nothing buffered, entries left."""
        return not self.buffer and self.resume != DONE

    def fill(self, page: dict[str, Any]) -> None:
        self.buffer = deque(page["Items"])
        last = page.get("LastEvaluatedKey")
        self.then = None if last is None else [last["occurred_at"]["S"], last["job_id"]["S"]]
        if not self.buffer:
            self.resume = self.then if self.then is not None else DONE

    def take(self) -> Entry:
        entry = self.buffer.popleft()
        self.resume = [entry["occurred_at"]["S"], entry["job_id"]["S"]]
        if not self.buffer:
            # Past every entry it returned: on from its last key (past entries a filter left out), or the end.
            self.resume = self.then if self.then is not None else DONE
        return entry


def merge_newest_first(query: Query, tenant_id: str, start: Position | None, *, limit: int,
                       per_query: Callable[[int], int], max_queries: int) -> tuple[list[Entry], Position | None]:
    """Up to `limit` entries of `tenant_id`'s listing, newest `occurred_at` first over every shard, from `start`
    (None: the newest), and the position after the last one taken (None: every shard is done).

    Every shard not done is queried at once (`per_query(wanted)` entries each); the merge then takes the
    newest head while every shard not done has one, and queries again (at once) those that ran dry; after
    `max_queries` queries in all it stops, the page short, and the position says where each shard stopped:
    an entry a query returned but the page did not take is read again on the next page, none is skipped."""
    shards = [_Shard(number, None if start is None else start["shards"][str(number)])
              for number in range(LISTING_SHARDS)]
    taken: list[Entry] = []
    queries = 0
    while len(taken) < limit:
        waiting = [shard for shard in shards if shard.waiting]
        if waiting:
            waiting = waiting[:max(0, max_queries - queries)]
            if not waiting:
                break
            pages = at_once(partial(_query_shard, query, per_query(limit - len(taken))), waiting)
            for shard, page in zip(waiting, pages, strict=True):
                shard.fill(page)
            queries += len(waiting)
            continue
        heads = [shard for shard in shards if shard.buffer]
        if not heads:
            break
        # Newest first; between equal times the lower shard first, so a page and the next agree.
        newest = max(heads, key=lambda shard: (shard.buffer[0]["occurred_at"]["S"], -shard.number))
        taken.append(newest.take())
    places = {str(shard.number): shard.resume for shard in shards}
    return taken, None if all(held == DONE for held in places.values()) else {"tenant": tenant_id, "shards": places}


def _query_shard(query: Query, limit: int, shard: _Shard) -> dict[str, Any]:
    """A shard's next query: from where it stands (its newest when it has no place yet)."""
    return query(shard.number, shard.resume if isinstance(shard.resume, list) else None, limit)

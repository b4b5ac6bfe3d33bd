"""A tenant's listing over the sharded `by_listing` index (onward/pipeline/listing.py, view.py): the shards'
pages merged newest first, a cursor that resumes each shard where the page ended, counts summed over the
shards; on an in-memory index that answers as DynamoDB does (listing_index_fake.py)."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from onward.api.cursors import MAX_CURSOR_CHARS, decode_cursor, encode_cursor
from onward.pipeline.listing import DONE, LISTING_SHARDS, listing_key, listing_shard, read_position
from onward.pipeline.view import JobFilter, StatusViewReader, listing_start
from tests.unit.pipeline.listing_index_fake import FakeListingIndex, row


def _at(second: int) -> str:
    return f"2026-12-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def _jobs(count: int, *, same_time_every: int = 0) -> list[dict[str, Any]]:
    """`count` jobs, job n changed at second n (or, with `same_time_every`, in groups changed at once), a
    third of them dead, types alternating."""
    return [row(hashlib.md5(str(n).encode()).hexdigest(), _at(n // same_time_every if same_time_every else n),
                status="dead" if n % 3 == 0 else "succeeded", job_type=("demo.a", "demo.b")[n % 2])
            for n in range(count)]


def _newest_first(rows: list[dict[str, Any]]) -> list[str]:
    return [r["job_id"] for r in sorted(rows, key=lambda r: r["occurred_at"], reverse=True)]


def _every_page(reader: StatusViewReader, *, limit: int, where: JobFilter | None = None,
                through_cursors: bool = False) -> tuple[list[str], int]:
    """Every page of acme's listing in turn; the jobs shown, and the number of pages. `through_cursors`: each
    position goes out as the API's cursor and comes back read as the route reads it."""
    shown: list[str] = []
    start = None
    pages = 0
    while True:
        views, position = reader.for_tenant("acme", limit=limit, where=where, start=start)
        pages += 1
        assert len(views) <= limit
        shown += [view.job_id for view in views]
        if position is None:
            return shown, pages
        start = listing_start(decode_cursor(encode_cursor(position)), "acme") if through_cursors else position
        assert start is not None
        assert pages < 1_000


def test_the_jobs_are_spread_over_every_shard_by_a_stable_hash() -> None:
    """One partition per tenant is the hot key this index removes: a tenant's jobs must land on every shard."""
    counts = Counter(listing_shard(f"{n * 7919:032x}") for n in range(1_600))
    assert set(counts) == set(range(LISTING_SHARDS))
    assert max(counts.values()) < 2 * min(counts.values())
    assert listing_key("acme", "0" * 32) == f"acme#{listing_shard('0' * 32)}"


def test_pages_merge_the_shards_newest_first_and_resume_each_where_it_stopped() -> None:
    """Paged through with a small limit, the listing shows every job once, in the order one index would."""
    rows = _jobs(300)
    index = FakeListingIndex(rows)
    shown, pages = _every_page(StatusViewReader(index, "status"), limit=7, through_cursors=True)
    assert shown == _newest_first(rows)
    assert pages == 43  # 300 / 7, the last page ending with the last job (no empty page after it)
    assert all("FilterExpression" not in query and query["Limit"] <= 7 for query in index.queries)


def test_jobs_changed_at_the_same_moment_are_neither_repeated_nor_skipped_across_pages() -> None:
    rows = _jobs(120, same_time_every=25)
    shown, _ = _every_page(StatusViewReader(FakeListingIndex(rows), "status"), limit=9, through_cursors=True)
    assert sorted(shown) == sorted(r["job_id"] for r in rows) and len(shown) == len(set(shown))
    times = {r["job_id"]: r["occurred_at"] for r in rows}
    assert [times[job] for job in shown] == sorted(times.values(), reverse=True)


def test_a_filtered_listing_cut_short_by_its_query_budget_goes_on_without_skipping_a_match() -> None:
    """A rare match: each call reads a bounded number of entries, so pages come short or empty with a cursor;
    all of them together are exactly the matches, newest first."""
    rows = _jobs(3_000)
    wanted = JobFilter(job_type="demo.a", id_prefix="a")
    matches = [r for r in rows if r["type"] == "demo.a" and r["job_id"].startswith("a")]
    assert 0 < len(matches) < 3_000 // 10
    shown, pages = _every_page(StatusViewReader(FakeListingIndex(rows), "status"), limit=20, where=wanted,
                               through_cursors=True)
    assert shown == _newest_first(matches)
    assert pages > 1


def test_a_status_filter_is_rechecked_on_the_consistent_rows() -> None:
    rows = _jobs(60)
    index = FakeListingIndex(rows)
    dead = [r for r in rows if r["status"] == "dead"]
    newest = _newest_first(dead)[0]
    index.table[newest] = {**index.rows[newest], "status": "queued"}  # moved on; the index still says dead
    views, _ = StatusViewReader(index, "status").for_tenant("acme", limit=5, status="dead")
    assert [view.job_id for view in views] == _newest_first(dead)[1:5]


def test_counts_sum_every_shard_and_stop_at_their_bound_shared_by_the_shards() -> None:
    rows = _jobs(500)
    index = FakeListingIndex(rows)
    counted = StatusViewReader(index, "status").count_by_status("acme")
    assert counted.complete and counted.examined == 500
    assert counted.counts == dict(Counter(r["status"] for r in rows))
    typed = StatusViewReader(index, "status").count_by_status("acme", job_type="demo.a")
    assert typed.counts == dict(Counter(r["status"] for r in rows if r["type"] == "demo.a"))
    index.queries.clear()
    bounded = StatusViewReader(index, "status").count_by_status("acme", max_examined=100)
    assert (bounded.examined, bounded.complete) == (100, False)
    assert sum(bounded.counts.values()) == 100
    small = StatusViewReader(index, "status").count_by_status("acme", max_examined=10)
    assert (small.examined, small.complete) == (10, False)  # fewer than the shards: never read past it


def test_a_position_names_its_tenant_every_shard_and_only_jobs_of_their_own_shard() -> None:
    """A cursor is opaque but read back strictly: anything a page of this tenant could not have ended at is
    refused, another tenant's position included."""
    rows = _jobs(100)
    _, position = StatusViewReader(FakeListingIndex(rows), "status").for_tenant("acme", limit=10)
    assert position is not None and read_position(position, "acme") == position
    assert read_position(position, "globex") is None  # minted for another tenant
    places = position["shards"]
    assert set(places) == {str(shard) for shard in range(LISTING_SHARDS)}
    placed = next(name for name, held in places.items() if isinstance(held, list))
    other = str((int(placed) + 1) % LISTING_SHARDS)

    def with_places(changed: dict[str, Any]) -> dict[str, Any]:
        return {"tenant": "acme", "shards": changed}

    assert read_position(with_places({**places, other: places[placed]}), "acme") is None  # another shard's job
    assert read_position(with_places({n: held for n, held in places.items() if n != placed}), "acme") is None
    assert read_position(with_places({**places, placed: [places[placed][0]]}), "acme") is None
    assert read_position(with_places({**places, placed: ["2026", "not a job id"]}), "acme") is None
    assert read_position(with_places(dict.fromkeys(places, DONE)), "acme") is None  # no page hands that out
    assert read_position(places, "acme") is None and read_position(None, "acme") is None
    assert len(encode_cursor(position)) <= MAX_CURSOR_CHARS


def test_the_longest_position_fits_a_cursor() -> None:
    """Every shard placed at a job, the longest tenant id: the cursor must stay within what the API accepts."""
    tenant = "t" * 64
    ids = {listing_shard(job_id): job_id for job_id in (f"{n:032x}" for n in range(1_000))}
    position = {"tenant": tenant, "shards": {str(shard): ["2026-12-01T09:00:00.000Z", ids[shard]]
                                             for shard in range(LISTING_SHARDS)}}
    assert read_position(position, tenant) == position
    assert len(encode_cursor(position)) <= MAX_CURSOR_CHARS


def test_a_cursor_resumes_only_the_callers_own_partitions() -> None:
    """The position holds places, not a tenant: the next page's queries name the caller's partitions."""
    rows = _jobs(40) + [row(f"{n:032x}", _at(n), tenant_id="globex") for n in range(40)]
    index = FakeListingIndex(rows)
    reader = StatusViewReader(index, "status")
    _, position = reader.for_tenant("acme", limit=5)
    index.queries.clear()
    views, _ = reader.for_tenant("globex", limit=50, start=position)
    assert all(query["ExpressionAttributeValues"][":p"]["S"].startswith("globex#") for query in index.queries)
    assert {view.tenant_id for view in views} <= {"globex"}

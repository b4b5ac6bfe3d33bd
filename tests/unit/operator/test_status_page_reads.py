"""The reads behind the status page's list and operator view, on fakes (no AWS): the list's filter
expression and where a cut page resumes, counts that stop at their bound, the lag rows per shard, the reason
a projection conflict is given, claims put in their minute, a parked record's preview."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onward.domain.clock import epoch_ms, iso
from onward.domain.models import OutboxEvent
from onward.domain.shard_lag import BoundedBy, shard_lags
from onward.domain.states import JobState
from onward.operator.claim_history import RecentClaims
from onward.operator.conflicts import differences, reason_of
from onward.operator.parked import preview
from onward.pipeline.listing import DONE, LISTING_SHARDS, listing_shard
from onward.pipeline.view import JobFilter, StatusViewReader
from onward.store.dynamo.claim_log import DynamoClaimLog
from onward.store.dynamo.keys import TIME_SHARDS
from tests.unit.pipeline.listing_index_fake import FakeListingIndex, row

NOW = epoch_ms("2026-12-01T10:00:00.000Z")


def test_a_filter_is_one_expression_of_every_part() -> None:
    where = JobFilter(frozenset({"dead", "quarantined"}), "demo.fail", "ab")
    expression = where.expression()
    assert expression["FilterExpression"] == "#s IN (:s0, :s1) AND #ty = :ty AND begins_with(job_id, :id)"
    assert expression["ExpressionAttributeNames"] == {"#s": "status", "#ty": "type"}
    assert expression["ExpressionAttributeValues"] == {":s0": {"S": "dead"}, ":s1": {"S": "quarantined"},
                                                       ":ty": {"S": "demo.fail"}, ":id": {"S": "ab"}}
    assert JobFilter().expression() == {} and not JobFilter().narrows


def test_a_filtered_page_cut_short_resumes_after_the_last_job_shown() -> None:
    """A filtered query evaluates more entries than the page holds; the matches it cannot show must come on the
    next page, so the shard's position is the last shown entry, not the query's own LastEvaluatedKey (past
    them)."""
    ids = [job_id for job_id in (f"{n:032x}" for n in range(400)) if listing_shard(job_id) == 0][:4]
    rows = [row(job_id, f"2026-12-01T09:00:0{n}.000Z") for n, job_id in enumerate(ids)]
    fake = FakeListingIndex(rows)
    views, start = StatusViewReader(fake, "status").for_tenant("acme", limit=2, where=JobFilter(job_type="demo.echo"))
    assert [view.job_id for view in views] == [ids[3], ids[2]]
    assert start is not None and start["shards"]["0"] == ["2026-12-01T09:00:02.000Z", ids[2]]
    assert {start["shards"][str(shard)] for shard in range(1, LISTING_SHARDS)} == {DONE}  # the others hold none
    assert fake.queries[0]["Limit"] == 100  # a filtered query reads further than the page


def test_an_unfiltered_page_asks_each_shard_for_what_it_shows() -> None:
    fake = FakeListingIndex([row("a" * 32, "2026-12-01T09:00:00.000Z")])
    StatusViewReader(fake, "status").for_tenant("acme", limit=7)
    assert len(fake.queries) == LISTING_SHARDS
    assert all(query["Limit"] == 7 and "FilterExpression" not in query for query in fake.queries)


def test_counts_stop_at_their_bound_and_say_so() -> None:
    rows = [row(f"{n:032x}", f"2026-12-01T09:{n // 60:02d}:{n % 60:02d}.000Z", "dead" if n % 5 == 0 else "queued")
            for n in range(200)]
    fake = FakeListingIndex(rows)
    counted = StatusViewReader(fake, "status").count_by_status("acme", max_examined=10)
    assert (sum(counted.counts.values()), counted.examined, counted.complete) == (10, 10, False)
    assert all(query["Limit"] <= 10 for query in fake.queries)  # never reads past the bound
    done = StatusViewReader(FakeListingIndex(rows[:1]), "status").count_by_status("acme")
    assert (done.counts, done.complete) == ({"dead": 1}, True)


@dataclass(frozen=True)
class Mark:
    shard_id: str
    newest_event_at: str | None
    processed_at: str = "2026-12-01T09:59:59.000Z"
    parents: tuple[str, ...] = ()
    slots: int = 16


@dataclass(frozen=True)
class Shard:
    shard_id: str
    parents: tuple[str, ...] = ()


def test_each_shard_says_what_bounds_it() -> None:
    marks = [Mark("a", "2026-12-01T09:59:58.000Z"), Mark("p", "2026-12-01T09:59:50.000Z"),
             Mark("z", None)]
    rows = {row.shard_id: row for row in shard_lags(marks, [Shard("a"), Shard("child", ("p",)), Shard("new")],
                                                    NOW, stale_after_s=5)}
    assert set(rows) == {"a", "child", "new", "z"}  # the parent is counted through its child
    assert (rows["a"].bounded_by, rows["a"].lag_s, rows["a"].stale) == (BoundedBy.OWN, 2.0, False)
    assert (rows["child"].bounded_by, rows["child"].lag_s, rows["child"].stale) == (BoundedBy.PARENTS, 10.0, True)
    assert rows["child"].parents == ("p",) and rows["child"].processed_at is None
    assert (rows["new"].bounded_by, rows["new"].lag_s, rows["new"].stale) == (BoundedBy.UNKNOWN, None, True)
    assert rows["z"].bounded_by is BoundedBy.UNKNOWN and rows["z"].slots == 16


def test_a_conflict_names_the_fields_that_disagree() -> None:
    event = OutboxEvent(event_id="x", job_id="a" * 32, tenant_id="acme", type="demo.echo", version=3,
                        status=JobState.SUCCEEDED, attempt=2, occurred_at="2026-12-01T09:00:00.000Z")
    held = {"job_id": "a" * 32, "tenant_id": "acme", "type": "demo.echo", "status": "dead", "version": 3,
            "attempt": 2, "cancel_requested": False, "occurred_at": "2026-12-01T09:00:00.000Z",
            "digest": "other", "projected_at": "2026-12-01T09:00:01.000Z", "committed_at": "2026-12-01T09:00:00Z"}
    found = differences(held, event)
    assert [(d.field, d.in_view, d.incoming) for d in found] == [("status", "dead", "succeeded")]
    assert reason_of(3, found) == 'version 3 arrived again with other content: status ("dead" in the view, ' \
                                  '"succeeded" incoming)'
    assert "same view fields" in reason_of(3, ())


class FakeOutbox:
    def __init__(self, claims: list[tuple[str, str]]) -> None:
        self.claims = claims
        self.requests: list[dict[str, Any]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        bucket = request["ExpressionAttributeValues"][":b"]["S"]
        since = request["ExpressionAttributeValues"][":since"]["S"]
        hour, shard = bucket.split("#")
        items = [{"tenant_id": {"S": tenant}, "occurred_at": {"S": at}} for tenant, at in self.claims
                 if at.startswith(hour) and shard == "0" and at >= since]  # every claim in shard 0
        return {"Items": items, "ScannedCount": len(items)}


def test_claims_fall_in_their_minute_across_an_hour_boundary() -> None:
    fake = FakeOutbox([("acme", "2026-12-01T09:55:30.000Z"),  # before the window (09:57 to 10:02)
                       ("acme", "2026-12-01T09:59:59.000Z"), ("globex", "2026-12-01T09:58:00.000Z"),
                       ("acme", iso(NOW + 5)), ("acme", iso(NOW + 3 * 60_000))])  # the last: after it
    counted = RecentClaims(DynamoClaimLog(fake, "outbox")).count(NOW + 2 * 60_000)
    assert [request["ExpressionAttributeValues"][":b"]["S"] for request in fake.requests] == [
        f"2026-12-01T{hour}#{shard}" for hour in ("09", "10") for shard in range(TIME_SHARDS)]
    assert counted.by_tenant == {"acme": [0, 0, 1, 1, 0], "globex": [0, 1, 0, 0, 0]}
    assert counted.complete and counted.total("acme") == 2 and counted.buckets == 5


def test_a_preview_escapes_what_is_not_text_and_says_it_was_cut() -> None:
    assert preview(b'{"a": \xff}') == '{"a": \\xff}'
    assert preview(b"x" * 300, limit=4) == "xxxx…"

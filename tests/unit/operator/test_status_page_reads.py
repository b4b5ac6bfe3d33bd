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
from onward.pipeline.view import JobFilter, StatusViewReader
from onward.store.dynamo.attributes import to_item
from onward.store.dynamo.claim_log import DynamoClaimLog
from onward.store.dynamo.keys import TIME_SHARDS

NOW = epoch_ms("2026-12-01T10:00:00.000Z")


def _row(job_id: str, status: str = "queued", at: str = "2026-12-01T09:00:00.000Z") -> dict[str, Any]:
    return to_item({"job_id": job_id, "tenant_id": "acme", "type": "demo.echo", "status": status, "version": 1,
                    "attempt": 0, "occurred_at": at, "projected_at": at, "digest": "d"})


class FakeView:
    """A by_tenant index whose one query answers `entries` (already filtered, as DynamoDB would)."""

    def __init__(self, entries: list[dict[str, Any]], last_key: dict[str, Any] | None = None) -> None:
        self.entries = entries
        self.last_key = last_key
        self.queries: list[dict[str, Any]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.queries.append(request)
        page: dict[str, Any] = {"Items": self.entries, "ScannedCount": len(self.entries)}
        if self.last_key:
            page["LastEvaluatedKey"] = self.last_key
        return page

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        keys = RequestItems["status"]["Keys"]
        return {"Responses": {"status": [_row(key["job_id"]["S"]) for key in keys]}}


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
    next page, so the cursor is the last shown entry, not the query's own LastEvaluatedKey (past them)."""
    entries = [{"job_id": {"S": f"{n:032x}"}, "occurred_at": {"S": f"2026-12-01T09:00:0{n}.000Z"}} for n in range(3)]
    fake = FakeView(entries, last_key={"job_id": {"S": "f" * 32}, "tenant_id": {"S": "acme"},
                                       "occurred_at": {"S": "2026"}})
    views, start = StatusViewReader(fake, "status").for_tenant("acme", limit=2, where=JobFilter(job_type="demo.echo"))
    assert [view.job_id for view in views] == [f"{0:032x}", f"{1:032x}"]
    assert start == {"job_id": {"S": f"{1:032x}"}, "tenant_id": {"S": "acme"},
                     "occurred_at": {"S": "2026-12-01T09:00:01.000Z"}}
    assert fake.queries[0]["Limit"] == 100  # a filtered query reads further than the page


def test_an_unfiltered_page_asks_for_what_it_shows() -> None:
    fake = FakeView([{"job_id": {"S": "a" * 32}, "occurred_at": {"S": "2026"}}])
    StatusViewReader(fake, "status").for_tenant("acme", limit=7)
    assert fake.queries[0]["Limit"] == 7 and "FilterExpression" not in fake.queries[0]


def test_counts_stop_at_their_bound_and_say_so() -> None:
    fake = FakeView([{"status": {"S": "queued"}}] * 4 + [{"status": {"S": "dead"}}],
                    last_key={"job_id": {"S": "a" * 32}})
    counted = StatusViewReader(fake, "status").count_by_status("acme", max_examined=10)
    assert (counted.counts, counted.examined, counted.complete) == ({"queued": 8, "dead": 2}, 10, False)
    assert fake.queries[-1]["Limit"] == 5  # never reads past the bound
    done = StatusViewReader(FakeView([{"status": {"S": "dead"}}]), "status").count_by_status("acme")
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

"""onward/pipeline/view.py reads statuses consistently. A DynamoDB index cannot be read consistently, so a listing
that showed the index's copies could show a job older than a consistent GET did a moment before (a status
going backwards between two polls). The index now only picks the jobs; their rows are read consistently."""

from __future__ import annotations

from typing import Any

from onward.pipeline.listing import listing_key
from onward.pipeline.view import StatusViewReader
from onward.store.dynamo.attributes import to_item


def _row(version: int, status: str) -> dict[str, Any]:
    return to_item({"job_id": "a" * 32, "tenant_id": "acme", "type": "demo.echo", "status": status,
                    "version": version, "attempt": 1, "occurred_at": "2026-12-01T10:00:00.000Z",
                    "projected_at": "2026-12-01T10:00:00.100Z", "digest": f"d{version}"})


class LaggingIndex:
    """The index still holds v1 (queued); the table already holds v3 (succeeded)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("query", request))
        listed = request["ExpressionAttributeValues"][":p"]["S"] == listing_key("acme", "a" * 32)
        return {"Items": [_row(1, "queued")] if listed else []}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls.append(("batch_get_item", RequestItems))
        return {"Responses": {"status": [_row(3, "succeeded")]}}

    def get_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("get_item", request))
        return {"Item": _row(3, "succeeded")}


def test_a_listing_shows_the_consistent_row_not_the_index_copy() -> None:
    client = LaggingIndex()
    views, _ = StatusViewReader(client, "status").for_tenant("acme", limit=10)
    assert [(view.version, view.status.value) for view in views] == [(3, "succeeded")]
    (_, batch), = [call for call in client.calls if call[0] == "batch_get_item"]
    assert batch["status"]["ConsistentRead"] is True


def test_a_filtered_listing_leaves_out_a_job_whose_consistent_row_moved_on() -> None:
    views, _ = StatusViewReader(LaggingIndex(), "status").for_tenant("acme", limit=10, status="queued")
    assert views == []


def test_one_job_is_read_consistently() -> None:
    client = LaggingIndex()
    view = StatusViewReader(client, "status").get("a" * 32)
    assert view is not None and view.version == 3
    assert client.calls[-1][1]["ConsistentRead"] is True

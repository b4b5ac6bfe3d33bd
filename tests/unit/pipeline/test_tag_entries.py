"""The tag index's entries without AWS (onward/pipeline/tag_index.py): one per tag, in the job's listing shard,
carrying its row's status, type, version and TTL; and the index's pages read back in the listing's terms.

How each would break without the code: an entry without the row's `expires_at` would outlive the job (the TTL
sweep takes the row, not its entries); one in another shard than the row's listing entry would make a listing
position (whose place in each shard names a job listed there) refuse or skip it; a page that names the entry's
key instead of the job would be read back as no job."""

from __future__ import annotations

from typing import Any

from onward.pipeline.listing import listing_shard
from onward.pipeline.tag_index import (
    TAG_ATTRIBUTE,
    entry_id,
    is_tag_entry,
    job_of_entry,
    tag_entries,
    tag_query,
)

JOB_ID = "0123456789abcdef0123456789abcdef"


def _row(**extra: Any) -> dict[str, Any]:
    return {"job_id": JOB_ID, "tenant_id": "acme", "type": "demo.echo", "status": "queued", "version": 3,
            "occurred_at": "2026-12-04T10:00:00.000Z", "digest": "d", "projected_at": "p", **extra}


def test_one_entry_per_tag_with_the_rows_ttl_in_the_rows_listing_shard() -> None:
    entries = tag_entries(_row(tags={"env": "prod", "team": "red"}, expires_at=1_800_000_000))
    shard = listing_shard(JOB_ID)
    assert [entry[TAG_ATTRIBUTE] for entry in entries] == [f"acme#env=prod#{shard}", f"acme#team=red#{shard}"]
    for entry, key in zip(entries, ["env", "team"], strict=True):
        assert entry["job_id"] == entry_id(JOB_ID, key) and job_of_entry(entry["job_id"]) == JOB_ID
        assert (entry["expires_at"], entry["version"], entry["status"], entry["type"]) == (
            1_800_000_000, 3, "queued", "demo.echo")
        assert "tags" not in entry and "digest" not in entry
        assert is_tag_entry({"job_id": {"S": entry["job_id"]}})
    assert not is_tag_entry({"job_id": {"S": JOB_ID}})


def test_a_row_without_tags_has_no_entries_and_a_live_row_without_ttl_gives_none_to_them() -> None:
    assert tag_entries(_row()) == [] and tag_entries(_row(tags=None)) == []
    assert "expires_at" not in tag_entries(_row(tags={"env": "prod"}))[0]


class _Index:
    """A Query answering one page of one entry, and recording the request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        key = {"job_id": {"S": entry_id(JOB_ID, "env")}, TAG_ATTRIBUTE: {"S": "x"},
               "occurred_at": {"S": "2026-12-04T10:00:00.000Z"}}
        return {"Items": [{**key, "status": {"S": "queued"}}], "LastEvaluatedKey": key}


def test_pages_name_the_job_and_a_position_resumes_after_its_entry() -> None:
    index = _Index()
    query = tag_query(index, "status", "acme", ("env", "prod"), {"ProjectionExpression": "job_id, occurred_at"}, {})
    page = query(3, ["2026-12-04T09:00:00.000Z", JOB_ID], 5)
    assert page["Items"][0]["job_id"] == {"S": JOB_ID} and page["LastEvaluatedKey"]["job_id"] == {"S": JOB_ID}
    sent = index.requests[0]
    assert sent["IndexName"] == "by_tag" and sent["Limit"] == 5
    assert sent["ExpressionAttributeValues"][":p"] == {"S": "acme#env=prod#3"}
    assert sent["ExclusiveStartKey"]["job_id"] == {"S": entry_id(JOB_ID, "env")}

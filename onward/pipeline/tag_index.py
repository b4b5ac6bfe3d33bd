"""The status view's tag index: one entry per tag of a job, beside its view row in the status table, that lists
and counts a tenant's jobs by a tag (GET /jobs?tag=key:value), written by the projector with each view row.

An entry is an item of its own (a row can carry several tags, and an index partition key is one attribute):
`job_id` = `TAG#<job id>#<key>`, in the `by_tag` index under `tag_pk` = `<tenant>#<key>=<value>#<n>` sorted
by `occurred_at`, n the job's listing shard (onward.pipeline.listing.listing_shard: the same 16 shards, so a
tag's listing is merged, paged and resumed exactly as the tenant's listing is, with the same positions). It
copies from the view row what listing and counting filter on (`status`, `type`), its `version` (the guard) and
its `expires_at`: an entry goes when its row goes.

Why sharded: a tag every job of a tenant carries (env=prod) would otherwise be one partition taking every
entry move of the tenant's jobs; each entry moves as the row's listing entry does (onward.pipeline.listing), so
a tag's index costs what the listing's costs, spread the same way, and has the same ceiling per tenant.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from onward.pipeline.listing import Query, listing_shard
from onward.store.dynamo.attributes import to_item

TAG_INDEX = "by_tag"
TAG_ATTRIBUTE = "tag_pk"  # the `by_tag` index's partition key on a tag entry
TAG_ITEM_PREFIX = "TAG#"  # a tag entry's `job_id`: never a job's id (32 hex digits)
TAG_ENTITY = "tag"
COPIED = ("tenant_id", "status", "type", "version", "occurred_at", "expires_at")  # from the view row


def entry_id(job_id: str, key: str) -> str:
    """The `job_id` (the status table's key) of a job's entry for its tag `key`."""
    return f"{TAG_ITEM_PREFIX}{job_id}#{key}"


def job_of_entry(entry_key: str) -> str:
    """The job id in a tag entry's key (the 32 hex digits after the prefix)."""
    return entry_key[len(TAG_ITEM_PREFIX):len(TAG_ITEM_PREFIX) + 32]


def is_tag_entry(item: dict[str, Any]) -> bool:
    """Whether a status table item (wire format) is a tag entry, not a job's view row."""
    return str(item.get("job_id", {}).get("S", "")).startswith(TAG_ITEM_PREFIX)


def tag_partition(tenant_id: str, key: str, value: str, shard: int) -> str:
    return f"{tenant_id}#{key}={value}#{shard}"


def tag_entries(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The tag entries of a view row (plain values, as onward.domain.projection.view_item makes it), one per
    tag; none for a row without tags."""
    tags: dict[str, str] = row.get("tags") or {}
    shard = listing_shard(row["job_id"])
    copied = {name: row[name] for name in COPIED if row.get(name) is not None}
    return [{**copied, "job_id": entry_id(row["job_id"], key), "entity": TAG_ENTITY,
             TAG_ATTRIBUTE: tag_partition(row["tenant_id"], key, value, shard)}
            for key, value in sorted(tags.items())]


def put_tag_entries(client: Any, table: str, row: dict[str, Any]) -> int:
    """Put a view row's tag entries, each only over an older version of itself (a stale or repeated event
    changes none: its move, status and TTL stay the newest's); the number written."""
    written = 0
    for entry in tag_entries(row):
        try:
            client.put_item(TableName=table, Item=to_item(entry),
                            ConditionExpression="attribute_not_exists(job_id) OR #version < :version",
                            ExpressionAttributeNames={"#version": "version"},
                            ExpressionAttributeValues={":version": {"N": str(entry["version"])}})
            written += 1
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
    return written


def tag_query(client: Any, table: str, tenant_id: str, tag: tuple[str, str], request: dict[str, Any],
              values: dict[str, Any]) -> Query:
    """A query of one shard of the entries of `tag` (key, value), newest first, in the listing's terms
    (onward.pipeline.listing.Query): entries and their LastEvaluatedKey name the job's id in `job_id`, and a
    position's (occurred_at, job_id) resumes after that job's entry. `request`: the Query's other parts
    (projection, filter, names), `values` the filter's values."""
    key, value = tag
    base = {**request, "TableName": table, "IndexName": TAG_INDEX, "ScanIndexForward": False,
            "KeyConditionExpression": f"{TAG_ATTRIBUTE} = :p"}

    def query(shard: int, after: list[str] | None, limit: int) -> dict[str, Any]:
        partition = tag_partition(tenant_id, key, value, shard)
        start = {} if after is None else {"ExclusiveStartKey": {
            "job_id": {"S": entry_id(after[1], key)}, TAG_ATTRIBUTE: {"S": partition},
            "occurred_at": {"S": after[0]}}}
        page: dict[str, Any] = client.query(**base, Limit=limit, **start,
                                            ExpressionAttributeValues={":p": {"S": partition}, **values})
        page["Items"] = [_as_job(item) for item in page["Items"]]
        if "LastEvaluatedKey" in page:
            page["LastEvaluatedKey"] = _as_job(page["LastEvaluatedKey"])
        return page

    return query


def _as_job(item: dict[str, Any]) -> dict[str, Any]:
    """An entry (or a key) naming its job's id in `job_id`, when it names one (a count projects none)."""
    if "job_id" not in item:
        return item
    return {**item, "job_id": {"S": job_of_entry(item["job_id"]["S"])}}

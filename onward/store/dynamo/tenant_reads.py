"""A tenant's read of one item by its key (a job row, a status view row): the item only if it is that tenant's.

Reading the item and comparing its `tenant_id` afterwards answers another tenant's item with a request that
returned it, and a missing one with a request that returned nothing, and whatever the caller then does
differently (a fallback read for the missing one) shows in the time of its answer: an oracle of which ids
exist. Here the tenant is a condition of the read itself: a Query of the one key, filtered by tenant, so
DynamoDB returns no item of another tenant, and the caller meets it exactly as it meets a missing one.
"""

from __future__ import annotations

from typing import Any

from onward.store.dynamo.attributes import Item


def tenant_item(client: Any, table: str, key: Item, tenant_id: str) -> Item | None:
    """The item at `key` (wire format) if its `tenant_id` is `tenant_id`, read consistently; None otherwise."""
    items: list[Item] = client.query(
        TableName=table, ConsistentRead=True,
        KeyConditionExpression=" AND ".join(f"#k{number} = :k{number}" for number in range(len(key))),
        FilterExpression="tenant_id = :tenant",
        ExpressionAttributeNames={f"#k{number}": name for number, name in enumerate(key)},
        ExpressionAttributeValues={**{f":k{number}": value for number, value in enumerate(key.values())},
                                   ":tenant": {"S": tenant_id}})["Items"]
    return items[0] if items else None

"""Queries. moto's Query starts from `Table.all_items()`, which sorts every item of the table (comparing
DynamoType objects) before filtering on the partition key: a claim's read of one tenant's ready queue cost
O(table log table). `query` here hands moto's own query only the items of the queried partition (a dict
lookup for the table's key; a cheap string comparison for an index's string partition key), so moto's
filtering, sorting, paging and projection run unchanged on the partition alone. For a global secondary
index with a string partition key, the items of each index partition are kept in a map, built once per
index and brought up to date at each query from the items written since (every write path marks what it
touches: moto's put, update and delete, and our transactions), so an index query costs O(partition + items
written since the last one) instead of O(table): a claim reading a tenant's ready queue no longer slows as
the table grows.
"""

from __future__ import annotations

from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table


# moto's Table.items holds, by hash key, the Item of a table without a range key, or {range key -> Item} for
# a table with one; moto declares it (a defaultdict) as a map of maps for both. The two views below are the
# same dict, typed as what it holds for each kind of table.
def ranged_items(table: Table) -> dict[DynamoType, dict[DynamoType, Item]]:
    """`table.items` of a table with a range key."""
    return table.items


def unranged_items(table: Table) -> dict[DynamoType, Item]:
    """`table.items` of a table without a range key."""
    return table.items  # type: ignore[return-value]  # moto declares a map of maps (see above)


def _all_items(table: Table) -> list[Item]:
    if table.range_key_attr:
        return [item for row in ranged_items(table).values() for item in row.values()]
    return list(unranged_items(table).values())


def _partition(table: Table, hash_key: DynamoType | None, index_name: str | None,
               hash_key_conditions: list[tuple[str, DynamoType]] | None) -> list[Item] | None:
    """The items a query can match, or None when only moto's full scan can tell."""
    if index_name is None and hash_key is not None:
        if table.range_key_attr:
            row = ranged_items(table).get(hash_key)
            return [] if row is None else list(row.values())
        found = unranged_items(table).get(hash_key)
        return [] if found is None else [found]
    if index_name is not None and hash_key_conditions and len(hash_key_conditions) == 1:
        name, value = hash_key_conditions[0]
        index = next((i for i in table.global_indexes if i.name == index_name), None)
        if index is not None and value.type == "S" and [
                k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] == [name]:
            return _index_partitions(table, index_name, name).items(table, value.value)
    if index_name is not None and hash_key_conditions and all(v.type == "S" for _, v in hash_key_conditions):
        wanted = [(name, value.value) for name, value in hash_key_conditions]
        return [
            item for item in _all_items(table)
            if all((attr := item.attrs.get(name)) is not None and attr.type == "S" and attr.value == value
                   for name, value in wanted)
        ]
    return None


def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
    """moto's query, over the queried partition only instead of the whole sorted table."""
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    items = _partition(self, hash_key, index_name, kwargs.get("hash_key_conditions"))
    if items is None:
        return _original_query(self, hash_key, *args, **kwargs)
    # Replaced on this table for this one call (requests are serialized: infra/endpoint.py)
    self.all_items = lambda: items  # type: ignore[method-assign]  # a deliberate per-instance patch
    try:
        return _original_query(self, hash_key, *args, **kwargs)
    finally:
        del self.all_items


Identity = tuple[DynamoType, DynamoType | None]  # an item's (hash key, range key)
_generation = 0  # bumped by install/uninstall: a map built under another generation may have missed writes


def _lookup(table: Table, identity: Identity) -> Item | None:
    hash_key, range_key = identity
    if range_key is None:
        return unranged_items(table).get(hash_key)
    row = ranged_items(table).get(hash_key)
    return None if row is None else row.get(range_key)


class _IndexPartitions:
    """index partition key value -> the identities of the items in that partition, for one index."""

    def __init__(self, table: Table, attribute: str) -> None:
        self.attribute = attribute
        self.generation = _generation
        self.pending: set[Identity] = set()
        self._members: dict[str, dict[Identity, None]] = {}
        self._partition_of: dict[Identity, str] = {}
        if table.range_key_attr is None:
            for hash_key, found in unranged_items(table).items():
                self._place((hash_key, None), found)
        else:
            for hash_key, row in ranged_items(table).items():
                for range_key, item in row.items():
                    self._place((hash_key, range_key), item)

    def _place(self, identity: Identity, item: Item | None) -> None:
        old = self._partition_of.pop(identity, None)
        if old is not None:
            members = self._members[old]
            members.pop(identity, None)
            if not members:
                del self._members[old]
        attribute = None if item is None else item.attrs.get(self.attribute)
        if attribute is not None and attribute.type == "S":
            self._members.setdefault(attribute.value, {})[identity] = None
            self._partition_of[identity] = attribute.value

    def items(self, table: Table, value: str) -> list[Item]:
        for identity in self.pending:
            self._place(identity, _lookup(table, identity))
        self.pending.clear()
        found = (_lookup(table, identity) for identity in self._members.get(value, {}))
        return [item for item in found if item is not None]


def _index_partitions(table: Table, index_name: str, attribute: str) -> _IndexPartitions:
    maps: dict[str, _IndexPartitions] = table.__dict__.setdefault("_onward_index_partitions", {})
    current = maps.get(index_name)
    if current is None or current.generation != _generation or current.attribute != attribute:
        current = maps[index_name] = _IndexPartitions(table, attribute)
    return current


def mark_written(table: Table, identity: Identity) -> None:
    for partitions in table.__dict__.get("_onward_index_partitions", {}).values():
        partitions.pending.add(identity)
    on_write = table.__dict__.get("_onward_on_write")  # retention.py's TTL index, on a table it sweeps
    if on_write is not None:
        on_write(identity)


def _identity_of(table: Table, attributes: dict[str, Any]) -> Identity:
    range_key = DynamoType(attributes[table.range_key_attr]) if table.range_key_attr else None
    return DynamoType(attributes[table.hash_key_attr]), range_key


def table_put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return _original_table_put_item(self, item_attrs, *args, **kwargs)
    finally:
        if self.hash_key_attr in item_attrs and (self.range_key_attr is None or self.range_key_attr in item_attrs):
            mark_written(self, _identity_of(self, item_attrs))


def table_delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Any:
    try:
        return _original_table_delete_item(self, hash_key, range_key)
    finally:
        mark_written(self, (hash_key, range_key if self.range_key_attr else None))


def update_item(self: DynamoDBBackend, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """moto updates an item in place: mark it written whatever happens."""
    try:
        return _original_update_item(self, table_name, key, *args, **kwargs)
    finally:
        try:
            table = self.get_table(table_name)  # a name or an ARN
        except Exception:  # noqa: BLE001 - no such table: nothing was written
            table = None
        if table is not None and table.hash_key_attr in key:
            mark_written(table, _identity_of(table, key))


def forget_items(table: Table) -> None:
    """Drop the table's index maps: call after changing `table.items` other than through a write path (the
    next index query builds them again from the items then)."""
    table.__dict__.pop("_onward_index_partitions", None)


def new_generation() -> None:
    """Invalidate every index map (moto's own write paths, once put back, do not mark what they write)."""
    global _generation
    _generation += 1


_original_update_item = DynamoDBBackend.update_item
_original_query = Table.query
_original_table_put_item = Table.put_item
_original_table_delete_item = Table.delete_item

PATCHES = (
    (DynamoDBBackend, "update_item", update_item),
    (Table, "query", query),
    (Table, "put_item", table_put_item),
    (Table, "delete_item", table_delete_item),
)

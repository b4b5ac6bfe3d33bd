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

With a Limit, such an index query (an index with a range key) hands moto only the partition's first items in
moto's own query order, kept sorted per partition in the same maps: moto then sorts, skips, counts, filters
and projects those alone, and its answer is the answer over the whole partition whenever it stops among them
(`_limited_query` says why); so a claim (Limit 8) no longer slows as its ready queue grows either.

What a Query or Scan answers (projections, the items it hands out uncopied): query_results.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from decimal import Decimal
from typing import Any

from moto.dynamodb.comparisons import get_comparison_func
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


def unsorted_items(table: Table) -> list[Item]:
    """Every item of the table, in no particular order."""
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
            return _index_partitions(table, index_name, name, _range_attribute(index)).items(table, value.value)
    if index_name is not None and hash_key_conditions and all(v.type == "S" for _, v in hash_key_conditions):
        wanted = [(name, value.value) for name, value in hash_key_conditions]
        return [
            item for item in unsorted_items(table)
            if all((attr := item.attrs.get(name)) is not None and attr.type == "S" and attr.value == value
                   for name, value in wanted)
        ]
    return None


def _range_attribute(index: Any) -> str | None:
    ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
    return ranges[0] if len(ranges) == 1 else None


def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
    """moto's query, over the queried partition only instead of the whole sorted table; with a Limit, over
    the partition's first items in the query's order only (see _limited_query)."""
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    limit = args[2] if len(args) > 2 else kwargs.get("limit")
    hash_key_conditions = kwargs.get("hash_key_conditions")
    if isinstance(limit, int) and index_name is not None and hash_key_conditions and len(hash_key_conditions) == 1:
        answer = _limited_query(self, hash_key, index_name, limit, args, kwargs)
        if answer is not None:
            return answer
    items = _partition(self, hash_key, index_name, hash_key_conditions)
    if items is None:
        return _original_query(self, hash_key, *args, **kwargs)
    return _query_over(self, items, hash_key, args, kwargs)


def _query_over(table: Table, items: list[Item], hash_key: DynamoType | None, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """moto's query, with `items` standing for every item of the table."""
    # Replaced on this table for this one call (requests are serialized: infra/onward_infra/endpoint.py)
    table.all_items = lambda: items  # type: ignore[method-assign]  # a deliberate per-instance patch
    try:
        return _original_query(table, hash_key, *args, **kwargs)
    finally:
        del table.all_items


def _limited_query(table: Table, hash_key: DynamoType | None, index_name: str, limit: int,
                   args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """moto's answer to a Query with a Limit on a global secondary index with a string partition key and one
    range key, from the items moto would examine before it stops; None when that cannot be told.

    moto sorts every item of the partition, skips those up to ExclusiveStartKey, then examines the others in
    order until it holds `limit` items matching the range condition (or 1 MB) and stops at the next one,
    which sets LastEvaluatedKey; the filter expression and projections apply to what it holds. Given only
    the items from the first one not skipped to the one where it stops, in the same order, moto makes
    exactly the same steps and gives the same answer. The order is kept per partition (_IndexPartitions),
    each item's key values as Python values (Decimal for N, str for S): they order exactly as moto's
    DynamoType comparisons do when every key value of the partition (and of ExclusiveStartKey) has its
    declared type; otherwise moto queries the whole partition. The items skipped are found by bisection,
    and where moto will stop by evaluating moto's own comparison function on those values (what
    DynamoType.compare does). Should moto not stop among the items handed to it (it always does, unless
    this reckoning is wrong), it is handed every item not skipped, and that answer is returned."""
    name, value = kwargs["hash_key_conditions"][0]
    index = next((i for i in table.global_indexes if i.name == index_name), None)
    if index is None or value.type != "S" or [
            k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] != [name]:
        return None
    range_attribute = _range_attribute(index)
    if range_attribute is None:
        return None
    partitions = _index_partitions(table, index_name, name, range_attribute)
    order = partitions.order(table, value.value)
    if order is None:
        return None
    exclusive_start_key = args[3] if len(args) > 3 else kwargs.get("exclusive_start_key")
    forward = (args[4] if len(args) > 4 else kwargs.get("scan_index_forward")) is not False
    if exclusive_start_key is not None:
        start = partitions.start_key(exclusive_start_key, name, value.value)
        if start is None:
            return None  # moto's own comparisons decide (or fail)
        # moto skips the items up to the start key, itself included: those <= it (forward), >= it (backward)
        order = order[bisect_right(order, start):] if forward else order[:bisect_left(order, start)]
    examined = order if forward else order[::-1]
    count = _examined_until_stop(examined, limit, args, kwargs, range_attribute, forward=forward)
    items = partitions.items_of(table, examined[:count])
    if items is None:
        return None
    answer = _query_over(table, items, hash_key, args, kwargs)
    if answer[2] is not None or count >= len(examined):  # LastEvaluatedKey: moto stopped among these items
        return answer
    everything = partitions.items_of(table, examined)
    return None if everything is None else _query_over(table, everything, hash_key, args, kwargs)


def _examined_until_stop(examined: list[OrderKey], limit: int, args: tuple[Any, ...], kwargs: dict[str, Any],
                         range_attribute: str, *, forward: bool) -> int:
    """How many items, from the first, moto examines before it stops: up to the `limit`-th matching the
    range condition, and one more; all of them when fewer match (or when this cannot be told)."""
    range_comparison = args[0] if args else kwargs.get("range_comparison")
    range_objs = args[1] if len(args) > 1 else kwargs.get("range_objs")
    conditions = kwargs.get("range_key_conditions")
    filter_kwargs = set(kwargs) - _QUERY_KEYWORDS
    if limit < 1 or filter_kwargs:
        return len(examined)
    if not range_comparison:
        return limit + 1
    compared = conditions[-1][0] if conditions else range_attribute  # moto's range_attr_for_comparison
    function = get_comparison_func(range_comparison)
    if compared != range_attribute or function is None:
        return len(examined)
    # Key conditions match a run of consecutive items of the order; with `<` / `<=` going forward (`>` / `>=`
    # backward) that run starts at the first item, with `>` / `>=` (`<` / `<=` backward) it ends at the last
    # one (found by bisection). Past the run nothing more matches: moto examines them all. (A wrong count
    # costs time, never exactness: see _limited_query.)
    run_starts_first = range_comparison in (_BELOW if forward else _ABOVE)
    run_ends_last = range_comparison in (_ABOVE if forward else _BELOW)
    try:
        bounds = [bound.cast_value for bound in range_objs or []]
        if run_ends_last:
            low, high = 0, len(examined)
            while low < high:
                middle = (low + high) // 2
                if function(examined[middle][0], *bounds):
                    high = middle
                else:
                    low = middle + 1
            return low + limit + 1
        found = 0
        for position, key in enumerate(examined):
            if function(key[0], *bounds):  # key[0]: the range key's value, as DynamoType.cast_value gives it
                found += 1
                if found == limit:
                    return position + 2
            elif found or run_starts_first:
                return len(examined)
    except Exception:  # noqa: BLE001 - mismatched types...: moto examines them all (and fails as it does)
        return len(examined)
    return len(examined)


_BELOW = frozenset({"<", "<=", "LT", "LE"})
_ABOVE = frozenset({">", ">=", "GT", "GE"})


# Table.query's keyword parameters; any other keyword is a legacy QueryFilter condition (moto's filter_kwargs)
_QUERY_KEYWORDS = frozenset({"range_comparison", "range_objs", "limit", "exclusive_start_key", "scan_index_forward",
                             "projection_expressions", "index_name", "consistent_read", "filter_expression",
                             "hash_key_conditions", "range_key_conditions"})


Identity = tuple[DynamoType, DynamoType | None]  # an item's (hash key, range key)
_generation = 0  # bumped by install/uninstall: a map built under another generation may have missed writes


def lookup(table: Table, identity: Identity) -> Item | None:
    """The item stored at `identity` in `table`, or None."""
    hash_key, range_key = identity
    if range_key is None:
        return unranged_items(table).get(hash_key)
    row = ranged_items(table).get(hash_key)
    return None if row is None else row.get(range_key)


OrderKey = tuple[Any, ...]  # the index range key's value, then the table's hash and range keys' (Decimal / str)


class _Odd:
    """An item's order key when one of its key attributes is not of its declared type (S or N)."""


_ODD = _Odd()


class _IndexPartitions:
    """index partition key value -> the identities of the items in that partition, for one index; and the
    items of each partition having the index's range key, in moto's query order (`first`)."""

    def __init__(self, table: Table, attribute: str, range_attribute: str | None = None) -> None:
        self.attribute = attribute
        self.range_attribute = range_attribute
        self.generation = _generation
        self.pending: set[Identity] = set()
        self._members: dict[str, dict[Identity, None]] = {}
        self._partition_of: dict[Identity, str] = {}
        declared = {a["AttributeName"]: a["AttributeType"] for a in table.attr}
        self._ordered_by = [(name, declared.get(name)) for name in (range_attribute, table.hash_key_attr,
                                                                    table.range_key_attr) if name is not None]
        self._order: dict[str, list[OrderKey]] = {}  # partition -> its items' order keys, ascending
        self._identity_of: dict[OrderKey, Identity] = {}
        self._order_key_of: dict[Identity, OrderKey] = {}
        self._odd: dict[str, set[Identity]] = {}  # partition -> its items with an _ODD order key
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
            self._unorder(old, identity)
        attribute = None if item is None else item.attrs.get(self.attribute)
        if item is not None and attribute is not None and attribute.type == "S":
            self._members.setdefault(attribute.value, {})[identity] = None
            self._partition_of[identity] = attribute.value
            self._order_item(attribute.value, identity, item)

    def _order_key(self, item: Item) -> OrderKey | _Odd | None:
        """The item's place in moto's query order; None: not a candidate (no range key value)."""
        if self.range_attribute is None or self.range_attribute not in item.attrs:
            return None
        key: list[Any] = []
        for name, declared in self._ordered_by:
            value = item.attrs.get(name)
            if value is None or value.type != declared:
                return _ODD
            if declared == "S" and isinstance(value.value, str):
                key.append(value.value)
            elif declared == "N" and isinstance(value.value, str):
                try:
                    number = Decimal(value.value)  # moto's DynamoType.cast_value
                except ArithmeticError:
                    return _ODD
                if not number.is_finite():  # (moto refuses them: never compared here)
                    return _ODD
                key.append(number)
            else:
                return _ODD
        return tuple(key)

    def _order_item(self, partition: str, identity: Identity, item: Item) -> None:
        key = self._order_key(item)
        if key is None:
            return
        if isinstance(key, _Odd) or key in self._identity_of:  # (equal keys: not expected of two items)
            self._odd.setdefault(partition, set()).add(identity)
            return
        insort(self._order.setdefault(partition, []), key)
        self._identity_of[key] = identity
        self._order_key_of[identity] = key

    def _unorder(self, partition: str, identity: Identity) -> None:
        key = self._order_key_of.pop(identity, None)
        if key is not None:
            order = self._order[partition]
            del order[bisect_left(order, key)]
            if not order:
                del self._order[partition]
            del self._identity_of[key]
        odd = self._odd.get(partition)
        if odd is not None:
            odd.discard(identity)
            if not odd:
                del self._odd[partition]

    def _bring_up_to_date(self, table: Table) -> None:
        for identity in self.pending:
            self._place(identity, lookup(table, identity))
        self.pending.clear()

    def items(self, table: Table, value: str) -> list[Item]:
        self._bring_up_to_date(table)
        found = (lookup(table, identity) for identity in self._members.get(value, {}))
        return [item for item in found if item is not None]

    def order(self, table: Table, value: str) -> list[OrderKey] | None:
        """The order keys of the partition's items having the range key, ascending (moto's query order); None
        when that order is not known (a key value of the partition's items is not of its declared type).
        Read only: the list is the map's own."""
        self._bring_up_to_date(table)
        if value in self._odd:
            return None
        return self._order.get(value, [])

    def items_of(self, table: Table, keys: list[OrderKey]) -> list[Item] | None:
        items = [lookup(table, self._identity_of[key]) for key in keys]
        return None if any(item is None for item in items) else [item for item in items if item is not None]

    def start_key(self, exclusive_start_key: dict[str, Any], attribute: str, value: str) -> OrderKey | None:
        """ExclusiveStartKey's order key; None unless each of its key values has its declared type, and its
        index partition key is this partition's."""
        if exclusive_start_key.get(attribute) != {"S": value}:
            return None
        key: list[Any] = []
        for name, declared in self._ordered_by:
            found = exclusive_start_key.get(name)
            if not isinstance(found, dict) or len(found) != 1 or not isinstance(found.get(declared), str):
                return None
            try:
                native = Decimal(found[declared]) if declared == "N" else found[declared]
            except ArithmeticError:
                return None
            if declared not in ("S", "N") or (isinstance(native, Decimal) and not native.is_finite()):
                return None
            key.append(native)
        return tuple(key)


def _index_partitions(table: Table, index_name: str, attribute: str, range_attribute: str | None) -> _IndexPartitions:
    maps: dict[str, _IndexPartitions] = table.__dict__.setdefault("_onward_index_partitions", {})
    current = maps.get(index_name)
    if current is None or current.generation != _generation or current.attribute != attribute or (
            current.range_attribute != range_attribute):
        current = maps[index_name] = _IndexPartitions(table, attribute, range_attribute)
    return current


SCAN_ORDER = "_onward_scan_order"  # scans.py's order of a table's items, kept until the table is written


def generation() -> int:
    """The fixes' generation: every map kept on a table is stale once it changes (new_generation)."""
    return _generation


def mark_written(table: Table, identity: Identity) -> None:
    table.__dict__.pop(SCAN_ORDER, None)
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
    next index query builds them again from the items then), and its kept scan order."""
    table.__dict__.pop("_onward_index_partitions", None)
    table.__dict__.pop(SCAN_ORDER, None)


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

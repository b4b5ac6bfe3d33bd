"""Scans. moto's Scan sorts every item of the table (`Table.all_items`, comparing DynamoType objects in
Python) and then, for a page after the first (ExclusiveStartKey), walks the sorted items from the start,
comparing each with the start key, until it passes it: every page cost O(table log table) plus O(table) of
such comparisons, so reading a table page by page was quadratic (the 20,000-job soak's audit read its
tables for minutes, and botocore's retries of a page that timed out piled more Scans behind them).

`all_items` sorts by the same keys as moto (each key attribute's `cast_value`: Decimal for numbers, the
string, the stored binary), compared as plain values; `scan` keeps that order on the table between Scans
until the table is written, finds a page's first item by bisection in it and hands moto's own scan only the
items from there on, with no start key: moto's filtering, segments, limits, sizes, counts, projections and
LastEvaluatedKey run unchanged, and reading a table page by page costs O(table) in all. Index scans are
moto's.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

from onward_infra.moto_fixes import queries

OrderKey = tuple[Any, ...]
SCAN_ORDER = queries.SCAN_ORDER  # the attribute of a table that keeps its scan order between Scans


def _order_key(item: Item) -> OrderKey:
    """An item's place in moto's scan order, as plain values."""
    if item.range_key is not None:
        return (item.hash_key.cast_value, item.range_key.cast_value)
    return (item.hash_key.cast_value,)


def all_items(self: Table) -> list[Item]:
    """moto's `Table.all_items`: every item, in key order."""
    return sorted(queries.unsorted_items(self), key=_order_key)


def _start_key(table: Table, exclusive_start_key: dict[str, Any]) -> OrderKey | None:
    """The start key's place in that order; None when it does not name the table's key attributes."""
    try:
        hash_value = DynamoType(exclusive_start_key[table.hash_key_attr]).cast_value
        if table.range_key_attr is None:
            return (hash_value,)
        return (hash_value, DynamoType(exclusive_start_key[table.range_key_attr]).cast_value)
    except (KeyError, TypeError, IndexError, ArithmeticError):
        return None


def _scan_order(table: Table) -> tuple[list[OrderKey], list[Item]]:
    """The table's items in scan order with their keys, kept between Scans until the table is written (every
    write path marks what it writes: queries.mark_written drops this too) or the fixes are reinstalled."""
    kept = table.__dict__.get(SCAN_ORDER)
    if kept is not None and kept[0] == queries.generation():
        return kept[1], kept[2]
    ordered = sorted(((_order_key(item), item) for item in queries.unsorted_items(table)), key=itemgetter(0))
    keys, items = [key for key, _ in ordered], [item for _, item in ordered]
    table.__dict__[SCAN_ORDER] = (queries.generation(), keys, items)
    return keys, items


def scan(self: Table, filters: dict[str, Any], limit: int, exclusive_start_key: Any, *args: Any,
         **kwargs: Any) -> Any:
    """moto's `Table.scan`; a table's pages start by bisection in an order kept between pages (see the
    module's docstring)."""
    index_name = args[1] if len(args) > 1 else kwargs.get("index_name")
    if index_name:
        return _original_scan(self, filters, limit, exclusive_start_key, *args, **kwargs)
    start = None if exclusive_start_key is None else _start_key(self, exclusive_start_key)
    if exclusive_start_key is not None and start is None:
        return _original_scan(self, filters, limit, exclusive_start_key, *args, **kwargs)
    keys, items = _scan_order(self)
    following = items if start is None else items[bisect_right(keys, start):]  # past the start key, as moto
    self.all_items = lambda: following  # type: ignore[method-assign]  # this call's, removed below
    try:
        no_start: Any = None  # moto reads None as "the first page" (and declares a dict)
        return _original_scan(self, filters, limit, no_start, *args, **kwargs)
    finally:
        del self.all_items


_original_scan = Table.scan

PATCHES = (
    (Table, "all_items", all_items),
    (Table, "scan", scan),
)

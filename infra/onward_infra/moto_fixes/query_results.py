"""What a Query or Scan answers, built without the copies and conversions moto made.

`Item.project` (index projections, ProjectionExpression) converted the whole item to Python values once per
projected path; `item_project` converts it once, and only the path's attribute for each further path.

moto's Table.query deep-copies the items it found (the stored ones) before projecting and filtering them:
about a twentieth of the endpoint's CPU. The copy came with moto's projection of 2017, which deleted the
unwanted attributes from the item itself (getmoto/moto#1334); projections now build new items, filters only
read, and the Query handler converts the answer's items to plain values (fresh lists and dicts, immutable
leaves) before it returns (DynamoResult). So while the Query handler runs (`handler_query`), the copy is
skipped (`_QueryResultsCopy`) for every item whose copy could not differ from it: moto's copy makes a list of
a set's value, so an item holding a set whose value is not a list (a malformed request can store "abc" as a
string set, answered as ["a", "b", "c"]), or anything else than DynamoTypes in lists and maps, is still
copied. Any other caller of Table.query (the meter, a test) gets moto's copy. A Scan's items likewise
(Table.scan copies each item it keeps, before an index's projection, which builds a new item; the Scan
handler answers their attributes converted to plain values): while the Scan handler runs (`handler_scan`).
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.utils import merge_dicts
from moto.dynamodb.models import table as moto_table_module
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict, deserializer, serializer
from moto.dynamodb.models.utilities import find_nested_key
from moto.dynamodb.responses import DynamoHandler

_LIST_ELEMENT = re.compile(r"(.+)\[(\d+)\]$")  # moto's find_nested_key's pattern for `name[i]`


def item_project(self: Item, projection_expressions: list[list[str]]) -> Item:
    """moto's Item.project, without converting the whole item again for each projected path: moto's
    find_nested_key reads only the path's top-level attribute, so the first path reads the whole item
    converted (converting it raises whatever moto's would: a number boto3's context rejects...), and each
    further one a fresh conversion of that attribute alone, as moto's fresh conversion of the whole item
    would give it."""
    result: dict[str, Any] = {}
    converted_whole = False
    for expression in projection_expressions:
        if not converted_whole:
            source = self.to_regular_json()
            converted_whole = True
        else:
            source = _top_level_attributes(self, expression)
        merge_dicts(result, find_nested_key(expression, source))
    return Item(hash_key=self.hash_key, range_key=self.range_key, attrs=serializer.serialize(result)["M"])


def _top_level_attributes(item: Item, expression: list[str]) -> dict[str, Any]:
    """What find_nested_key(expression, item.to_regular_json()) reads of the converted item, converted."""
    if not expression or not isinstance(expression[0], str):
        return item.to_regular_json()  # moto's own failure, whatever it is
    names = {expression[0]}
    element = _LIST_ELEMENT.match(expression[0])
    if element is not None:
        names.add(element.group(1))
    return {name: deserializer.deserialize(item.attrs[name].to_regular_json())
            for name in item.attrs if name in names}


class _Answering(threading.local):
    """Whether this thread reads Table.query's or Table.scan's results without changing or keeping them
    (`results_read_only`)."""

    query = False


_answering = _Answering()


@contextmanager
def results_read_only() -> Iterator[None]:
    """Table.query's and Table.scan's results, while this lasts (in this thread), not deep-copied where the
    copy could not differ from them (see the module's docstring): for a caller that neither changes them nor
    keeps them past the request, as the Query and Scan handlers."""
    before = _answering.query
    _answering.query = True
    try:
        yield
    finally:
        _answering.query = before


def handler_query(self: DynamoHandler) -> Any:
    """moto's Query handler, its items not deep-copied by Table.query where that cannot change its answer
    (see the module's docstring): it converts them to plain values before it returns."""
    with results_read_only():
        return _original_handler_query(self)


def handler_scan(self: DynamoHandler) -> Any:
    """moto's Scan handler, its items not deep-copied by Table.scan where that cannot change its answer (see
    the module's docstring): it converts their attributes to plain values before it returns."""
    with results_read_only():
        return _original_handler_scan(self)


_SET_TYPES = frozenset({"SS", "NS", "BS"})


def _copy_is_the_same(values: Any) -> bool:
    """Whether moto's deep copy of these attribute values (DynamoType.__deepcopy__) would be equal to them,
    member for member and type for type: every one a DynamoType, each set's value a list, each list's a list
    and each map's a dict of such values (the copy shares any other value as it is)."""
    for value in values:
        if type(value) is not DynamoType:
            return False
        kind = value.type
        if kind == "S" or kind == "N":
            continue
        held = value.value
        if kind == "M":
            if type(held) is not dict or not _copy_is_the_same(held.values()):
                return False
        elif kind == "L":
            if type(held) is not list or not _copy_is_the_same(held):
                return False
        elif kind in _SET_TYPES and type(held) is not list:
            return False
    return True


def _copy_would_be_the_same(value: Any) -> bool:
    """Whether `value` is an Item whose deep copy would be equal to it (see `_copy_is_the_same`)."""
    return type(value) is Item and type(value.attrs) is LimitedSizeDict and _copy_is_the_same(value.attrs.values())


class _QueryResultsCopy:
    """The `copy` module as moto's table module sees it. While the Query or Scan handler runs, its `deepcopy`
    of a list (Table.query's copy of its results) keeps each item whose copy would be the same
    (`_copy_would_be_the_same`) and deep-copies the others, and of such an item (Table.scan's copy of each
    item) keeps it; any other call is the copy module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if _answering.query:
            if type(value) is list:
                return [item if _copy_would_be_the_same(item) else copy.deepcopy(item) for item in value]
            if _copy_would_be_the_same(value):
                return value
        return copy.deepcopy(value, memo)


_original_handler_query = DynamoHandler.query
_original_handler_scan = DynamoHandler.scan

PATCHES = (
    (Item, "project", item_project),
    (DynamoHandler, "query", handler_query),
    (DynamoHandler, "scan", handler_scan),
    (moto_table_module, "copy", _QueryResultsCopy()),
)

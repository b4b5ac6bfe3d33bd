"""The embedded endpoint's item sizes and Query copies give exactly moto's answers
(infra/onward_infra/moto_fixes/sizes.py, and queries.py's Query results not deep-copied).

Sizes are compared with moto's own methods (`sizes._original_*`, read before anything was patched), run with
every size method of moto's in place (`moto_sizes()`), over generated attribute values of every type, nested,
unicode and large, and at moto's 405,000-byte item limit. Query answers are compared with stock moto
(`moto_fixes.uninstall()`) on the same endpoint: requests are serialized and tests run one at a time.
Each test's docstring says how it would break without the code.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import string
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models import table as moto_table_module
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.responses import DynamoHandler

from onward_infra.endpoint import REGION, EmbeddedEndpoint
from onward_infra.moto_fixes import queries, query_results, sizes
from onward_infra_tests.moto_fixes.test_endpoint_hot_paths import answer_or_error, stock_moto

LIMIT = sizes.MAX_ITEM_SIZE
_MOTO_SIZES = ((DynamoType, "size", sizes._original_dynamo_type_size), (Item, "size", sizes._original_item_size),
               (LimitedSizeDict, "__setitem__", sizes._original_limited_size_dict_setitem),
               (Item, "__init__", sizes._original_item_init))


@contextmanager
def moto_sizes() -> Iterator[None]:
    """moto's own size methods in place for the duration (whatever was there put back after)."""
    current = [(owner, name, vars(owner)[name]) for owner, name, _ in _MOTO_SIZES]
    for owner, name, original in _MOTO_SIZES:
        setattr(owner, name, original)
    try:
        yield
    finally:
        for owner, name, kept in current:
            setattr(owner, name, kept)


def outcome(compute: Callable[[], Any]) -> Any:
    """What `compute` returns, or the type of what it raises."""
    try:
        return compute()
    except Exception as error:  # noqa: BLE001 - the exception's type is the outcome compared
        return type(error)


# --- generated attribute values (as the wire holds them) --------------------------------------------------

_texts = st.text(max_size=12) | st.text(alphabet="é中😀x", max_size=6) | st.integers(0, 3000).map(lambda n: "ü" * n)
_numbers = st.decimals(allow_nan=False, allow_infinity=False).map(str) | st.integers().map(str)
_binaries = st.binary(max_size=12) | st.sampled_from(["QUJD", "", "eA=="])  # bytes, or base64 text as received
_leaves = st.one_of(
    _texts.map(lambda text: {"S": text}),
    _numbers.map(lambda number: {"N": number}),
    st.integers().map(lambda number: {"N": number}),  # (not from the wire: moto counts len(str(value)))
    _binaries.map(lambda binary: {"B": binary}),
    st.booleans().map(lambda flag: {"BOOL": flag}),
    st.booleans().map(lambda flag: {"NULL": flag}),
    st.lists(_texts, max_size=4).map(lambda members: {"SS": members}),
    st.lists(_numbers, max_size=4).map(lambda members: {"NS": members}),
    st.lists(_binaries, max_size=4).map(lambda members: {"BS": members}),
    _texts.map(lambda text: {"SS": text}),  # a set's value that is not a list (a malformed request stores it)
)
values = st.recursive(_leaves, lambda children: st.one_of(
    st.lists(children, max_size=4).map(lambda members: {"L": members}),
    st.dictionaries(_texts, children, max_size=4).map(lambda members: {"M": members})), max_leaves=25)
names = st.text(min_size=1, max_size=8) | st.sampled_from(["pk", "sk", "state", "ñame"])
attribute_maps = st.dictionaries(names, values, max_size=8)


@settings(max_examples=400, deadline=None)
@given(values)
def test_value_sizes_are_moto_s(value: dict[str, Any]) -> None:
    """`value_size` is moto's DynamoType.size() for every type, nested, unicode and large. Without its
    quirks kept (a number's characters, a boolean or NULL as 1, a binary's base64 text, a string set's value
    that is a string sized character by character, a map's keys' UTF-8 bytes) it differs."""
    typed = DynamoType(value)
    with moto_sizes():
        expected = outcome(lambda: sizes._original_dynamo_type_size(typed))
    assert outcome(lambda: sizes.value_size(typed)) == expected


@settings(max_examples=200, deadline=None)
@given(attribute_maps)
def test_item_sizes_are_moto_s(attributes: dict[str, Any]) -> None:
    """`item_size` is moto's Item.size(): each attribute's name in UTF-8 bytes (not characters) and value."""
    item = Item(DynamoType({"S": "h"}), None, {})
    dict.update(item.attrs, {name: DynamoType(value) for name, value in attributes.items()})
    with moto_sizes():
        expected = outcome(lambda: sizes._original_item_size(item))
    assert outcome(lambda: sizes.item_size(item)) == expected


def test_plain_members_below_a_map_are_sized_and_below_lists_only_fail_as_moto_s() -> None:
    """moto sizes a map's members as fresh DynamoTypes, which wraps a plain {type: value} member of the lists
    below them; reached only through lists, such a member has no size() (AttributeError). Without `rewrapped`
    the first two differ from moto's."""
    below_map = DynamoType({"M": {}})
    below_map.value["m"] = {"L": [{"S": "xy"}]}  # plain dicts, as moto's executors could leave them
    nested_list = DynamoType({"M": {"l": {"L": []}}})
    nested_list.value["l"].value.append({"M": {"k": {"N": "12"}}})
    top_list = DynamoType({"L": []})
    top_list.value.append({"S": "x"})
    for value in (below_map, nested_list, top_list):
        with moto_sizes():
            expected = outcome(lambda value=value: sizes._original_dynamo_type_size(value))
        assert outcome(lambda value=value: sizes.value_size(value)) == expected
    assert sizes.value_size(below_map) == 3 and sizes.value_size(nested_list) == 4
    assert outcome(lambda: sizes.value_size(top_list)) is AttributeError


# --- moto's 405,000-byte item limit -------------------------------------------------------------------------

_FILLERS = ("x", "é", "中")


def attributes_size(attributes: dict[str, Any]) -> int:
    """The size of an item holding these attributes (which may be past the limit)."""
    return sum(len(name.encode()) + sizes.value_size(DynamoType(value)) for name, value in attributes.items())


@st.composite
def items_near_the_limit(draw: st.DrawFn) -> dict[str, Any]:
    """Attributes whose sizes add up to within a few bytes of the limit at one of them (a filler string put
    among them), sometimes followed by an attribute moto cannot even read ({}: IndexError when it reaches
    it, so refusing at the right attribute and refusing at the end differ)."""
    attributes = draw(st.dictionaries(names, values, max_size=5))
    filler_name = draw(st.sampled_from(["filler", "fïller"]))
    attributes.pop(filler_name, None)
    size = attributes_size(attributes)
    room = LIMIT - size - len(filler_name.encode()) + draw(st.integers(-4, 4))
    character = draw(st.sampled_from(_FILLERS))
    filler = character * (room // len(character.encode())) + "x" * (room % len(character.encode()))
    position = draw(st.integers(0, len(attributes)))
    ordered = list(attributes.items())
    ordered.insert(position, (filler_name, {"S": filler}))
    if draw(st.booleans()):
        ordered.append(("unreadable", {}))
    return dict(ordered)


def _built(build: Callable[[], Item]) -> Any:
    item = outcome(build)
    return item if isinstance(item, type) else (type(item.attrs), item.to_json(), sizes.item_size(item))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items_near_the_limit() | attribute_maps)
def test_items_are_built_and_refused_as_moto_builds_them(attributes: dict[str, Any]) -> None:
    """`item_init` builds the same item as moto's Item.__init__, or raises what it raises at the same
    attribute: ItemSizeTooLarge at the attribute that takes the item past 405,000 bytes (not at the end:
    an unreadable attribute after it would raise IndexError first), at 405,001 and not at 405,000. Without
    the running size counted as moto counts it (UTF-8 bytes, the refused attribute not added) it differs."""
    hash_key = DynamoType({"S": "h"})
    with moto_sizes():
        expected = _built(lambda: Item(hash_key, None, attributes))

    def ours() -> Item:
        item = Item.__new__(Item)
        sizes.item_init(item, hash_key, None, attributes)
        return item

    assert _built(ours) == expected


def test_the_limit_is_moto_s_to_the_byte() -> None:
    """An item of exactly 405,000 bytes is built, one of 405,001 refused (the filler's name and value count);
    a two-byte character counts two. Without the limit or the byte count it differs."""
    for filler, refused in (("x" * (LIMIT - 1), False), ("x" * LIMIT, True), ("é" * 202_499 + "x", False),
                            ("é" * 202_500, True)):
        attributes = {"f": {"S": filler}}
        with moto_sizes():
            assert outcome(lambda attributes=attributes: Item(DynamoType({"S": "h"}), None, attributes) and None) == (
                ItemSizeTooLarge if refused else None)
        item = Item.__new__(Item)
        assert outcome(lambda item=item, attributes=attributes: sizes.item_init(
            item, DynamoType({"S": "h"}), None, attributes)) == (ItemSizeTooLarge if refused else None)


@st.composite
def setting_near_the_limit(draw: st.DrawFn) -> tuple[dict[str, Any], str, Any]:
    """What an item holds, the attribute set on it (an existing one, replaced, or a new one) and its value: a
    DynamoType near the limit, or a value that is not one (moto counts its str())."""
    held = draw(st.dictionaries(names, values, min_size=1, max_size=5))
    size = attributes_size(held)
    name = draw(st.sampled_from(sorted(held)) | names)
    room = max(0, LIMIT - size - len(name.encode()) + draw(st.integers(-4, 4)))
    value = draw(st.sampled_from([DynamoType({"S": "x" * room}), "x" * room, room]) | values.map(DynamoType))
    return held, name, value


@settings(max_examples=200, deadline=None)
@given(setting_near_the_limit())
def test_an_attribute_set_on_an_item_is_refused_as_moto_refuses_it(case: tuple[dict[str, Any], str, Any]) -> None:
    """`limited_size_dict_setitem` refuses what moto's LimitedSizeDict.__setitem__ refuses, counting a replaced
    attribute's old value too, as moto does; it sets what moto sets. Without the old value counted, replacing
    an attribute near the limit is let through where moto refuses it."""
    held, name, value = case

    def attributes() -> LimitedSizeDict:
        built = LimitedSizeDict()
        dict.update(built, {key: DynamoType(member) for key, member in held.items()})
        return built

    moto_attributes, our_attributes = attributes(), attributes()
    with moto_sizes():
        expected = outcome(lambda: sizes._original_limited_size_dict_setitem(moto_attributes, name, value))
    assert outcome(lambda: sizes.limited_size_dict_setitem(our_attributes, name, value)) == expected
    assert our_attributes == moto_attributes


# --- through the endpoint -------------------------------------------------------------------------------

_tables = itertools.count()


@contextmanager
def moto_s_query_copy() -> Iterator[None]:
    """moto's Query and Scan handlers and its table module's copy put back for the duration: Table.query and
    Table.scan deep-copy their results as moto does (stock moto's serializer answers some values otherwise,
    a map's empty key...)."""
    patched = [(owner, name, vars(owner)[name]) for owner, name in ((DynamoHandler, "query"),
                                                                    (DynamoHandler, "scan"),
                                                                    (moto_table_module, "copy"))]
    DynamoHandler.query = query_results._original_handler_query  # type: ignore[method-assign]
    DynamoHandler.scan = query_results._original_handler_scan  # type: ignore[method-assign]
    moto_table_module.copy = copy
    try:
        yield
    finally:
        for owner, name, kept in patched:
            setattr(owner, name, kept)


def raw_call(endpoint: EmbeddedEndpoint, operation: str, body: dict[str, Any]) -> Any:
    """A DynamoDB request sent as JSON (what boto3 would refuse to send): its answer, or its error's body."""
    request = urllib.request.Request(endpoint.url, data=json.dumps(body).encode(), method="POST", headers={
        "X-Amz-Target": f"DynamoDB_20120810.{operation}", "Content-Type": "application/x-amz-json-1.0",
        "Authorization": f"AWS4-HMAC-SHA256 Credential=testing/20260101/{REGION}/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return ["error", error.code, error.read().decode(errors="replace")]


def wire(value: Any) -> Any:
    """A generated attribute value as JSON holds it (binary values as base64 text)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {key: wire(member) for key, member in value.items()}
    if isinstance(value, list):
        return [wire(member) for member in value]
    return value


def new_table(endpoint: EmbeddedEndpoint) -> str:
    """A fresh table: pk, sk; indexes by `kind` (then sk) projecting all attributes, keys only, and `n`."""
    name = f"sizes-{next(_tables)}"
    strings = [{"AttributeName": key, "AttributeType": "S"} for key in ("pk", "sk", "kind")]

    def index(index_name: str, projection: dict[str, Any]) -> dict[str, Any]:
        return {"IndexName": index_name, "Projection": projection, "KeySchema": [
            {"AttributeName": "kind", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]}

    endpoint.client("dynamodb").create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=strings,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[index("all", {"ProjectionType": "ALL"}),
                                index("keys", {"ProjectionType": "KEYS_ONLY"}),
                                index("some", {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["n"]})])
    return name


def _items_around_the_limit() -> list[tuple[int, dict[str, Any]]]:
    """(size - LIMIT, item) for items of LIMIT-3 to LIMIT+3 bytes: a string of one-, two- or three-byte
    characters, or a map holding a number and such a string."""
    keys = {"pk": {"S": "p"}, "sk": {"S": "s"}, "kind": {"S": "k"}}
    keys_size = len("pk") + len("p") + len("sk") + len("s") + len("kind") + len("k")
    items = []
    for offset, character in itertools.product(range(-3, 4), _FILLERS):
        width = len(character.encode())

        def text(size: int, character: str = character, width: int = width) -> str:
            return character * (size // width) + "x" * (size % width)

        room = LIMIT - keys_size - len("v") + offset
        items.append((offset, {**keys, "v": {"S": text(room)}}))
        nested_room = room - len("a") - len("12345") - len("b")
        items.append((offset, {**keys, "v": {"M": {"a": {"N": "12345"}, "b": {"S": text(nested_room)}}}}))
    return items


def test_put_items_at_the_limit_are_answered_as_stock_moto(endpoint: EmbeddedEndpoint) -> None:
    """PutItem of items of 405,000 bytes give or take three (ASCII, two- and three-byte characters, in a map
    with a number) is accepted up to 405,000 bytes and refused past it, exactly as stock moto answers. Without
    the fixes' sizes counted as moto's (UTF-8 bytes, a number's characters, a map's keys), some of them are
    answered otherwise."""
    table = new_table(endpoint)
    db = endpoint.client("dynamodb")
    cases = _items_around_the_limit()

    def answers() -> list[Any]:
        return [answer_or_error(db.put_item, TableName=table, Item=item) for _, item in cases]

    with stock_moto():
        stock = answers()
    ours = answers()
    assert ours == stock
    assert [answer != {} for answer in ours] == [offset > 0 for offset, _ in cases]


_ITEM_KEYS = st.lists(st.sampled_from(string.ascii_lowercase), min_size=1, max_size=6, unique=True)


def _queries(table: str) -> list[dict[str, Any]]:
    base = {"TableName": table, "ExpressionAttributeValues": {":p": {"S": "p"}}}
    by_kind = {"TableName": table, "KeyConditionExpression": "kind = :k",
               "ExpressionAttributeValues": {":k": {"S": "k"}}}
    return [
        {**base, "KeyConditionExpression": "pk = :p"},
        {**base, "KeyConditionExpression": "pk = :p", "ProjectionExpression": "sk, v, n"},
        {**base, "KeyConditionExpression": "pk = :p", "FilterExpression": "attribute_exists(v)"},
        {**base, "KeyConditionExpression": "pk = :p", "Limit": 2, "ScanIndexForward": False},
        {**by_kind, "IndexName": "all"},
        {**by_kind, "IndexName": "all", "ProjectionExpression": "v", "Limit": 3},
        {**by_kind, "IndexName": "keys"},
        {**by_kind, "IndexName": "some"},
        {**base, "KeyConditionExpression": "pk = :p", "Select": "COUNT"},
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(items=st.lists(st.tuples(values, values), min_size=1, max_size=6), sort_keys=_ITEM_KEYS)
def test_query_answers_match_stock_moto(endpoint: EmbeddedEndpoint, items: list[tuple[Any, Any]],
                                        sort_keys: list[str]) -> None:
    """Queries (the table's, each index's, projected, filtered, limited, counted) over items of every type
    answer as with moto's copy of their results, and leave the stored items as they were (answered with the
    copy again, after ours, as before). Without the copy kept for an item holding a set whose value is not a
    list (generated too), ours answers it as stored; were the stored items shared with something that changes
    them, the second answers with the copy would differ."""
    _answers_match_moto_s_copy(endpoint, items, sort_keys, "Query", _queries)


def _answers_match_moto_s_copy(endpoint: EmbeddedEndpoint, items: list[tuple[Any, Any]], sort_keys: list[str],
                               operation: str, requests: Callable[[str], list[dict[str, Any]]]) -> None:
    """Store the items in a new table, then answer `requests(table)` with moto's copy, with ours, and with
    moto's copy again: all three the same."""
    table = new_table(endpoint)
    for sort_key, (value, number) in zip(sort_keys, items, strict=False):
        item = {"pk": {"S": "p"}, "sk": {"S": sort_key}, "kind": {"S": "k"}, "v": wire(value), "n": wire(number)}
        answer = raw_call(endpoint, "PutItem", {"TableName": table, "Item": item})
        assert answer == {} or answer[0] == "error"
        event("stored" if answer == {} else "refused")

    def answers() -> list[Any]:  # (raw: botocore cannot read a set stored as a string)
        return [raw_call(endpoint, operation, request) for request in requests(table)]

    with moto_s_query_copy():
        expected = answers()
    assert answers() == expected
    with moto_s_query_copy():
        assert answers() == expected


def _scans(table: str) -> list[dict[str, Any]]:
    return [
        {"TableName": table},
        {"TableName": table, "ProjectionExpression": "sk, v, n"},
        {"TableName": table, "FilterExpression": "attribute_exists(v)"},
        {"TableName": table, "Limit": 2},
        {"TableName": table, "Limit": 2, "ExclusiveStartKey": {"pk": {"S": "p"}, "sk": {"S": "c"}}},
        {"TableName": table, "Segment": 1, "TotalSegments": 2},
        {"TableName": table, "IndexName": "all"},
        {"TableName": table, "IndexName": "keys"},
        {"TableName": table, "IndexName": "some", "Limit": 3},
        {"TableName": table, "Select": "COUNT"},
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(items=st.lists(st.tuples(values, values), min_size=1, max_size=6), sort_keys=_ITEM_KEYS)
def test_scan_answers_match_moto_s_copy(endpoint: EmbeddedEndpoint, items: list[tuple[Any, Any]],
                                        sort_keys: list[str]) -> None:
    """Scans (the table's, each index's, projected, filtered, paged, segmented, counted) over items of every
    type answer as with moto's copy of each item, and leave the stored items as they were (answered with the
    copy again, after ours). Without the copy kept for an item whose copy differs (a set stored as a
    string), ours answers it as stored; were a stored item changed by an index's projection, the second
    answers with the copy would differ."""
    _answers_match_moto_s_copy(endpoint, items, sort_keys, "Scan", _scans)


def test_a_set_stored_as_a_string_is_answered_as_stock_moto(endpoint: EmbeddedEndpoint) -> None:
    """A string set stored as the string "abc" (a malformed PutItem moto accepts) is answered by a Query as
    ["a", "b", "c"], as moto's copy makes it (GetItem answers it as stored). Without `_copy_is_the_same`'s
    check of a set's value, ours answers "abc"."""
    table = new_table(endpoint)
    for sort_key, value in (("a", {"SS": "abc"}), ("b", {"M": {"m": {"NS": "12"}}}), ("c", {"L": [{"SS": "xy"}]}),
                            ("d", {"SS": ["x", "y"]})):
        assert raw_call(endpoint, "PutItem", {"TableName": table, "Item": {
            "pk": {"S": "p"}, "sk": {"S": sort_key}, "kind": {"S": "k"}, "v": value}}) == {}
    request = {"TableName": table, "KeyConditionExpression": "pk = :p",
               "ExpressionAttributeValues": {":p": {"S": "p"}}}
    ours = raw_call(endpoint, "Query", request)
    with stock_moto():
        stock = raw_call(endpoint, "Query", request)
    assert ours == stock
    assert [item["v"] for item in ours["Items"]] == [
        {"SS": ["a", "b", "c"]}, {"M": {"m": {"NS": ["1", "2"]}}}, {"L": [{"SS": ["x", "y"]}]}, {"SS": ["x", "y"]}]


class _ItemCopies:
    """Counts copy.deepcopy calls on an Item or a list (what Table.query copies, and the shim's per-item
    copies), then copies as the copy module does."""

    def __init__(self) -> None:
        self.items = 0
        self.lists = 0
        self._deepcopy = copy.deepcopy

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> Any:
        if type(value) is Item:
            self.items += 1
        elif type(value) is list and value and type(value[0]) is Item:
            self.lists += 1
        return self._deepcopy(value, *args, **kwargs)


def test_a_query_answer_copies_only_the_items_whose_copy_would_differ(
        endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Query over ordinary items deep-copies none of them; over an item holding a set stored as a string,
    that item alone. A caller of Table.query other than the Query handler (the meter, a test) still gets
    moto's copies. Without `handler_query` (or with the shim copying always) the items are copied; with the
    shim skipping the copy outside the handler, the direct call gets the stored items themselves."""
    table = new_table(endpoint)
    for sort_key in "abcde":
        assert raw_call(endpoint, "PutItem", {"TableName": table, "Item": {
            "pk": {"S": "p"}, "sk": {"S": sort_key}, "kind": {"S": "k"}, "v": {"M": {"l": {"L": [{"N": "1"}]}}}}}) == {}
    copies = _ItemCopies()
    monkeypatch.setattr(copy, "deepcopy", copies)
    request = {"TableName": table, "KeyConditionExpression": "pk = :p",
               "ExpressionAttributeValues": {":p": {"S": "p"}}}
    assert raw_call(endpoint, "Query", request)["Count"] == 5
    assert (copies.items, copies.lists) == (0, 0)
    assert raw_call(endpoint, "PutItem", {"TableName": table, "Item": {
        "pk": {"S": "p"}, "sk": {"S": "c"}, "kind": {"S": "k"}, "v": {"SS": "abc"}}}) == {}
    assert raw_call(endpoint, "Query", request)["Count"] == 5
    assert (copies.items, copies.lists) == (1, 0)

    backend_table = dynamodb_backends["123456789012"][REGION].get_table(table)
    stored = {id(item) for item in queries.unsorted_items(backend_table)}
    results, _, _ = backend_table.query(DynamoType({"S": "p"}), None, [], None, None, True, None)
    assert len(results) == 5 and not stored & {id(item) for item in results}
    assert copies.lists == 1


def test_a_scan_answer_copies_only_the_items_whose_copy_would_differ(
        endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Scan over ordinary items deep-copies none of them, through the table or an index; over an item
    holding a set stored as a string, that item alone, answered as moto's copy makes it. A caller of
    Table.scan other than the Scan handler still gets copies. Without `handler_scan` (or with the shim
    ignoring single items) every item is copied; with the shim keeping items outside the handler, the
    direct call gets the stored items themselves."""
    table = new_table(endpoint)
    for sort_key in "abcde":
        assert raw_call(endpoint, "PutItem", {"TableName": table, "Item": {
            "pk": {"S": "p"}, "sk": {"S": sort_key}, "kind": {"S": "k"}, "v": {"M": {"l": {"L": [{"N": "1"}]}}}}}) == {}
    copies = _ItemCopies()
    monkeypatch.setattr(copy, "deepcopy", copies)
    assert raw_call(endpoint, "Scan", {"TableName": table})["Count"] == 5
    assert raw_call(endpoint, "Scan", {"TableName": table, "IndexName": "keys"})["Count"] == 5
    assert copies.items == 0
    assert raw_call(endpoint, "PutItem", {"TableName": table, "Item": {
        "pk": {"S": "p"}, "sk": {"S": "c"}, "kind": {"S": "k"}, "v": {"SS": "abc"}}}) == {}
    answer = raw_call(endpoint, "Scan", {"TableName": table})
    assert copies.items == 1
    assert [item["v"] for item in answer["Items"] if item["sk"] == {"S": "c"}] == [{"SS": ["a", "b", "c"]}]

    backend_table = dynamodb_backends["123456789012"][REGION].get_table(table)
    stored = {id(item) for item in queries.unsorted_items(backend_table)}
    results, _, _ = backend_table.scan({}, None, None)
    assert len(results) == 5 and not stored & {id(item) for item in results}

"""The endpoint's conversion of item-operation results (infra/onward_infra/moto_fixes/server.py `plain_dynamo`) gives
exactly moto's `dynamo_to_dict` values, for any result shape the DynamoDB operations return."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.utilities import dynamo_to_dict

from onward_infra.moto_fixes.server import plain_dynamo

_text = st.text(max_size=8)
_number = st.integers(-10**6, 10**6).map(str)
_binary = st.binary(max_size=8)


_scalar_wire = st.one_of(
    _text.map(lambda value: {"S": value}),
    _number.map(lambda value: {"N": value}),
    st.booleans().map(lambda value: {"BOOL": value}),
    st.just({"NULL": True}),
    _binary.map(lambda value: {"B": base64.b64encode(value).decode()}),
    st.lists(_text, min_size=1, max_size=3, unique=True).map(lambda value: {"SS": value}),
    st.lists(_number, min_size=1, max_size=3, unique=True).map(lambda value: {"NS": value}),
    st.lists(_binary, min_size=1, max_size=3, unique=True).map(
        lambda value: {"BS": [base64.b64encode(member).decode() for member in value]}),
)
_attribute_wire = st.recursive(
    _scalar_wire,
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda value: {"L": value}),
                            st.dictionaries(_text, inner, max_size=3).map(lambda value: {"M": value})),
    max_leaves=12,
)
_attributes = st.dictionaries(st.text(min_size=1, max_size=6), _attribute_wire.map(DynamoType), max_size=6)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(_attributes, max_size=4), count=st.integers(0, 100),
       extra=st.one_of(st.none(), st.just(datetime(2026, 12, 2, 5, 0, 0, 123000)), _text))
def test_plain_dynamo_gives_moto_s_values_for_any_query_shaped_result(items: list[dict[str, DynamoType]], count: int,
                                                                      extra: Any) -> None:
    """A query's result (plain members, lists of items of DynamoType values, nested maps and lists, binary
    values, sets) converts to exactly what moto's dynamo_to_dict gives. A mutant that returned a binary
    value's base64 text instead of its bytes, left a nested DynamoType unconverted, or dropped a set would
    differ here."""
    result = {"Count": count, "Items": items, "Extra": extra, "LastEvaluatedKey": items[0] if items else None}
    assert plain_dynamo(result) == dynamo_to_dict(result)


@given(attributes=_attributes)
def test_objects_other_than_plain_values_and_dynamo_types_are_left_to_moto(attributes: dict[str, DynamoType]) -> None:
    """An Item (an object with to_json) inside a result converts as moto converts it."""
    item = Item(DynamoType({"S": "pk"}), None, {"pk": {"S": "x"}, **{key: value.to_json() for key, value in
                                                                       attributes.items()}})
    result = {"Item": item, "Items": [item]}
    assert plain_dynamo(result) == dynamo_to_dict(result)

"""`to_attribute` gives exactly what the JSON round trip and boto3's TypeSerializer give
(onward/store/dynamo/attributes.py), for
any JSON-compatible value: its exact way for the platform's own rows (str, bool, int, None, dicts, lists) must
not change an attribute value, and what it leaves to the round trip (floats, huge integers, other key types,
tuples inside, str and int subclasses) must come out the same too."""

from __future__ import annotations

import enum
import json
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given, settings
from hypothesis import strategies as st

from onward.store.dynamo import attributes as dynamo

pytestmark = pytest.mark.fast


def reference(value: Any) -> dict[str, Any]:
    """The attribute value before the exact way: the round trip through JSON, then boto3's serializer."""
    attribute: dict[str, Any] = TypeSerializer().serialize(
        json.loads(json.dumps(value), parse_float=Decimal, parse_int=dynamo._number))
    return attribute


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 10


_integers = st.one_of(st.integers(-10**6, 10**6), st.integers(-10**40, 10**40),
                      st.sampled_from([10**37, -10**37, 10**38 - 1, -(10**38 - 1), 10**38, -10**38, 10**40]))
_scalars = st.one_of(st.text(max_size=6), st.booleans(), _integers, st.none(),
                     st.floats(allow_nan=False, allow_infinity=False, width=32),
                     st.sampled_from([Colour.RED, Size.BIG]))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=4), inner, max_size=4),
    st.dictionaries(st.integers(0, 9), inner, max_size=2)), max_leaves=20)


@given(_values)
@settings(max_examples=400, deadline=None)
def test_every_json_compatible_value_becomes_the_attribute_the_round_trip_made(value: Any) -> None:
    """Without the exact way's guards an int of 39+ digits would be written as it is (the round trip
    normalizes it: "1E+40"), and an int-keyed dict would keep its int keys (JSON makes them strings): each
    a difference here."""
    try:
        expected = reference(value)
    except Exception as error:  # noqa: BLE001 - whatever the round trip refuses, to_attribute refuses alike
        with pytest.raises(type(error)):
            dynamo.to_attribute(value)
        return
    assert dynamo.to_attribute(value) == expected


def test_the_platform_s_row_takes_the_exact_way() -> None:
    """The values the platform writes never reach the round trip (what made it fast)."""
    row = {"job_id": "j-1", "version": 3, "params": {"n": 1, "tags": ["a", "b"]}, "done": False, "error": None}
    assert dynamo._exact(row) == reference(row)


@pytest.mark.parametrize("value", [1.5, 10**39, {1: "a"}, Colour.RED, Size.BIG, {1, 2}])
def test_what_the_exact_way_leaves_to_the_round_trip(value: Any) -> None:
    with pytest.raises(dynamo._NotExact):
        dynamo._exact(value)


def reference_plain(attribute: dict[str, Any]) -> Any:
    """An attribute value as plain values before the exact way: boto3's deserializer, then `_plain`."""
    return dynamo._plain(TypeDeserializer().deserialize(attribute))


_numbers_text = st.one_of(st.integers(-10**40, 10**40).map(str), st.sampled_from(
    ["0", "-0", "007", "+5", "1.0", "1.50", "-2.5", "1E+2", "1e-3", "12345678901234567890123456789012345678",
     "123456789012345678901234567890123456789", " 5", "5.", "NaN"]))
_wire = st.recursive(st.one_of(
    st.text(max_size=5).map(lambda value: {"S": value}), _numbers_text.map(lambda value: {"N": value}),
    st.booleans().map(lambda value: {"BOOL": value}), st.just({"NULL": True}),
    st.binary(max_size=4).map(lambda value: {"B": value}),
    st.lists(st.text(max_size=3), min_size=1, max_size=3, unique=True).map(lambda value: {"SS": value}),
    st.lists(st.integers(-99, 99).map(str), min_size=1, max_size=3, unique=True).map(lambda value: {"NS": value})),
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda value: {"L": value}),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3).map(lambda value: {"M": value})),
    max_leaves=12)


@given(_wire)
@settings(max_examples=400, deadline=None)
def test_every_attribute_value_reads_as_the_deserializer_and_plain_read_it(attribute: dict[str, Any]) -> None:
    """Without the exact way's guards a 39-digit number would read as an int (the deserializer refuses it:
    Inexact/Rounded in DynamoDB's context), "1.0" would not be read at all by int(), "+5" likewise: each a
    difference (or another error) here."""
    assert_read_alike(attribute)


def assert_read_alike(attribute: Any) -> None:
    try:
        expected = reference_plain(attribute)
    except Exception as error:  # noqa: BLE001 - whatever the deserializer refuses, from_attribute refuses alike
        with pytest.raises(type(error)):
            dynamo.from_attribute(attribute)
        return
    got = dynamo.from_attribute(attribute)
    assert repr(got) == repr(expected)  # (repr: a NaN equals itself, 1 and 1.0 differ)


def test_a_job_row_reads_the_exact_way() -> None:
    row = {"job_id": "j-1", "version": 3, "params": {"n": 1, "tags": ["a", "b"]}, "done": False, "error": None}
    assert dynamo.from_item(dynamo.to_item(row)) == {name: value for name, value in row.items() if value is not None}
    assert dynamo._exact_value(dynamo.to_attribute(row)) == row


@pytest.mark.parametrize("attribute", [{"S": "a", "N": "1"}, {"M": {"x": {"N": "1", "S": "b"}}}, {"L": "ab"}])
def test_a_malformed_attribute_value_reads_as_the_deserializer_reads_it(attribute: dict[str, Any]) -> None:
    """Two types in one value (the deserializer reads the first), a list that is not one: left to it."""
    assert_read_alike(attribute)

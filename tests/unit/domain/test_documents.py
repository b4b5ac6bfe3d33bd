"""onward/domain/documents.py: what DynamoDB can store, judged before anything is written (pure).

Without these checks a create with such params was a 500 (boto3 refused the number, botocore the lone
surrogate, json the depth) or was stored as a stream record the local consumers could not read (an empty
key), and a worker's unstorable result lapsed its lease instead of ending the job with the reason."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onward.domain.documents import MAX_DEPTH, check_storable, number_problem, storable_problems
from onward.domain.errors import InvalidRequest, UnstorableValue
from onward.store.dynamo.attributes import from_item, to_attribute


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("value", "where", "reason"), [
    ({"": 1}, 'params[""]', "empty map key"),
    ({"a": [{"": 1}]}, 'params.a[0][""]', "empty map key"),
    ({"s": "\ud800"}, "params.s", "lone surrogate"),
    ({"\udc00": 1}, "params", "lone surrogate"),
    ({"n": 10**38 + 1}, "params.n", "39 significant digits"),
    ({"n": 1e200}, "params.n", "magnitude"),
    ({"n": -1e-200}, "params.n", "magnitude"),
    ({"n": 1e126}, "params.n", "magnitude"),
    ({"n": float("nan")}, "params.n", "NaN"),
    ({"n": float("-inf")}, "params.n", "NaN and Infinity"),
    ({"set": {1, 2}}, "params.set", "not a JSON value"),
])
def test_each_unstorable_value_is_named_with_its_place(value, where, reason):
    with pytest.raises(UnstorableValue) as refused:
        check_storable(value, "params")
    assert str(refused.value).startswith(where) and reason in str(refused.value)
    assert isinstance(refused.value, InvalidRequest) and isinstance(refused.value, ValueError)


def test_nesting_counts_the_attribute_itself_as_level_one():
    check_storable(_nested(MAX_DEPTH))  # params itself is a map: level 1 of 32
    with pytest.raises(UnstorableValue, match="32 levels"):
        check_storable(_nested(MAX_DEPTH + 1))


def test_a_document_of_any_depth_is_judged_without_recursion():
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert next(storable_problems(deep))[1].startswith("nested deeper")


@pytest.mark.parametrize("number", [0, -0.0, 1e-130, 9.99e125, 10**40, -(10**37 + 1),
                                    12345678901234567890123456789012345678, 1.2345678901234567e-100, 0.1, 2**63])
def test_numbers_within_dynamodbs_range_pass_and_round_trip(number):
    assert number_problem(number) is None
    stored = from_item({"v": to_attribute(number)})["v"]
    assert Decimal(str(stored)) == Decimal(str(number))


STORABLE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**38) + 1, 10**38 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x == 0 or 1e-130 <= abs(x) < 1e126)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1), inner, max_size=4),
    max_leaves=20)


@given(STORABLE)
def test_whatever_passes_the_check_is_serialized_by_boto3(value):
    """The check and boto3's serializer agree: nothing that passes fails at the write (property)."""
    if list(storable_problems(value)):
        return  # a lone surrogate from st.text(), say: refused, never sent
    assert json.loads(json.dumps(from_item({"v": to_attribute(value)})["v"])) is not None or value is None

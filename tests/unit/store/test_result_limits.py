"""onward/store/result_limits.py: a result is held to MAX_RESULT_BYTES as JSON and as DynamoDB stores it, so the
run record that holds it (issue 34) stays one item under DynamoDB's 400 KB."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onward.domain.documents import json_size
from onward.domain.errors import PayloadTooLarge
from onward.store.dynamo.keys import item_bytes
from onward.store.result_limits import MAX_RESULT_BYTES, check_result

DYNAMODB_ITEM_LIMIT = 400 * 1024
LARGEST_RUN_WITHOUT_ITS_RESULT = 2_295  # (measured: the module's docstring)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=40)


def test_a_list_of_small_numbers_within_the_json_limit_is_refused_as_dynamodb_would_store_it():
    """320,001 bytes of JSON that DynamoDB stores in 480,003: without the second count the completion's
    transaction would be refused by DynamoDB (item too large) instead of ending the job with the reason."""
    with pytest.raises(PayloadTooLarge, match=r"480003 bytes as DynamoDB stores it.*the limit is 350000"):
        check_result([1] * 160_000)


def test_a_result_at_the_limit_fits_one_run_record_with_a_margin():
    """The largest result the limits let through, on the largest run record, is still one item under 400 KB."""
    largest = {"blob": "y" * (MAX_RESULT_BYTES - 20)}
    check_result(largest)
    assert item_bytes({"result": largest}) + LARGEST_RUN_WITHOUT_ITS_RESULT < DYNAMODB_ITEM_LIMIT - 50_000


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_a_value_takes_at_most_twice_its_json_as_stored(value):
    """Why a result of at most half the limit as JSON is not counted again: were a value to take more than
    twice its JSON as stored, such a result could pass the limit unseen."""
    assert item_bytes({"v": value}) - 1 <= 2 * json_size(value)

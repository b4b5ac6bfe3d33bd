"""How large a worker's result may be. The completing transaction writes it on the run record it closes
(issue 34), one DynamoDB item with the run's other attributes, and an item holds at most 400 KB (409,600
bytes). Its other attributes take at most 2,295 bytes (the keys, a 128-character worker id of 4-byte
characters, the times and outcome, a 200-character progress message, a late report's marks, 100 overlapped
attempts, the TTL, epoch and shape stamps, the result's size), so a result of at most MAX_RESULT_BYTES,
counted both as JSON and as DynamoDB counts the stored value, leaves a run record of at most 352,301 bytes:
57 KB of margin.

Both counts matter: DynamoDB counts an element of a list or map one byte more than its value, a list or map
3 bytes and a small number 2, so a value takes up to twice its JSON (350,000 bytes of `[1,1,...]` would be a
525,000-byte item, refused by DynamoDB mid-commit instead of by the store with the reason). A result of at
most half the limit as JSON is therefore not counted again."""

from __future__ import annotations

from typing import Any

from onward.domain.documents import check_storable, json_size
from onward.domain.errors import PayloadTooLarge, UnstorableValue
from onward.store.dynamo.keys import RESULT_ATTRIBUTE, item_bytes

MAX_RESULT_BYTES = 350_000


def check_result(result: Any) -> None:
    """Raise before anything is written when `result` cannot be stored: UnstorableValue (not JSON, or not what
    DynamoDB holds), PayloadTooLarge (past MAX_RESULT_BYTES as JSON, or as DynamoDB stores it)."""
    check_storable(result, "result")
    try:
        size = json_size(result)
    except (TypeError, ValueError) as error:  # what check_storable let through but JSON cannot encode
        raise UnstorableValue(f"result: {error}") from error
    if size > MAX_RESULT_BYTES:
        raise PayloadTooLarge(f"the result takes {size} bytes as JSON; the limit is {MAX_RESULT_BYTES}")
    if 2 * size <= MAX_RESULT_BYTES:  # (stored, it takes at most twice its JSON)
        return
    stored = item_bytes({RESULT_ATTRIBUTE: result}) - len(RESULT_ATTRIBUTE)
    if stored > MAX_RESULT_BYTES:
        raise PayloadTooLarge(f"the result takes {stored} bytes as DynamoDB stores it ({size} as JSON: a list's or "
                              f"map's elements and small numbers count more); the limit is {MAX_RESULT_BYTES}")

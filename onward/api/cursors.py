"""The cursors of the API's listings (GET /jobs, GET /schedules): where the next page starts, as a DynamoDB key
in its wire format ({"name": {"S": "..."}}), base64url of its compact JSON. A cursor is read back only if it
has exactly the listing's fields, every one a string, and names the tenant it is presented for: a cursor
never widens a listing to another tenant's items, nor starts it anywhere a page could not have ended.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

MAX_CURSOR_CHARS = 2048
# The fields of each listing's cursor: the `by_tenant` index key of the status view (job listing), and the
# tenant and the last name shown (schedules).
JOB_CURSOR = frozenset({"job_id", "tenant_id", "occurred_at"})
SCHEDULE_CURSOR = frozenset({"tenant_id", "name"})


class InvalidCursor(ValueError):
    """Not a cursor this API returned for this tenant and this listing."""


def encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str, tenant: str, fields: frozenset[str]) -> dict[str, Any]:
    """The key a cursor holds; InvalidCursor unless it has exactly `fields`, each a string, and `tenant`'s."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode())) if len(cursor) <= MAX_CURSOR_CHARS else None
        valid = (isinstance(key, dict) and set(key) == fields
                 and all(isinstance(v, dict) and set(v) == {"S"} and isinstance(v["S"], str) for v in key.values())
                 and key["tenant_id"]["S"] == tenant)
    except (ValueError, binascii.Error, RecursionError):
        valid = False
    if not valid or not isinstance(key, dict):
        raise InvalidCursor("the cursor is not one this API returned for this tenant")
    return key


def schedule_cursor(tenant: str, after: str) -> str:
    """The cursor of a schedule listing that goes on after the schedule named `after`."""
    return encode_cursor({"tenant_id": {"S": tenant}, "name": {"S": after}})

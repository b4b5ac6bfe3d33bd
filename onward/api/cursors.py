"""The cursors of the API's listings (GET /jobs, GET /schedules, GET /ops/replayable): where the next page
starts, base64url of the compact JSON of the position its listing handed out. The position is the store's
(onward.pipeline.view.listing_start, onward.store.schedules.name_after read it back and refuse one that is
not theirs for this tenant): a cursor never widens a listing to another tenant's items, nor starts it
anywhere a page could not have ended.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from onward.store.schedules import page_position

MAX_CURSOR_CHARS = 2048


class InvalidCursor(ValueError):
    """Not a cursor this API returned for this tenant and this listing."""


def encode_cursor(position: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(position, sort_keys=True, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str) -> object:
    """The position a cursor holds, as JSON values; InvalidCursor when it is not base64url JSON (or too long)."""
    try:
        if len(cursor) <= MAX_CURSOR_CHARS:
            position: object = json.loads(base64.urlsafe_b64decode(cursor.encode()))
            return position
    except (ValueError, binascii.Error, RecursionError):
        pass
    raise InvalidCursor("the cursor is not one this API returned for this tenant")


def schedule_cursor(tenant: str, after: str) -> str:
    """The cursor of a schedule listing that goes on after the schedule named `after`."""
    return encode_cursor(page_position(tenant, after))

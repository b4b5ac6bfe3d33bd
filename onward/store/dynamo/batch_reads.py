"""BatchGetItem for any table of the deployment: 100 keys a request, the keys DynamoDB held back
(`UnprocessedKeys`) asked again with a growing wait, a bounded number of times. The one batch read of the
code: the job store's, the status view's and the backlog's reads go through it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onward.domain.errors import StoreContention

BATCH_GET_KEYS = 100  # BatchGetItem's limit per request
ROUNDS = 8  # requests for one batch of keys at most: the first, then 7 for what DynamoDB held back
FIRST_WAIT_S = 0.01  # before the second request; doubled before each next one (at most 0.64 s, 1.27 s in all)


class KeysHeldBack(StoreContention):
    """DynamoDB held keys back through every round (throttling): safe to read again later."""


@dataclass(frozen=True)
class BatchRead:
    items: list[dict[str, Any]]  # in DynamoDB's wire format; absent keys are left out
    requests: int  # BatchGetItem requests it took, as AWS bills them


def batch_get(client: Any, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool,
              sleep: Callable[[float], None] = time.sleep) -> BatchRead:
    """The items at `keys` (wire-format keys) in `table`; KeysHeldBack when some stay unprocessed after ROUNDS
    requests for their batch (a read that retried for ever would hang its caller: an API answer, a claim)."""
    items: list[dict[str, Any]] = []
    requests = 0
    for start in range(0, len(keys), BATCH_GET_KEYS):
        request: dict[str, Any] = {table: {"Keys": list(keys[start:start + BATCH_GET_KEYS]),
                                           "ConsistentRead": consistent}}
        for round_ in range(ROUNDS):
            if round_:
                sleep(FIRST_WAIT_S * 2 ** (round_ - 1))
            answer = client.batch_get_item(RequestItems=request)
            requests += 1
            items += answer.get("Responses", {}).get(table, [])
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            held = len(request.get(table, {}).get("Keys", []))
            raise KeysHeldBack(f"DynamoDB held {held} keys of {table} back through {ROUNDS} BatchGetItem requests")
    return BatchRead(items, requests)

"""onward.store.dynamo.batch_reads: the one BatchGetItem loop of the code (the job store's, the status view's
and the backlog's reads), against a scripted client."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain.errors import StoreContention
from onward.store.dynamo.batch_reads import BATCH_GET_KEYS, ROUNDS, KeysHeldBack, batch_get


class HoldingBack:
    """A BatchGetItem that answers each request's keys but holds back the first `held` of every request for
    its first `rounds` answers (as DynamoDB does under throttling)."""

    def __init__(self, held: int, rounds: int) -> None:
        self.held, self.rounds, self.requests = held, rounds, []  # type: list[int]

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        [(table, request)] = RequestItems.items()
        keys = request["Keys"]
        self.requests.append(len(keys))
        holding = len(self.requests) <= self.rounds
        kept, answered = (keys[:self.held], keys[self.held:]) if holding else ([], keys)
        answer: dict[str, Any] = {"Responses": {table: [{**key, "found": {"BOOL": True}} for key in answered]}}
        if kept:
            answer["UnprocessedKeys"] = {table: {"Keys": kept, "ConsistentRead": request["ConsistentRead"]}}
        return answer


def keys(count: int) -> list[dict[str, Any]]:
    return [{"job_id": {"S": f"j{n}"}} for n in range(count)]


def test_every_key_is_read_100_a_request_and_the_held_back_asked_again() -> None:
    """250 keys: three batches of at most 100; the keys held back are asked again (alone) until answered, after
    growing waits. Without the loop a throttled read would silently miss rows (a job shown as never seen)."""
    client, waits = HoldingBack(held=5, rounds=2), []  # type: HoldingBack, list[float]
    read = batch_get(client, "t", keys(250), consistent=True, sleep=waits.append)
    assert sorted(item["job_id"]["S"] for item in read.items) == sorted(f"j{n}" for n in range(250))
    assert client.requests[:3] == [BATCH_GET_KEYS, 5, 5] and max(client.requests) == BATCH_GET_KEYS
    assert read.requests == len(client.requests) == 5
    assert waits == [0.01, 0.02]


def test_keys_held_back_through_every_round_end_the_read_with_a_retryable_error() -> None:
    """Breaks if the loop retried for ever (the view's did: an API answer or a claim hung while DynamoDB
    throttled) or gave up silently with rows missing. KeysHeldBack is a StoreContention: the API answers 503,
    the caller may try again."""
    client, waits = HoldingBack(held=3, rounds=ROUNDS + 5), []  # type: HoldingBack, list[float]
    with pytest.raises(KeysHeldBack, match="held 3 keys of t back") as raised:
        batch_get(client, "t", keys(10), consistent=False, sleep=waits.append)
    assert isinstance(raised.value, StoreContention)
    assert len(client.requests) == ROUNDS and len(waits) == ROUNDS - 1
    assert waits == sorted(waits) and sum(waits) < 2


def test_no_keys_no_request() -> None:
    client = HoldingBack(held=0, rounds=0)
    assert batch_get(client, "t", [], consistent=True).items == [] and client.requests == []

"""The shared stack (tests/conftest.py's `environment`, infra.endpoint.SharedStack): tests that only read and
write items borrow one deployment, and each finds it as if freshly deployed; a user that does more, or leaves
something running, does not pass the stack on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from infra.endpoint import LEASE_VARIABLE, EmbeddedEndpoint, SharedStack
from onward.models import NewJob
from onward.store import JobStore

ECHO = NewJob(type="demo.echo", params={"n": 1})
_first_user: dict[str, Any] = {}  # what the first of the two tests below saw and left


def _tables(environment: dict[str, str]) -> list[str]:
    return sorted(value for name, value in environment.items() if name.endswith("_TABLE"))


def _fill_every_table(dynamodb: Any, environment: dict[str, str]) -> None:
    """One item in each table, whatever its key schema."""
    for table in _tables(environment):
        schema = dynamodb.describe_table(TableName=table)["Table"]
        types = {a["AttributeName"]: a["AttributeType"] for a in schema["AttributeDefinitions"]}
        key = {k["AttributeName"]: {types[k["AttributeName"]]: "1"} for k in schema["KeySchema"]}
        dynamodb.put_item(TableName=table, Item=key)


def _items(dynamodb: Any, environment: dict[str, str]) -> dict[str, int]:
    return {table: dynamodb.scan(TableName=table, ConsistentRead=True)["Count"] for table in _tables(environment)}


def test_a_shared_stack_user_leaves_a_claimed_job_an_idempotency_key_and_an_item_in_every_table(
        store: JobStore, environment: dict[str, str], dynamodb: Any) -> None:
    assert store.create("acme", ECHO, idempotency_key="order-7").created
    assert store.create("acme", ECHO).created
    assert store.claim("w", 30) is not None  # the ready index's partitions are mapped (infra/moto_fixes/queries.py)
    _fill_every_table(dynamodb, environment)
    assert all(_items(dynamodb, environment).values())
    _first_user.update(environment)


def test_the_next_shared_stack_user_finds_the_same_stack_with_every_table_empty(
        store: JobStore, environment: dict[str, str], dynamodb: Any) -> None:
    if not _first_user:
        pytest.skip("runs after the test above")
    assert _tables(environment) == _tables(_first_user)  # the very same tables: shared, not redeployed
    assert environment[LEASE_VARIABLE] != _first_user[LEASE_VARIABLE]  # a warm Deployment is not carried over
    assert set(_items(dynamodb, environment).values()) == {0}
    assert store.claim("w", 30) is None  # the queued job left behind is gone from the index as well
    assert store.create("acme", ECHO, idempotency_key="order-7").created  # the key is new here
    assert store.claim("w", 30) is not None


@pytest.fixture
def guarded(endpoint: EmbeddedEndpoint) -> SharedStack:
    """A SharedStack of its own (not the session's), to misuse."""
    return SharedStack(endpoint, prefix="guarded")


def test_a_user_that_reads_the_outbox_stream_is_reported_and_the_next_gets_a_fresh_stack(
        guarded: SharedStack, endpoint: EmbeddedEndpoint) -> None:
    first = guarded.lend().environment
    assert guarded.give_back() == []  # lent and given back untouched: nothing to report
    assert guarded.lend().environment["JOBS_TABLE"] == first["JOBS_TABLE"]
    streams = endpoint.client("dynamodbstreams")
    arn = endpoint.client("dynamodb").describe_table(TableName=first["OUTBOX_TABLE"])["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    assert guarded.give_back() == ["DynamoDBStreams_20120810.GetShardIterator"]
    assert guarded.lend().environment["JOBS_TABLE"] != first["JOBS_TABLE"]
    assert guarded.retired == {"misused": 1}


def test_a_thread_left_running_or_a_write_between_users_retires_the_stack(
        guarded: SharedStack, dynamodb: Any) -> None:
    first = guarded.lend().environment
    stop = threading.Event()
    left_running = threading.Thread(target=stop.wait, name="left-running")
    left_running.start()
    try:
        assert guarded.give_back() == []  # nothing wrong done, but the thread could still write
    finally:
        stop.set()
        left_running.join()
    second = guarded.lend().environment
    assert second["JOBS_TABLE"] != first["JOBS_TABLE"]
    assert guarded.give_back() == []
    dynamodb.put_item(TableName=second["JOBS_TABLE"], Item={"pk": {"S": "late"}, "sk": {"S": "write"}})
    assert guarded.lend().environment["JOBS_TABLE"] != second["JOBS_TABLE"]
    assert guarded.retired == {"threads left running": 1, "touched between users": 1}

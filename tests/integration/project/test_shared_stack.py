"""The shared stack (the `environment` fixture, onward_infra.shared_stack.SharedStack): tests that only read and
write items borrow one deployment, and each finds it as if freshly deployed; a user that does more, or leaves
something running, does not pass the stack on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.shared_stack import LEASE_VARIABLE, SharedStack
from tests.support import ManualClock

ECHO = NewJob(type="demo.echo", params={"n": 1})


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


@pytest.fixture
def guarded(endpoint: EmbeddedEndpoint) -> SharedStack:
    """A SharedStack of its own (not the session's), to misuse."""
    return SharedStack(endpoint, prefix="guarded")


def test_the_next_user_of_a_shared_stack_finds_it_as_if_freshly_deployed(
        guarded: SharedStack, dynamodb: Any, clock: ManualClock) -> None:
    """Without the emptying (tables, and the secondary-index maps of infra/onward_infra/moto_fixes/queries.py) the
    second
    user would see the first user's items, claim its queued job and find its idempotency key taken; without
    the lease variable it would reuse the first user's warm Deployment (its tenant cache)."""
    first = guarded.lend().environment
    store = JobStore(Settings.from_environment(first), client=dynamodb, clock=clock)
    assert store.create("acme", ECHO, idempotency_key="order-7").created
    assert store.create("acme", ECHO).created
    # the ready index's partitions are mapped (infra/onward_infra/moto_fixes/queries.py)
    assert store.claim("w", 30) is not None
    _fill_every_table(dynamodb, first)
    assert all(_items(dynamodb, first).values())
    assert guarded.give_back() == []  # item reads and writes only: the stack may be shared on

    second = guarded.lend().environment
    store = JobStore(Settings.from_environment(second), client=dynamodb, clock=clock)
    assert _tables(second) == _tables(first)  # the very same tables: shared, not redeployed
    assert second[LEASE_VARIABLE] != first[LEASE_VARIABLE]  # a warm Deployment is not carried over
    assert set(_items(dynamodb, second).values()) == {0}
    assert store.claim("w", 30) is None  # the queued job left behind is gone from the index as well
    assert store.create("acme", ECHO, idempotency_key="order-7").created  # the key is new here
    assert store.claim("w", 30) is not None
    assert guarded.give_back() == []


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

"""The embedded endpoint (moto's server + infra/onward_infra/moto_fixes/ + infra/onward_infra/endpoint.py), over real
HTTP
via boto3.

Each test deploys its own stack from template.yaml, so tables and the outbox stream start empty. Where a
test says "stock moto", it was checked against moto's own transaction method by swapping it back in for
one request (`stock_moto()`), on the same endpoint: requests are serialized and tests run one at a time.
"""

from __future__ import annotations

import copy
import gc
import itertools
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.core.responses import ActionResult
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodb.responses import DynamoHandler, DynamoResult

from onward_infra import moto_fixes
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.template import (
    DATA_RESOURCE_TYPES,
    data_resources_template,
    environment_variable_for,
    load_template,
)

pytestmark = pytest.mark.integration

_stacks = itertools.count()


# --- helpers --------------------------------------------------------------------------------------------

class Stack:
    """A fresh deployment of template.yaml's data resources, with clients for it."""

    def __init__(self, endpoint: EmbeddedEndpoint) -> None:
        self.endpoint = endpoint
        self.environment = endpoint.deploy(f"ep-{next(_stacks)}").environment
        self.jobs = self.environment["JOBS_TABLE"]
        self.outbox = self.environment["OUTBOX_TABLE"]
        self.db = endpoint.client("dynamodb")
        self.streams = endpoint.client("dynamodbstreams")

    def get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.db.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def count(self, table: str) -> int:
        return sum(page["Count"] for page in self.db.get_paginator("scan").paginate(TableName=table))

    def outbox_records(self) -> list[dict[str, Any]]:
        """Every record on the outbox table's stream, every shard's, oldest first (describe_stream,
        TRIM_HORIZON): in commit order, as sequence numbers increase across the stream's shards."""
        arn = self.db.describe_table(TableName=self.outbox)["Table"]["LatestStreamArn"]
        records: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = self.streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records.extend(page["Records"])
                if not page["Records"]:
                    break
                iterator = page.get("NextShardIterator")
        return sorted(records, key=lambda r: int(r["dynamodb"]["SequenceNumber"]))


def job_key(name: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{name}"}, "sk": {"S": "JOB"}}


def job_item(name: str, **extra: Any) -> dict[str, Any]:
    return {**job_key(name), "state": {"S": "queued"}, "version": {"N": "1"}, **extra}


def event_key(job: str, version: int | str = 1) -> dict[str, Any]:
    return {"job_id": {"S": job}, "version": {"N": str(version)}}


def event_item(job: str, version: int = 1, **extra: Any) -> dict[str, Any]:
    return {**event_key(job, version), "state": {"S": "queued"}, "time_bucket": {"S": "2026-11-30T06"},
            "occurred_at": {"S": "2026-11-30T06:00:00.000Z"}, **extra}


def error_of(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


def code(error: ClientError) -> str:
    return error.response["Error"]["Code"]


@contextmanager
def stock_moto() -> Iterator[None]:
    """moto's own TransactWriteItems for the duration (the endpoint's other fixes stay)."""
    moto_fixes.uninstall()
    try:
        assert DynamoDBBackend.transact_write_items is not moto_fixes.transactions.transact_write_items
        yield
    finally:
        moto_fixes.install()
    assert DynamoDBBackend.transact_write_items is moto_fixes.transactions.transact_write_items


@pytest.fixture
def stack(endpoint: EmbeddedEndpoint) -> Stack:
    assert DynamoDBBackend.transact_write_items is moto_fixes.transactions.transact_write_items
    return Stack(endpoint)


# --- all or nothing -------------------------------------------------------------------------------------

def test_failed_condition_writes_nothing_and_reports_a_reason_per_item(stack: Stack) -> None:
    """One failing ConditionCheck cancels the whole transaction: nothing is written (not the job Put
    before it, not the outbox Put after it, no stream record), and CancellationReasons has one entry per
    action, ConditionalCheckFailed for the failing one (with its old image under ALL_OLD) and None for
    the others.

    Without our fix's up-front evaluation of every condition, the Put listed before the failing check
    would be applied first: our replacement no longer deep-copies tables to roll back, so it would
    survive and the job would exist without its outbox event."""
    existing = job_item("existing", version={"N": "7"}, note={"S": "before"})
    stack.db.put_item(TableName=stack.jobs, Item=existing)

    transaction = [
        {"Put": {"TableName": stack.jobs, "Item": job_item("new"),
                 "ConditionExpression": "attribute_not_exists(pk)"}},
        {"ConditionCheck": {"TableName": stack.jobs, "Key": job_key("existing"),
                            "ConditionExpression": "version = :v",
                            "ExpressionAttributeValues": {":v": {"N": "6"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"Put": {"TableName": stack.outbox, "Item": event_item("new"),
                 "ConditionExpression": "attribute_not_exists(job_id)"}},
        {"Update": {"TableName": stack.jobs, "Key": job_key("other"),
                    "UpdateExpression": "SET n = :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
    ]
    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))

    assert code(error) == "TransactionCanceledException"
    reasons = error.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == ["None", "ConditionalCheckFailed", "None", "None"]
    assert reasons[1]["Item"] == existing
    assert all("Item" not in reason for position, reason in enumerate(reasons) if position != 1)
    assert stack.get(stack.jobs, job_key("new")) is None
    assert stack.get(stack.jobs, job_key("other")) is None
    assert stack.get(stack.outbox, event_key("new")) is None
    assert stack.get(stack.jobs, job_key("existing")) == existing
    assert stack.outbox_records() == []

    # Without ReturnValuesOnConditionCheckFailure the reason carries no item.
    transaction[1]["ConditionCheck"].pop("ReturnValuesOnConditionCheckFailure")
    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))
    assert [reason["Code"] for reason in error.response["CancellationReasons"]] == [
        "None", "ConditionalCheckFailed", "None", "None"]
    assert "Item" not in error.response["CancellationReasons"][1]
    assert stack.count(stack.jobs) == 1 and stack.count(stack.outbox) == 0


def test_condition_comparing_mismatched_types_is_false_not_a_server_error(stack: Stack) -> None:
    """DynamoDB only compares values of one type: `txt > :number` on a string attribute is false, so the
    transaction is cancelled with ConditionalCheckFailed.

    Without the TypeError guard in moto_fixes.transactions._cancellation_reason, moto's comparison raises TypeError,
    the server answers HTTP 500 (which boto3 even retries) and the client never learns which item
    failed."""
    stack.db.put_item(TableName=stack.jobs, Item=job_item("text", txt={"S": "hello"}))
    transaction = [
        {"Put": {"TableName": stack.jobs, "Item": job_item("new")}},
        {"ConditionCheck": {"TableName": stack.jobs, "Key": job_key("text"),
                            "ConditionExpression": "txt > :n",
                            "ExpressionAttributeValues": {":n": {"N": "1"}}}},
    ]
    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))

    assert code(error) == "TransactionCanceledException"
    assert [r["Code"] for r in error.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed"]
    assert stack.get(stack.jobs, job_key("new")) is None


@pytest.mark.parametrize("alias", ["number", "arn"])
def test_conditions_are_evaluated_against_the_state_before_the_transaction(stack: Stack, alias: str) -> None:
    """DynamoDB evaluates every condition against the items as they were before the transaction; one
    item addressed twice is a ValidationException and nothing is written.

    With distinct items the order cannot show, so this addresses one item under two spellings: the
    outbox key `version` 1 and 1.0 (one number to DynamoDB), or the table by name and by ARN. Stock moto
    (checked below, in the same run) misses the duplicate because it compares keys and table names as
    strings, applies the Put, and then evaluates the ConditionCheck against the Put's own write:
    TransactionCanceledException [None, ConditionalCheckFailed]. Our fix identifies items by table and
    typed key, and evaluates every condition before applying anything."""
    if alias == "number":
        put_key, check_table, check_key = event_key("j", "1"), stack.outbox, event_key("j", "1.0")
    else:
        arn = stack.db.describe_table(TableName=stack.outbox)["Table"]["TableArn"]
        put_key, check_table, check_key = event_key("j"), arn, event_key("j")
    transaction = [
        {"Put": {"TableName": stack.outbox, "Item": {**event_item("j"), **put_key}}},
        {"ConditionCheck": {"TableName": check_table, "Key": check_key,
                            "ConditionExpression": "attribute_not_exists(job_id)"}},
    ]

    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))
    assert code(error) == "ValidationException"
    assert "multiple operations on one item" in error.response["Error"]["Message"]
    assert stack.count(stack.outbox) == 0
    assert stack.outbox_records() == []

    with stock_moto():
        stock = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))
    assert code(stock) == "TransactionCanceledException"
    assert [r["Code"] for r in stock.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed"]


def test_two_actions_on_one_item_is_a_validation_error(stack: Stack) -> None:
    """Two actions on the same item: ValidationException, nothing written. Our replacement does its own
    request validation (it replaces moto's method whole); without the identity check it would apply
    both Puts, the second overwriting the first."""
    transaction = [
        {"Put": {"TableName": stack.jobs, "Item": job_item("same", note={"S": "first"})}},
        {"Update": {"TableName": stack.jobs, "Key": job_key("same"), "UpdateExpression": "SET note = :n",
                    "ExpressionAttributeValues": {":n": {"S": "second"}}}},
        {"Put": {"TableName": stack.outbox, "Item": event_item("same")}},
    ]
    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))
    assert code(error) == "ValidationException"
    assert stack.count(stack.jobs) == 0 and stack.count(stack.outbox) == 0
    assert stack.outbox_records() == []


def test_more_than_100_actions_is_a_validation_error(stack: Stack) -> None:
    """DynamoDB accepts up to 100 actions per transaction; 101 is a ValidationException and writes
    nothing. Without the limit in our replacement, 101 Puts would be written."""
    def puts(count: int) -> list[dict[str, Any]]:
        return [{"Put": {"TableName": stack.jobs, "Item": job_item(f"bulk-{i}")}} for i in range(count)]

    error = error_of(lambda: stack.db.transact_write_items(TransactItems=puts(101)))
    assert code(error) == "ValidationException"
    assert stack.count(stack.jobs) == 0

    stack.db.transact_write_items(TransactItems=puts(100))
    assert stack.count(stack.jobs) == 100


@pytest.mark.parametrize("failure", ["number-plus-string", "item-over-400kb"])
def test_action_failing_while_applied_rolls_back_the_earlier_ones(stack: Stack, failure: str) -> None:
    """An action that passes its condition but fails while being applied (an update adding a number to
    a string; an item over DynamoDB's 400 KB limit) fails the request, and the actions applied before
    it are undone: the new job row and outbox event are gone, the modified row is back to its old
    image, and the outbox stream carries no record.

    Without _Touched.restore (our fix copies only the touched items, not the tables as stock moto does),
    the Put, the Update and the stream record made before the failing action would all stay."""
    stack.db.put_item(TableName=stack.jobs, Item=job_item("counter", n={"N": "5"}))
    stack.db.put_item(TableName=stack.jobs, Item=job_item("text", txt={"S": "hello"}))
    if failure == "number-plus-string":
        failing = {"Update": {"TableName": stack.jobs, "Key": job_key("text"),
                              "UpdateExpression": "SET txt = txt + :one",
                              "ExpressionAttributeValues": {":one": {"N": "1"}}}}
    else:
        failing = {"Put": {"TableName": stack.jobs, "Item": job_item("huge", blob={"S": "x" * 420_000})}}
    transaction = [
        {"Put": {"TableName": stack.jobs, "Item": job_item("new"),
                 "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Put": {"TableName": stack.outbox, "Item": event_item("new"),
                 "ConditionExpression": "attribute_not_exists(job_id)"}},
        {"Update": {"TableName": stack.jobs, "Key": job_key("counter"),
                    "UpdateExpression": "SET n = n + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}},
        {"Update": {"TableName": stack.outbox, "Key": event_key("created-by-update"),
                    "UpdateExpression": "SET #s = :s", "ExpressionAttributeNames": {"#s": "state"},
                    "ExpressionAttributeValues": {":s": {"S": "queued"}}}},
        failing,
    ]
    error = error_of(lambda: stack.db.transact_write_items(TransactItems=transaction))

    # moto reports these as ValidationException (DynamoDB cancels with a ValidationError reason).
    assert code(error) in {"ValidationException", "TransactionCanceledException"}
    assert stack.get(stack.jobs, job_key("new")) is None
    assert stack.get(stack.jobs, job_key("huge")) is None
    assert stack.get(stack.jobs, job_key("counter"))["n"] == {"N": "5"}
    assert stack.get(stack.jobs, job_key("text"))["txt"] == {"S": "hello"}
    assert stack.count(stack.outbox) == 0
    assert stack.outbox_records() == []

    # The endpoint still works normally afterwards, and the stream starts at the next committed change.
    stack.db.transact_write_items(TransactItems=transaction[:4])
    assert stack.get(stack.jobs, job_key("counter"))["n"] == {"N": "6"}
    assert [r["eventName"] for r in stack.outbox_records()] == ["INSERT", "INSERT"]


# --- the outbox stream ----------------------------------------------------------------------------------

def test_outbox_stream_has_one_record_per_committed_change_and_none_for_cancelled(stack: Stack) -> None:
    """The outbox stream (NEW_IMAGE) carries exactly one record per item a committed transaction changed,
    in commit order, and nothing for cancelled or rolled-back transactions.

    Without _Touched.rewrite_stream_records, the Update that creates an event would leave two INSERT
    records (the first with the keys only); without the truncation on cancel, the rolled-back event
    would be published although it was never committed."""
    def tx(*actions: dict[str, Any]) -> None:
        stack.db.transact_write_items(TransactItems=list(actions))

    tx({"Put": {"TableName": stack.jobs, "Item": job_item("a")}},
       {"Put": {"TableName": stack.outbox, "Item": event_item("a"),
                "ConditionExpression": "attribute_not_exists(job_id)"}})
    # Cancelled by a condition: the event is already there.
    cancelled = error_of(lambda: tx(
        {"Put": {"TableName": stack.outbox, "Item": event_item("a", state={"S": "duplicate"}),
                 "ConditionExpression": "attribute_not_exists(job_id)"}},
        {"Put": {"TableName": stack.outbox, "Item": event_item("b")}}))
    assert code(cancelled) == "TransactionCanceledException"
    # Rolled back while applying: a valid event Put, then an update that cannot be applied.
    stack.db.put_item(TableName=stack.jobs, Item=job_item("text", txt={"S": "hello"}))
    rolled_back = error_of(lambda: tx(
        {"Put": {"TableName": stack.outbox, "Item": event_item("c")}},
        {"Update": {"TableName": stack.jobs, "Key": job_key("text"), "UpdateExpression": "SET txt = txt + :n",
                    "ExpressionAttributeValues": {":n": {"N": "1"}}}}))
    assert code(rolled_back) in {"ValidationException", "TransactionCanceledException"}
    # An Update that creates an event, one that modifies one, Puts that change one and then nothing,
    # Deletes of an existing and of a missing event.
    tx({"Update": {"TableName": stack.outbox, "Key": event_key("d"),
                   "UpdateExpression": "SET #s = :s, time_bucket = :b, occurred_at = :o",
                   "ExpressionAttributeNames": {"#s": "state"},
                   "ExpressionAttributeValues": {":s": {"S": "queued"}, ":b": {"S": "2026-11-30T07"},
                                                 ":o": {"S": "2026-11-30T07:00:00.000Z"}}}},
       {"Put": {"TableName": stack.jobs, "Item": job_item("d")}})
    tx({"Update": {"TableName": stack.outbox, "Key": event_key("a"), "UpdateExpression": "SET #s = :s",
                   "ExpressionAttributeNames": {"#s": "state"},
                   "ExpressionAttributeValues": {":s": {"S": "running"}}}})
    for _ in range(2):  # the second Put writes the image d already has: no change, no record
        tx({"Put": {"TableName": stack.outbox, "Item": event_item("d")}},
           {"ConditionCheck": {"TableName": stack.jobs, "Key": job_key("d"),
                               "ConditionExpression": "attribute_exists(pk)"}})
    tx({"Delete": {"TableName": stack.outbox, "Key": event_key("a")}},
       {"Delete": {"TableName": stack.outbox, "Key": event_key("never-existed")}})

    records = stack.outbox_records()
    summary = [(r["eventName"], r["dynamodb"]["Keys"]["job_id"]["S"]) for r in records]
    assert summary == [("INSERT", "a"), ("INSERT", "d"), ("MODIFY", "a"), ("MODIFY", "d"), ("REMOVE", "a")]
    assert records[0]["dynamodb"]["NewImage"] == event_item("a")
    assert records[1]["dynamodb"]["NewImage"] == {
        **event_key("d"), "state": {"S": "queued"}, "time_bucket": {"S": "2026-11-30T07"},
        "occurred_at": {"S": "2026-11-30T07:00:00.000Z"}}
    assert records[2]["dynamodb"]["NewImage"]["state"] == {"S": "running"}
    assert records[3]["dynamodb"]["NewImage"] == event_item("d")
    assert "NewImage" not in records[4]["dynamodb"]
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence)


def test_update_that_creates_an_item_yields_one_insert_with_the_full_image(stack: Stack) -> None:
    """An Update inside a transaction that creates an item yields ONE INSERT record carrying the full
    new image. Stock moto (checked below, in the same run) emits two INSERTs, the first with the keys
    only: a stream consumer would publish a keys-only event. Our fix rewrites the records of each
    committed transaction to one per changed item."""
    def create_by_update(job: str) -> None:
        stack.db.transact_write_items(TransactItems=[
            {"Update": {"TableName": stack.outbox, "Key": event_key(job),
                        "UpdateExpression": "SET #s = :s", "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":s": {"S": "queued"}},
                        "ConditionExpression": "attribute_not_exists(job_id)"}},
        ])

    create_by_update("fixed")
    records = stack.outbox_records()
    assert [r["eventName"] for r in records] == ["INSERT"]
    assert records[0]["dynamodb"]["NewImage"] == {**event_key("fixed"), "state": {"S": "queued"}}

    with stock_moto():
        create_by_update("stock")
    stock = [r for r in stack.outbox_records() if r["dynamodb"]["Keys"]["job_id"]["S"] == "stock"]
    assert [r["eventName"] for r in stock] == ["INSERT", "INSERT"]
    assert stock[0]["dynamodb"]["NewImage"] == event_key("stock")


# --- atomicity under concurrency ------------------------------------------------------------------------

@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    """Make the interpreter switch threads every few microseconds instead of every 5 ms, so that a
    request handled without the endpoint's lock really does interleave with another one (with the
    default interval the races below almost never show, lock or no lock)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run work(0..count-1) in threads started together; re-raise the first error."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


@pytest.mark.usefixtures("frequent_thread_switches")
def test_concurrent_conditional_increments_lose_no_update(stack: Stack) -> None:
    """8 threads x 50 read-then-conditional-write increments (`SET n = :new` if `n = :old`, retried on
    ConditionalCheckFailed) end at exactly n = 400 with exactly 400 successful writes.

    Without SerializedApp (moto takes no per-request lock), two requests can both evaluate `n = :old`
    before either writes: both succeed, one increment is lost, and n ends below the success count."""
    threads, increments = 8, 50
    stack.db.put_item(TableName=stack.jobs, Item=job_item("counter", n={"N": "0"}))
    clients = [stack.endpoint.client("dynamodb") for _ in range(threads)]

    def increment(index: int) -> tuple[int, int]:
        db, successes, conflicts = clients[index], 0, 0
        while successes < increments:
            old = int(db.get_item(TableName=stack.jobs, Key=job_key("counter"),
                                  ConsistentRead=True)["Item"]["n"]["N"])
            try:
                db.update_item(TableName=stack.jobs, Key=job_key("counter"), UpdateExpression="SET n = :new",
                               ConditionExpression="n = :old",
                               ExpressionAttributeValues={":new": {"N": str(old + 1)},
                                                          ":old": {"N": str(old)}})
                successes += 1
            except ClientError as error:
                if code(error) != "ConditionalCheckFailedException":
                    raise
                conflicts += 1
        return successes, conflicts

    results = _run_threads(threads, increment)
    assert sum(successes for successes, _ in results) == threads * increments
    assert stack.get(stack.jobs, job_key("counter"))["n"] == {"N": str(threads * increments)}


@pytest.mark.parametrize("api", ["put_item", "transact_write_items"])
@pytest.mark.usefixtures("frequent_thread_switches")
def test_concurrent_creates_of_one_key_have_exactly_one_winner(stack: Stack, api: str) -> None:
    """16 threads create the same job (`attribute_not_exists(pk)`) at once, by PutItem or by the store's
    two-item transaction (job row + outbox event): exactly one succeeds, the stored row is the winner's,
    and the outbox holds exactly one event with one stream record.

    Without the serialized requests, several condition checks can pass before any write lands: more than
    one winner, the last writer's row stored, and several events published for one job."""
    threads = 16
    clients = [stack.endpoint.client("dynamodb") for _ in range(threads)]

    def create(index: int) -> bool:
        row = job_item("contended", owner={"S": f"thread-{index}"})
        try:
            if api == "put_item":
                clients[index].put_item(TableName=stack.jobs, Item=row,
                                        ConditionExpression="attribute_not_exists(pk)")
                clients[index].put_item(TableName=stack.outbox,
                                        Item=event_item("contended", owner=row["owner"]))
            else:
                clients[index].transact_write_items(TransactItems=[
                    {"Put": {"TableName": stack.jobs, "Item": row,
                             "ConditionExpression": "attribute_not_exists(pk)"}},
                    {"Put": {"TableName": stack.outbox, "Item": event_item("contended", owner=row["owner"]),
                             "ConditionExpression": "attribute_not_exists(job_id)"}},
                ])
        except ClientError as error:
            refused = code(error)
        else:
            return True
        assert refused == ("ConditionalCheckFailedException" if api == "put_item"
                           else "TransactionCanceledException")
        return False

    wins = _run_threads(threads, create)
    assert wins.count(True) == 1
    winner = f"thread-{wins.index(True)}"
    assert stack.get(stack.jobs, job_key("contended"))["owner"] == {"S": winner}
    assert stack.get(stack.outbox, event_key("contended"))["owner"] == {"S": winner}
    records = stack.outbox_records()
    published = [(r["eventName"], r["dynamodb"]["NewImage"]["owner"]["S"]) for r in records]
    assert published == [("INSERT", winner)]


# --- cost independent of table size ---------------------------------------------------------------------

class _TableCopies:
    """Counts copy.deepcopy calls made on a moto Table (copy.deepcopy is what
    onward_infra.moto_fixes.transactions.copy and moto's own models module both call)."""

    def __init__(self) -> None:
        self.count = 0
        self._original = copy.deepcopy

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, Table):
            self.count += 1
        return self._original(value, *args, **kwargs)


def _alive(kind: type) -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, kind))


def _tables_alive() -> int:
    return _alive(Table)


def test_transactions_copy_no_table_and_retain_nothing(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 two-table transactions (the outbox table has a stream) deep-copy no Table and leave no extra
    Table alive: the cost of a transaction does not depend on the size of the tables it touches.

    Stock moto deep-copies every table a transaction touches, O(table size) per transaction, and keeps
    the copies (server memory past 24 GB with a stream). The same probe is run against stock moto for a
    few transactions at the end, to show that it does see those copies."""
    copies = _TableCopies()
    monkeypatch.setattr(moto_fixes.transactions.copy, "deepcopy", copies)
    for i in range(20):  # some content, so a copy would be a real one
        stack.db.put_item(TableName=stack.jobs, Item=job_item(f"seed-{i}"))

    def transaction(name: str) -> None:
        stack.db.transact_write_items(TransactItems=[
            {"Put": {"TableName": stack.jobs, "Item": job_item(name),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": stack.outbox, "Item": event_item(name),
                     "ConditionExpression": "attribute_not_exists(job_id)"}},
        ])

    alive_before = _tables_alive()
    for i in range(300):
        transaction(f"fixed-{i}")
    assert copies.count == 0
    assert _tables_alive() <= alive_before
    assert len(stack.outbox_records()) == 300

    with stock_moto():
        for i in range(3):
            transaction(f"stock-{i}")
    assert copies.count >= 3  # the probe works: stock moto copied (at least) one table per transaction
    assert _tables_alive() > alive_before


def test_rewriting_one_row_retains_no_old_copies(stack: Stack) -> None:
    """300 transactions that each rewrite one hot job row and add one outbox event leave 300 more items
    alive (the events) and 300 more stream records (the events' records), not more: the cost in memory
    of a transaction is what it stores.

    moto's BaseModel keeps every instance it ever built in `instances_tracked`; without
    moto_fixes._Untracked each of these transactions would also keep the row's previous image twice (our
    copy before the write, moto's update_item copy) and the stream record our rewrite replaced. The same
    probe is run against stock tracking at the end to show that it sees them."""
    stack.db.put_item(TableName=stack.jobs, Item=job_item("hot", n={"N": "0"}))

    def transaction(version: int) -> None:
        stack.db.transact_write_items(TransactItems=[
            {"Update": {"TableName": stack.jobs, "Key": job_key("hot"), "UpdateExpression": "SET n = :n",
                        "ExpressionAttributeValues": {":n": {"N": str(version)}}}},
            {"Put": {"TableName": stack.outbox, "Item": event_item("hot", version),
                     "ConditionExpression": "attribute_not_exists(job_id)"}},
        ])

    transaction(1)  # warm: the first request of a kind builds moto's own singletons
    items, records = _alive(Item), _alive(StreamRecord)
    for version in range(2, 302):
        transaction(version)
    assert _alive(Item) - items <= 300 + 5
    assert _alive(StreamRecord) - records <= 300 + 5
    assert len(stack.outbox_records()) == 301

    items, records = _alive(Item), _alive(StreamRecord)
    with stock_moto():
        for version in range(302, 312):
            transaction(version)
    assert _alive(Item) - items >= 10 + 2 * 10  # the probe works: stock moto keeps the old images
    assert _alive(StreamRecord) - records >= 10


# --- deployment from template.yaml ----------------------------------------------------------------------

def test_template_deploys_tables_indexes_and_outbox_stream(stack: Stack) -> None:
    """template.yaml's data resources deploy through the endpoint's CloudFormation: the jobs table with
    the `ready`, `leases`, `active`, `parked` and `overlaps` GSIs, the outbox table with `by_time` and a NEW_IMAGE
    stream, named in the environment as JOBS_TABLE / OUTBOX_TABLE. Without data_resources_template the SAM
    parts (functions, APIs) would fail or be silently skipped by moto's CloudFormation."""
    assert {"JOBS_TABLE", "OUTBOX_TABLE", "AWS_ENDPOINT_URL"} <= stack.environment.keys()
    assert stack.environment["AWS_ENDPOINT_URL"] == stack.endpoint.url
    tables = {name for page in stack.db.get_paginator("list_tables").paginate() for name in page["TableNames"]}
    assert {stack.jobs, stack.outbox} <= tables

    jobs = stack.db.describe_table(TableName=stack.jobs)["Table"]
    assert {index["IndexName"] for index in jobs["GlobalSecondaryIndexes"]} == {
        "ready", "leases", "active", "parked", "overlaps"}
    assert {k["AttributeName"]: k["KeyType"] for k in jobs["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}

    outbox = stack.db.describe_table(TableName=stack.outbox)["Table"]
    assert {index["IndexName"] for index in outbox["GlobalSecondaryIndexes"]} == {"by_time"}
    assert outbox["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert outbox["LatestStreamArn"]
    streams = stack.streams.list_streams(TableName=stack.outbox)["Streams"]
    assert [s["StreamArn"] for s in streams] == [outbox["LatestStreamArn"]]


def test_data_resources_template_keeps_only_data_resources() -> None:
    """Only tables, Kinesis streams and queues (with the parameters, mappings and conditions they use) are sent to
    the endpoint, without the SAM transform; `JobsTable` is read from JOBS_TABLE."""
    template = load_template()
    template["Resources"]["Api"] = {"Type": "AWS::Serverless::HttpApi", "Properties": {}}
    template["Resources"]["Worker"] = {"Type": "AWS::Serverless::Function", "Properties": {}}

    subset = data_resources_template(template)

    assert set(subset["Resources"]) == {
        "JobsTable", "OutboxTable", "StatusTable", "CheckpointTable", "ConflictsTable", "ParkedTable",
        "EventsStream", "RelayFailuresQueue", "ProjectorFailuresQueue", "ArchiverFailuresQueue",
        "WebhookDeliveriesQueue", "WebhookMatcherFailuresQueue"}
    assert all(r["Type"] in DATA_RESOURCE_TYPES for r in subset["Resources"].values())
    assert "Transform" not in subset
    # Only the parameters and conditions the data resources use: the JWT issuer, say, needs no answer here.
    assert set(subset["Parameters"]) == {"DeletionProtection", "EventsStreamMode", "TargetJobsPerSecond",
                                         "EventsRetentionHours"}
    assert subset["Mappings"] == {"EventsStreamSizing": template["Mappings"]["EventsStreamSizing"]}
    assert all(subset["Parameters"][name] == template["Parameters"][name] for name in subset["Parameters"])
    assert set(subset["Conditions"]) == {"ProtectTables", "OnDemandEvents"}
    assert "JwtIssuer" in template["Parameters"] and "WorkerOnLambda" in template["Conditions"]
    assert subset["Resources"]["JobsTable"]["Properties"]["DeletionProtectionEnabled"] == {
        "Fn::If": ["ProtectTables", True, False]}
    assert environment_variable_for("JobsTable") == "JOBS_TABLE"
    assert environment_variable_for("OutboxTable") == "OUTBOX_TABLE"


# --- index partitions and Kinesis lookups (moto_fixes) -----------------------------------------------------

READY_PARTITIONS = ("acme#0#0", "acme#0#1", "globex#0#0")
_index_writes = st.lists(st.tuples(
    st.sampled_from(["put", "update_key", "update_other", "remove_key", "delete", "transact", "cancelled"]),
    st.integers(0, 5),  # which job row
    st.sampled_from(READY_PARTITIONS),
    st.integers(1, 3),  # due time
), min_size=1, max_size=25)


def ready_query(stack: Stack, partition: str) -> list[tuple[str, int]]:
    items = stack.db.query(TableName=stack.jobs, IndexName="ready", KeyConditionExpression="ready_pk = :p",
                           ExpressionAttributeValues={":p": {"S": partition}})["Items"]
    return sorted((item["pk"]["S"], int(item["ready_due"]["N"])) for item in items)


def ready_scan(stack: Stack, partition: str) -> list[tuple[str, int]]:
    items = [item for page in stack.db.get_paginator("scan").paginate(TableName=stack.jobs)
             for item in page["Items"] if item.get("ready_pk", {}).get("S") == partition]
    return sorted((item["pk"]["S"], int(item["ready_due"]["N"])) for item in items)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=_index_writes)
def test_an_index_query_sees_exactly_what_a_scan_sees_after_any_writes(endpoint: EmbeddedEndpoint, writes) -> None:
    """The index partition maps are brought up to date from every write path: without the marking in
    moto's put/update/delete and in our transactions (rollback included), a job entering, leaving or
    moving between ready queues would be missed by a claim or claimed from the wrong queue."""
    stack = Stack(endpoint)
    for partition in READY_PARTITIONS:  # build every map first, so that later writes must update them
        assert ready_query(stack, partition) == []
    for kind, number, partition, due in writes:
        key = job_key(f"j{number}")
        ready = {"ready_pk": {"S": partition}, "ready_due": {"N": str(due)}}
        if kind == "put":
            stack.db.put_item(TableName=stack.jobs, Item={**job_item(f"j{number}"), **ready})
        elif kind == "update_key":
            stack.db.update_item(TableName=stack.jobs, Key=key, UpdateExpression="SET ready_pk = :p, ready_due = :d",
                                 ExpressionAttributeValues={":p": ready["ready_pk"], ":d": ready["ready_due"]})
        elif kind == "update_other":
            stack.db.update_item(TableName=stack.jobs, Key=key, UpdateExpression="SET version = :v",
                                 ExpressionAttributeValues={":v": {"N": str(due)}})
        elif kind == "remove_key":
            stack.db.update_item(TableName=stack.jobs, Key=key, UpdateExpression="REMOVE ready_pk, ready_due")
        elif kind == "delete":
            stack.db.delete_item(TableName=stack.jobs, Key=key)
        else:  # a transaction moving the job; "cancelled" fails its condition on a second item: no change
            items = [{"Update": {"TableName": stack.jobs, "Key": key,
                                 "UpdateExpression": "SET ready_pk = :p, ready_due = :d",
                                 "ExpressionAttributeValues": {":p": ready["ready_pk"], ":d": ready["ready_due"]}}}]
            if kind == "cancelled":
                items.append({"ConditionCheck": {"TableName": stack.jobs, "Key": job_key("never"),
                                                 "ConditionExpression": "attribute_exists(pk)"}})
            if kind == "cancelled":
                with pytest.raises(ClientError) as cancelled:
                    stack.db.transact_write_items(TransactItems=items)
                assert code(cancelled.value) == "TransactionCanceledException"
            else:
                stack.db.transact_write_items(TransactItems=items)
        for ready_partition in READY_PARTITIONS:
            assert ready_query(stack, ready_partition) == ready_scan(stack, ready_partition), (kind, number)


def test_kinesis_records_are_read_back_by_key_in_order_and_page_by_page(stack: Stack) -> None:
    kinesis = stack.endpoint.client("kinesis")
    stream = stack.environment["EVENTS_STREAM"]
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]
    for number in range(25):
        kinesis.put_record(StreamName=stream, Data=f"r{number}".encode(), PartitionKey="k",
                           ExplicitHashKey=shard["HashKeyRange"]["StartingHashKey"])
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen, behind = [], []
    while True:
        page = kinesis.get_records(ShardIterator=iterator, Limit=10)
        if not page["Records"]:
            break
        seen += [record["Data"].decode() for record in page["Records"]]
        behind.append(page["MillisBehindLatest"])
        iterator = page["NextShardIterator"]
    assert seen == [f"r{number}" for number in range(25)] and len(behind) == 3 and behind[-1] == 0
    sequence = [int(r["SequenceNumber"]) for r in kinesis.get_records(
        ShardIterator=kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                                 ShardIteratorType="AT_SEQUENCE_NUMBER",
                                                 StartingSequenceNumber="10")["ShardIterator"])["Records"]]
    assert sequence == list(range(10, 26))


def _read_shard(kinesis: Any, stream: str, shard_id: str) -> tuple[list[str], str | None]:
    """Every record's data of a shard from its start, and the iterator the last empty page answered."""
    iterator: str | None = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id,
                                                      ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen: list[str] = []
    while iterator is not None:
        page = kinesis.get_records(ShardIterator=iterator, Limit=10)
        seen += [record["Data"].decode() for record in page["Records"]]
        iterator = page.get("NextShardIterator")
        if not page["Records"]:
            break
    return seen, iterator


def test_a_split_shard_keeps_its_records_and_closes_and_only_open_shards_receive_new_ones(stack: Stack) -> None:
    """As Kinesis resharding works (stock moto moves the parent's records into the children, keeps routing
    new records to the closed parent, and never ends a closed shard's iterator)."""
    kinesis = stack.endpoint.client("kinesis")
    stream = stack.environment["EVENTS_STREAM"]
    parent = kinesis.list_shards(StreamName=stream)["Shards"][0]
    low, high = (int(parent["HashKeyRange"][key]) for key in ("StartingHashKey", "EndingHashKey"))
    for number in range(3):
        kinesis.put_record(StreamName=stream, Data=f"before{number}".encode(), PartitionKey="k",
                           ExplicitHashKey=str(low))
    middle = (low + high) // 2
    kinesis.split_shard(StreamName=stream, ShardToSplit=parent["ShardId"], NewStartingHashKey=str(middle))
    shards = {shard["ShardId"]: shard for shard in kinesis.list_shards(StreamName=stream)["Shards"]}
    children = [shard for shard in shards.values() if shard.get("ParentShardId") == parent["ShardId"]]
    assert len(children) == 2 and "EndingSequenceNumber" in shards[parent["ShardId"]]["SequenceNumberRange"]
    for key in (low, middle - 1, middle, high):  # both ends of both children's ranges, inclusive
        put = kinesis.put_record(StreamName=stream, Data=f"after{key}".encode(), PartitionKey="k",
                                 ExplicitHashKey=str(key))
        assert put["ShardId"] in {child["ShardId"] for child in children}

    assert _read_shard(kinesis, stream, parent["ShardId"]) == ([f"before{n}" for n in range(3)], None)
    first, second = sorted(children, key=lambda shard: int(shard["HashKeyRange"]["StartingHashKey"]))
    assert _read_shard(kinesis, stream, first["ShardId"])[0] == [f"after{low}", f"after{middle - 1}"]
    seen, iterator = _read_shard(kinesis, stream, second["ShardId"])
    assert seen == [f"after{middle}", f"after{high}"] and iterator is not None  # an open shard never ends


def _item_operations(stack: Stack) -> list[dict[str, Any]]:
    """One answer of each item operation, over an item holding every attribute type."""
    table, db = stack.jobs, stack.db
    key = {"pk": {"S": "JOB#fast"}, "sk": {"S": "JOB"}}
    item = {**key, "s": {"S": "text é"}, "n": {"N": "12.5"}, "b": {"B": b"\x00\xffraw"}, "ss": {"SS": ["a", "b"]},
            "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"\x01", b"\x02"]}, "m": {"M": {"x": {"L": [{"NULL": True}]}}},
            "l": {"L": [{"BOOL": False}, {"N": "-3"}]}, "t": {"BOOL": True}}
    total = {"ReturnConsumedCapacity": "TOTAL"}
    answers = [
        db.put_item(TableName=table, Item=item, **total),
        db.put_item(TableName=table, Item=item, ReturnValues="ALL_OLD"),
        db.get_item(TableName=table, Key=key, ConsistentRead=True, **total),
        db.update_item(TableName=table, Key=key, UpdateExpression="SET n = n + :one", ReturnValues="ALL_NEW",
                       ExpressionAttributeValues={":one": {"N": "1"}}),
        db.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": key["pk"]},
                 **total),
        db.query(TableName=table, KeyConditionExpression="pk = :p", Select="COUNT",
                 ExpressionAttributeValues={":p": key["pk"]}),
        db.scan(TableName=table, Limit=1),
        db.batch_get_item(RequestItems={table: {"Keys": [key, {"pk": {"S": "JOB#none"}, "sk": {"S": "JOB"}}]}}),
        db.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": key}}]),
        db.transact_write_items(TransactItems=[{"Update": {"TableName": table, "Key": key,
                                                           "UpdateExpression": "REMOVE t"}}], **total),
        db.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": {**key, "sk": {"S": "OTHER"}}}}]}),
        db.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD"),
    ]
    for answer in answers:
        answer.pop("ResponseMetadata")
    return json.loads(json.dumps(answers, default=repr).replace(table, "<table>"))


def test_item_answers_dumped_directly_equal_what_motos_serializer_writes(
        endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path for item operations' answers (moto_fixes.server.dynamo_result_execute) must be exact: the same
    answers, as boto3 parses them, as moto's own shape-driven serializer gives."""
    fast = _item_operations(Stack(endpoint))
    monkeypatch.setattr(DynamoResult, "execute_result", moto_fixes.server._original_dynamo_result_execute)
    assert _item_operations(Stack(endpoint)) == fast
    assert fast[2]["Item"]["b"] == {"B": repr(b"\x00\xffraw")} and fast[5]["Count"] == 1


def test_record_answers_dumped_directly_equal_what_motos_serializer_writes(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path for the answers of DynamoDB Streams' and Kinesis' record operations and of
    TransactWriteItems (moto_fixes.server.action_result_execute) must be exact: each answer of a workload
    that touches every one of them, dumped both ways from the same result, is the same JSON with the same
    headers. Breaks if a timestamp is written to the microsecond or as a date, a binary value not as base64, or
    a member without a value as null."""
    compared: Counter[str] = Counter()

    def both(self: ActionResult, context: Any) -> Any:
        fast = moto_fixes.server.action_result_execute(self, context)
        moto = moto_fixes.server._original_action_result_execute(self, context)
        operation = f"{context.operation_model.service_model.service_name}.{context.operation_model.name}"
        if not isinstance(self.result, Exception):
            assert (fast[0], fast[1], json.loads(fast[2])) == (moto[0], moto[1], json.loads(moto[2])), operation
            compared[operation] += 1
        return fast

    monkeypatch.setattr(ActionResult, "execute_result", both)
    db, streams, kinesis = stack.db, stack.streams, stack.endpoint.client("kinesis")
    stream = stack.environment["EVENTS_STREAM"]
    for version in (1, 2):
        db.transact_write_items(TransactItems=[{"Put": {"TableName": stack.outbox, "Item": {
            "job_id": {"S": "fast"}, "version": {"N": str(version)}, "b": {"B": b"\x00\xff"},
            "m": {"M": {"l": {"L": [{"NULL": True}, {"NS": ["1", "2.5"]}]}}}}}}])
    arn = db.describe_table(TableName=stack.outbox)["Table"]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        streams.get_records(ShardIterator=iterator, Limit=10)
    kinesis.put_records(StreamName=stream, Records=[{"Data": b"\x00raw\xff", "PartitionKey": "k"},
                                                    {"Data": b"{}", "PartitionKey": "other"}])
    kinesis.put_record(StreamName=stream, Data=b"one", PartitionKey="k")
    kinesis.describe_stream_summary(StreamName=stream)
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        kinesis.get_records(ShardIterator=iterator, Limit=10)
    assert set(compared) == {
        "dynamodb.TransactWriteItems", "dynamodbstreams.DescribeStream", "dynamodbstreams.GetShardIterator",
        "dynamodbstreams.GetRecords", "kinesis.PutRecords", "kinesis.PutRecord", "kinesis.DescribeStreamSummary",
        "kinesis.ListShards", "kinesis.GetShardIterator", "kinesis.GetRecords"}


def test_request_setup_shortcuts_give_what_moto_gives(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto_fixes.request_setup: a DynamoDB body without binary values loaded with json.loads must give
    exactly the parameters moto's shape-driven parser gives (a body with them is moto's to parse), and the
    URL written at once for an SDK's request the URL werkzeug builds. Each request of a workload over every
    item operation (binary values included) and the stream and Kinesis reads is set up both ways. Breaks if
    the shortcut took a body with a binary value (bytes would stay base64 text) or wrote another URL."""
    loaded: Counter[str] = Counter()

    def both_parses(self: DynamoHandler, request: Any) -> None:
        moto_fixes.request_setup._original_parse_parameters(self, request)
        by_moto = self.params
        moto_fixes.request_setup.dynamo_parse_parameters(self, request)
        assert self.params == by_moto, self._get_action()
        loaded["binary" if b'"B"' in request.data else "plain"] += 1

    urls: list[tuple[str, str]] = []

    def both_urls(environ: dict[str, Any], request: Any) -> str:
        url = raw_url(environ, request)
        urls.append((url, request.raw_url))
        return url

    raw_url = moto_fixes.server._raw_url
    monkeypatch.setattr(DynamoHandler, "parse_parameters", both_parses)
    monkeypatch.setattr(moto_fixes.server, "_raw_url", both_urls)
    _item_operations(stack)
    stack.outbox_records()
    assert loaded["plain"] >= 10 and loaded["binary"] >= 2
    assert urls and all(ours == moto for ours, moto in urls)
    answer = stack.db.get_item(TableName=stack.jobs, Key={"pk": {"S": "JOB#none"}, "sk": {"S": "JOB"}})
    request_id = answer["ResponseMetadata"]["RequestId"]
    assert len(request_id) == 52 and request_id.isalnum()

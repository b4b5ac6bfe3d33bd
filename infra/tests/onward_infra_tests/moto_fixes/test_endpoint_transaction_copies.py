"""A transaction's copies of the items it writes (transactions.py `_Touched`) are what the items were.

`_Touched` keeps each item a transaction writes as it was before, to restore it should an action fail while
applied, and to write the stream record's old image. It copies the item's attribute map only, sharing the
values, when no action of the transaction changes a stored value in place (updates.keeps_values: top-level
SET and REMOVE, ADD of a number); anything else is deep-copied as before. moto's ADD of a set appends to the
stored set, and its SET or REMOVE of a nested path changes the stored map or list: were such a transaction's
items copied by their map only, the restored item and the old image would show the change.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.moto_fixes import transactions, updates

pytestmark = pytest.mark.integration

_tables = itertools.count()
ITEM = {"pk": {"S": "row"}, "tags": {"SS": ["a"]}, "m": {"M": {"x": {"N": "1"}, "y": {"S": "kept"}}},
        "l": {"L": [{"S": "first"}]}, "n": {"N": "5"}, "txt": {"S": "hello"}}
# (update expression, its values) of an action that changes a stored value in place when moto applies it
IN_PLACE: dict[str, tuple[str, dict[str, Any]]] = {
    "set ADD": ("ADD tags :t", {":t": {"SS": ["b"]}}),
    "nested SET": ("SET m.x = :v", {":v": {"N": "2"}}),
    "nested REMOVE": ("REMOVE m.y", {}),
    "list element SET": ("SET l[0] = :v", {":v": {"S": "second"}}),
}
# the same kind of change by top-level attributes only: copied by their map
TOP_LEVEL: dict[str, tuple[str, dict[str, Any]]] = {
    "number ADD": ("ADD n :one", {":one": {"N": "1"}}),
    "top-level SET and REMOVE": ("SET n = n + :one, txt = :t REMOVE tags", {":one": {"N": "1"}, ":t": {"S": "x"}}),
}


def _table(endpoint: EmbeddedEndpoint) -> tuple[Any, str]:
    db = endpoint.client("dynamodb")
    name = f"copies-{next(_tables)}"
    db.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    db.put_item(TableName=name, Item=ITEM)
    db.put_item(TableName=name, Item={"pk": {"S": "text"}, "txt": {"S": "hello"}})
    return db, name


def _update(table: str, expression: str, values: dict[str, Any]) -> dict[str, Any]:
    update: dict[str, Any] = {"TableName": table, "Key": {"pk": {"S": "row"}}, "UpdateExpression": expression}
    if values:
        update["ExpressionAttributeValues"] = values
    return {"Update": update}


def _failing(table: str) -> dict[str, Any]:
    """An action that passes validation and fails while applied: a number added to a string."""
    return {"Update": {"TableName": table, "Key": {"pk": {"S": "text"}}, "UpdateExpression": "SET txt = txt + :one",
                       "ExpressionAttributeValues": {":one": {"N": "1"}}}}


def _records(endpoint: EmbeddedEndpoint, db: Any, table: str) -> list[dict[str, Any]]:
    streams = endpoint.client("dynamodbstreams")
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return sorted(records, key=lambda record: int(record["dynamodb"]["SequenceNumber"]))


@pytest.mark.parametrize("change", [*IN_PLACE, *TOP_LEVEL])
def test_a_rolled_back_transaction_leaves_the_item_as_it_was(endpoint: EmbeddedEndpoint, change: str) -> None:
    """An action applied, then a later one failing: the item is restored to what it was. Were the item of a
    transaction with a set ADD or a nested path copied by its attribute map only (`_keeps_values` true for
    it), the restored item would hold the added element, the changed or removed map member, the new list
    element."""
    expression, values = {**IN_PLACE, **TOP_LEVEL}[change]
    db, table = _table(endpoint)
    with pytest.raises(ClientError):
        db.transact_write_items(TransactItems=[_update(table, expression, values), _failing(table)])
    assert db.get_item(TableName=table, Key={"pk": {"S": "row"}}, ConsistentRead=True)["Item"] == ITEM


@pytest.mark.parametrize("change", [*IN_PLACE, *TOP_LEVEL])
def test_the_old_image_is_the_item_before_the_transaction(endpoint: EmbeddedEndpoint, change: str) -> None:
    """A committed transaction's stream record carries the item as it was before it: a copy sharing the
    stored values would carry the set, map or list as the transaction changed it."""
    expression, values = {**IN_PLACE, **TOP_LEVEL}[change]
    db, table = _table(endpoint)
    db.transact_write_items(TransactItems=[_update(table, expression, values)])
    record = _records(endpoint, db, table)[-1]
    assert record["eventName"] == "MODIFY"
    assert record["dynamodb"]["OldImage"] == ITEM
    assert record["dynamodb"]["NewImage"] == db.get_item(TableName=table, Key={"pk": {"S": "row"}})["Item"]


def test_only_a_transaction_changing_values_in_place_is_deep_copied(endpoint: EmbeddedEndpoint,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The platform's transactions (top-level SET, REMOVE, ADD of numbers; Puts) take no deep copy, and any
    transaction with an action changing a value in place takes one per item: without `_keeps_values` every
    item would be deep-copied again (about a tenth of a transaction's time)."""
    deep: list[object] = []
    real_deepcopy: Callable[[Any], Any] = transactions.copy.deepcopy

    def counting(value: Any) -> Any:
        deep.append(value)
        return real_deepcopy(value)

    monkeypatch.setattr(transactions, "copy", types.SimpleNamespace(deepcopy=counting))
    db, table = _table(endpoint)
    for expression, values in TOP_LEVEL.values():
        db.transact_write_items(TransactItems=[
            _update(table, expression, values),
            {"Put": {"TableName": table, "Item": {"pk": {"S": "other"}, "n": {"N": "1"}}}}])
    assert deep == []
    for expression, values in IN_PLACE.values():
        db.transact_write_items(TransactItems=[
            _update(table, expression, values),
            {"Put": {"TableName": table, "Item": {"pk": {"S": "other"}, "n": {"N": "1"}}}}])
    assert len(deep) == 2 * len(IN_PLACE)


@pytest.mark.parametrize(("expression", "values", "keeps"), [
    ("SET #a = :v, b = if_not_exists(b, :w) REMOVE c", {":v": {"S": "x"}, ":w": {"N": "1"}}, True),
    ("SET a = a + :one ADD n :one", {":one": {"N": "1"}}, True),
    ("ADD tags :t", {":t": {"SS": ["b"]}}, False),
    ("ADD tags :t", {":t": {"NS": ["1"]}}, False),
    ("ADD n :missing", {}, False),
    ("ADD n :one", None, False),
    ("DELETE tags :t", {":t": {"SS": ["a"]}}, False),
    ("SET m.x = :v", {":v": {"N": "1"}}, False),
    ("REMOVE m.x", {}, False),
    ("SET l[0] = :v", {":v": {"N": "1"}}, False),
    ("SET l = list_append(l, :v)", {":v": {"L": []}}, False),
    ("SET a = :v SET b = :v", {":v": {"N": "1"}}, False),  # (two SET clauses: moto's error, left to it)
    ("not an expression", {}, False),
    (None, {}, False),
])
def test_keeps_values_by_expression(expression: object, values: dict[str, Any] | None, keeps: bool) -> None:
    """updates.keeps_values: true only for top-level SET/REMOVE and ADD of a number; a set ADD or a nested
    path taken for one would let a transaction's copy share the values moto changes."""
    assert updates.keeps_values(expression, values) is keeps

"""TransactWriteItems' request validation with the names read from kept parses
(infra/onward_infra/moto_fixes/transactions.py `handler_transact_write_items`) is moto's own validation: the same
transaction handed to the backend, the same answer, the same error for every invalid request, and checked
in the same order (the first invalid item's error).

Each request is validated by moto's `DynamoHandler.transact_write_items` (with moto's own parse) and by
ours, in one process with every fix installed, each on a handler whose backend records the transaction
instead of running it (the validation is all that differs: the backend call is the same). Ours runs each
request three times: the first time the expressions are parsed, then their names are read from the kept
parses.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler

from onward_infra import moto_fixes
from onward_infra.moto_fixes import conditions, expressions, server, transactions

pytestmark = pytest.mark.integration

TABLE = "validated"
INDEXED = "state"  # the key of the table's global secondary index


def _key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "row"}}


def _claim(version: str = "3") -> dict[str, Any]:
    """A claim-shaped update: a condition on the row's state and version, names in both expressions."""
    return {"Update": {"TableName": TABLE, "Key": _key("job#1"),
                       "UpdateExpression": "SET #a0 = :v0, #a1 = :v1 REMOVE #a2",
                       "ConditionExpression": "#state = :expected_state AND #version = :expected_version",
                       "ExpressionAttributeNames": {"#state": "state", "#version": "version", "#a0": "state",
                                                    "#a1": "owner", "#a2": "parked"},
                       "ExpressionAttributeValues": {":v0": {"S": "running"}, ":v1": {"S": "w1"},
                                                     ":expected_state": {"S": "queued"},
                                                     ":expected_version": {"N": version}}}}


def _put(pk: str, condition: str | None = "attribute_not_exists(pk)", **extra: Any) -> dict[str, Any]:
    put: dict[str, Any] = {"TableName": TABLE, "Item": {**_key(pk), "state": {"S": "queued"}}, **extra}
    if condition is not None:
        put["ConditionExpression"] = condition
    return {"Put": put}


def _counter(expression: str, names: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    return {"Update": {"TableName": TABLE, "Key": _key("counter"), "UpdateExpression": expression,
                       "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}}


# name -> TransactItems; the valid ones reach the backend, each invalid one is refused by the validation
REQUESTS: dict[str, list[dict[str, Any]]] = {
    "create": [_put("job#1"), _put("idem#1"),
               _counter("SET #e = :e ADD #w :d, #b0 :d REMOVE #p",
                        {"#e": "entity", "#w": "waiting", "#b0": "w0", "#p": "parked_pk"},
                        {":e": {"S": "queue"}, ":d": {"N": "1"}})],
    "claim": [_claim(), _counter("ADD #r :one", {"#r": "running"}, {":one": {"N": "1"}})],
    "claim again, other values": [_claim("4"), _counter("ADD #r :one", {"#r": "running"}, {":one": {"N": "-1"}})],
    "a condition check and a delete": [
        {"ConditionCheck": {"TableName": TABLE, "Key": _key("job#1"), "ConditionExpression": "#s = :s",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": {":s": {"S": "queued"}}}},
        {"Delete": {"TableName": TABLE, "Key": _key("job#2"), "ConditionExpression": "attribute_exists(#p)",
                    "ExpressionAttributeNames": {"#p": "pk"}}}],
    "a name used by the update only": [_counter("SET #n = :n", {"#n": "n"}, {":n": {"N": "1"}})],
    "a put without a condition": [_put("job#3", None)],
    "a name unused": [_put("job#4", "attribute_not_exists(pk)", ExpressionAttributeNames={"#unused": "x"})],
    "a name unused by the update": [_counter("SET #n = :n", {"#n": "n", "#m": "m"}, {":n": {"N": "1"}})],
    "a claim's name unused by its update": [
        {"Update": {**_claim()["Update"], "UpdateExpression": "SET #a0 = :v0 REMOVE #a2",
                    "ExpressionAttributeValues": {**_claim()["Update"]["ExpressionAttributeValues"]}}}],
    "a name unused after a valid item": [_claim(), _counter("SET #n = :n", {"#n": "n", "#z": "z"},
                                                            {":n": {"N": "1"}})],
    "a condition's name missing": [_put("job#5", "attribute_not_exists(#missing)")],
    "a condition's value missing": [_put("job#5", "version = :missing")],
    "an invalid condition": [_put("job#5", "state = = :a", ExpressionAttributeValues={":a": {"S": "q"}})],
    "an invalid update expression": [_counter("SET #n = = :n", {"#n": "n"}, {":n": {"N": "1"}})],
    "a name missing from the update (the backend's to refuse)": [_counter("SET #n = :n", {}, {":n": {"N": "1"}})],
    "empty values in a put": [_put("job#6", "attribute_not_exists(pk)", ExpressionAttributeValues={})],
    "empty values in an update": [_counter("SET n = :n", {}, {})],
    "an empty key in a put": [{"Put": {"TableName": TABLE, "Item": {**_key(""), "state": {"S": "q"}}}}],
    "an empty index key in a put": [{"Put": {"TableName": TABLE, "Item": {**_key("job#7"), INDEXED: {"S": ""}}}}],
    "an empty key in an update": [{"Update": {"TableName": TABLE, "Key": _key(""), "UpdateExpression": "SET n = :n",
                                              "ExpressionAttributeValues": {":n": {"N": "1"}}}}],
    "a missing table": [{"Put": {"TableName": "no-such-table", "Item": _key("job#8")}}],
    "an update without an expression": [{"Update": {"TableName": TABLE, "Key": _key("job#9")}}],
    "an empty entry": [{}],
    "a condition error before an empty key": [_put("", "state = = :a", ExpressionAttributeValues={":a": {"S": "q"}})],
}


class _RecordingBackend:
    """A backend whose tables are a real one's, and whose transactions are recorded, not run."""

    def __init__(self, backend: DynamoDBBackend) -> None:
        self._backend = backend
        self.transactions: list[list[dict[str, Any]]] = []

    def get_table(self, name: str) -> Table:
        return self._backend.get_table(name)

    def transact_write_items(self, transact_items: list[dict[str, Any]]) -> None:
        self.transactions.append(copy.deepcopy(transact_items))


class _Handler(DynamoHandler):
    def __init__(self, backend: _RecordingBackend, body: dict[str, Any]) -> None:
        super().__init__()
        self._recording = backend
        self.body = body

    @property
    def dynamodb_backend(self) -> Any:
        return self._recording


@pytest.fixture(scope="module")
def backend() -> Iterator[DynamoDBBackend]:
    was_installed = moto_fixes.installed()
    moto_fixes.install()
    found = DynamoDBBackend("us-east-1", DEFAULT_ACCOUNT_ID)
    found.create_table(
        TABLE, schema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        throughput=None, attr=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", INDEXED)],
        global_indexes=[{"IndexName": "ready", "Projection": {"ProjectionType": "ALL"},
                         "KeySchema": [{"AttributeName": INDEXED, "KeyType": "HASH"}]}],
        indexes=None, streams=None, billing_mode="PAY_PER_REQUEST", sse_specification=None, tags=[],
        deletion_protection_enabled=None, warm_throughput=None)
    yield found
    if not was_installed:
        moto_fixes.uninstall()


def _moto_s(handler: DynamoHandler) -> Any:
    """moto's own validation, with moto's own parse of the conditions (none kept)."""
    kept_parse = ConditionExpressionParser.parse
    ConditionExpressionParser.parse = conditions._original_parse  # type: ignore[method-assign]  # moto's, for the call
    try:
        return transactions._original_handler_transact_write_items(handler)
    finally:
        ConditionExpressionParser.parse = kept_parse  # type: ignore[method-assign]


def _outcome(validate: Any, backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> tuple[Any, ...]:
    """What a validation does with a request: the answer and the transaction it hands on, or its error."""
    recording = _RecordingBackend(backend)
    handler = _Handler(recording, {"TransactItems": copy.deepcopy(transact_items)})
    try:
        answer = validate(handler)
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        return "raised", type(error), str(error), recording.transactions
    return "answered", answer.result, recording.transactions


@pytest.mark.parametrize("name", list(REQUESTS))
def test_validation_from_kept_parses_is_moto_s(backend: DynamoDBBackend, name: str) -> None:
    """Without the same checks in the same order, an invalid request would get another error than moto's
    (or none), and a valid one be refused; without a fresh list of names per request, a kept parse's names
    would grow with every use and hide an unused name."""
    transact_items = REQUESTS[name]
    expected = _outcome(_moto_s, backend, transact_items)
    conditions.forget()
    expressions.forget()
    for _ in range(3):  # parsed, then read from the kept parses (twice: a kept list changed would show)
        assert _outcome(transactions.handler_transact_write_items, backend, transact_items) == expected
    if name.startswith(("create", "claim", "a condition check", "a name used", "a put", "a name missing from")):
        assert expected[0] == "answered"
    else:
        assert expected[0] == "raised"


def test_requests_one_after_another_share_kept_parses_as_moto_would_validate_them(backend: DynamoDBBackend) -> None:
    """Every request in turn, the parses kept from the ones before: were a kept list of names handed out
    (and grown by a request's update names), a later request's unused name would pass as used."""
    conditions.forget()
    expressions.forget()
    for transact_items in REQUESTS.values():
        assert (_outcome(transactions.handler_transact_write_items, backend, transact_items)
                == _outcome(_moto_s, backend, transact_items))


def test_the_validation_reads_kept_parses_without_building_trees(backend: DynamoDBBackend,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the change: a kept condition's names are read, no tree unpickled (were `names_found`
    to parse each time, pickle.loads would be called here)."""
    transact_items = REQUESTS["claim"]
    _outcome(transactions.handler_transact_write_items, backend, transact_items)  # keeps the parses

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a tree was built")

    monkeypatch.setattr(conditions.pickle, "loads", refuse)
    monkeypatch.setattr(expressions, "_original_make", refuse)
    assert _outcome(transactions.handler_transact_write_items, backend, transact_items)[0] == "answered"


def test_the_lean_switch_off_validates_by_moto_s_own_code(backend: DynamoDBBackend,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """ONWARD_LEAN_REQUESTS=false (server.LEAN) gives moto's own handler, for the endpoint's differential
    tests (test_endpoint_lean_path.py)."""
    monkeypatch.setattr(server, "LEAN", False)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the kept parses were read")

    monkeypatch.setattr(conditions, "names_found", refuse)
    assert _outcome(transactions.handler_transact_write_items, backend, REQUESTS["claim"])[0] == "answered"

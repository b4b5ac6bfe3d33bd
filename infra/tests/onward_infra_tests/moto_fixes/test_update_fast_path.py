"""The embedded endpoint's fast path for update expressions (infra/onward_infra/moto_fixes/updates.py) answers, writes
and streams exactly what moto's own update_item does: random sequences of UpdateItem and TransactWriteItems
with the platform's expression shapes and their edge cases (missing attributes, type mismatches, ADD to a
non-number, duplicate paths, key attributes, reserved words, undefined placeholders, empty values, an item
growing past moto's size limit, list_append, conditions, return values), run once with the fast path and once
with moto's own update_item put back (every other fix in place), on two tables alike, compared request by
request (answers, error codes and messages), item by item and stream record by stream record.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onward_infra import moto_fixes
from onward_infra.endpoint import EmbeddedEndpoint, client_for
from onward_infra.moto_fixes import queries, updates

pytestmark = pytest.mark.integration

_tables = itertools.count()
BIG = "z" * 150_000  # three of them pass moto's item size limit (405,000 bytes)
VALUES: list[dict[str, Any]] = [
    {"S": "x"}, {"S": "y"}, {"S": ""}, {"N": "1"}, {"N": "-2.5"}, {"N": "10"}, {"N": "0"}, {"BOOL": True},
    {"BOOL": False}, {"NULL": True}, {"L": [{"S": "q"}]}, {"L": []}, {"NS": ["1", "2"]}, {"M": {"a": {"N": "1"}}},
    {"S": BIG},
]
NUMBERS: list[dict[str, Any]] = [{"N": "1"}, {"N": "-2.5"}, {"N": "10"}]
# attributes, mostly ordinary ones; now and then the table's keys (pk, sk), an index's keys (gsi_pk a string,
# n a number) or a reserved word (size, as a plain name)
ORDINARY = ["a", "b", "c", "d", "count_x"]
EDGES = ["n", "gsi_pk", "sk", "pk", "size"]
KEYS = [{"pk": {"S": pk}, "sk": {"S": sk}} for pk in ("k1", "k2") for sk in ("1", "2")]


class Expression:
    """An update expression built term by term, with the names and values it uses."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self.clauses: dict[str, list[str]] = {}

    def path(self, draw: Any) -> str:
        attribute = str(draw(st.sampled_from(EDGES if draw(st.integers(0, 5)) == 0 else ORDINARY)))
        if draw(st.booleans()):
            return attribute
        placeholder = f"#{attribute}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, draw: Any, number: bool = False) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = draw(st.sampled_from(NUMBERS if number and draw(st.integers(0, 4)) else VALUES))
        return placeholder

    def term(self, draw: Any) -> None:
        kind = draw(st.sampled_from(["set", "set", "set", "if_not_exists", "plus", "minus", "copy", "list_append",
                                     "add", "add", "remove"]))
        target = self.path(draw)
        if kind == "set":
            self.clauses.setdefault("SET", []).append(f"{target} = {self.value(draw)}")
        elif kind == "if_not_exists":
            self.clauses.setdefault("SET", []).append(
                f"{target} = if_not_exists({self.path(draw)}, {self.value(draw)})")
        elif kind in ("plus", "minus"):
            left, right = self.path(draw), self.value(draw, number=True)
            if draw(st.booleans()):
                left, right = right, left
            self.clauses.setdefault("SET", []).append(f"{target} = {left} {'+' if kind == 'plus' else '-'} {right}")
        elif kind == "copy":
            self.clauses.setdefault("SET", []).append(f"{target} = {self.path(draw)}")
        elif kind == "list_append":
            self.clauses.setdefault("SET", []).append(f"{target} = list_append({self.path(draw)}, {self.value(draw)})")
        elif kind == "add":
            self.clauses.setdefault("ADD", []).append(f"{target} {self.value(draw, number=True)}")
        else:
            self.clauses.setdefault("REMOVE", []).append(target)

    def text(self, order: list[str]) -> str:
        return " ".join(f"{clause} {', '.join(self.clauses[clause])}" for clause in order if clause in self.clauses)


@st.composite
def update_requests(draw: Any) -> dict[str, Any]:
    """One Update: the platform's shapes and their edge cases, maybe a condition, maybe a placeholder undefined."""
    expression = Expression()
    for _ in range(draw(st.integers(1, 4))):
        expression.term(draw)
    order = draw(st.permutations(["SET", "ADD", "REMOVE"]))
    request: dict[str, Any] = {"Key": draw(st.sampled_from(KEYS)), "UpdateExpression": expression.text(order)}
    condition = draw(st.sampled_from([None, None, "attribute_exists(pk)", "attribute_not_exists(pk)"]))
    if condition is not None:
        request["ConditionExpression"] = condition
    names, values = dict(expression.names), dict(expression.values)
    if draw(st.integers(0, 9)) == 0 and (names or values):  # undefined in the request
        (names if names else values).popitem()
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    return request


def _numbers(low: int, high: int) -> Any:
    return st.integers(low, high).map(lambda number: {"N": str(number)})


@st.composite
def platform_requests(draw: Any) -> dict[str, Any]:
    """One Update as onward/store/dynamo/writes.py and dynamo_recorder.py build them: a queue entry, a job row, a
    tenant's
    running counter under its cap, a run marked fenced (its overlap an ADD of a number set)."""
    kind = draw(st.sampled_from(["entry", "job", "running", "fenced"]))
    key = draw(st.sampled_from(KEYS))
    if kind == "entry":
        return {"Key": key, "UpdateExpression": "SET #e = :e, #t = :t, #apk = :apk, #avt = if_not_exists(#avt, :vt) "
                                                "ADD #band0 :band0, #waiting :delta REMOVE #ppk, #until",
                "ExpressionAttributeNames": {"#e": "entity", "#t": "tenant_id", "#apk": "active_pk",
                                             "#avt": "active_vt", "#band0": "band_0", "#waiting": "waiting",
                                             "#ppk": "parked_pk", "#until": "parked_until"},
                "ExpressionAttributeValues": {":e": {"S": "Q"}, ":t": {"S": "acme"}, ":apk": {"S": "A#1"},
                                              ":vt": draw(_numbers(0, 99)), ":band0": draw(_numbers(-2, 2)),
                                              ":delta": draw(_numbers(-2, 2))}}
    if kind == "job":
        return {"Key": key, "UpdateExpression": "SET #a0 = :v0, #a1 = :v1 REMOVE #a2",
                "ConditionExpression": draw(st.sampled_from(["attribute_exists(pk)", "#a1 = :v1", "#a1 <> :v1"])),
                "ExpressionAttributeNames": {"#a0": "state", "#a1": "b", "#a2": "c"},
                "ExpressionAttributeValues": {":v0": {"S": draw(st.sampled_from(["queued", "running"]))},
                                              ":v1": draw(_numbers(0, 3))}}
    if kind == "running":
        return {"Key": key, "UpdateExpression": "SET #entity = :entity, #tenant = :tenant ADD #running :running",
                "ConditionExpression": "attribute_not_exists(#running) OR #running < :cap",
                "ExpressionAttributeNames": {"#entity": "entity", "#tenant": "tenant_id", "#running": "running"},
                "ExpressionAttributeValues": {":entity": {"S": "R"}, ":tenant": {"S": "acme"},
                                              ":running": draw(_numbers(-1, 1)), ":cap": draw(_numbers(1, 3))}}
    overlap = draw(st.booleans())
    fenced = "SET reclaimed_as = if_not_exists(outcome, :none), outcome = :fenced, "
    fenced += "expires_at = if_not_exists(expires_at, :ttl)" + (" ADD #ow :ow" if overlap else "")
    return {"Key": key, "UpdateExpression": fenced,
            "ConditionExpression": "attribute_not_exists(outcome) OR outcome = :lease_expired",
            **({"ExpressionAttributeNames": {"#ow": "overlapped_with"}} if overlap else {}),
            "ExpressionAttributeValues": {":none": {"NULL": True}, ":fenced": {"S": "fenced"},
                                          ":lease_expired": {"S": "lease_expired"}, ":ttl": draw(_numbers(5, 9)),
                                          **({":ow": {"NS": ["1", "2"]}} if overlap else {})}}


def any_update() -> Any:
    return st.one_of(platform_requests(), update_requests())


@st.composite
def operations(draw: Any) -> tuple[str, Any]:
    if draw(st.booleans()):
        request = draw(any_update())
        request["ReturnValues"] = draw(st.sampled_from(["NONE", "ALL_NEW", "ALL_OLD", "UPDATED_NEW", "UPDATED_OLD"]))
        if "ConditionExpression" in request and draw(st.booleans()):
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return "update_item", request
    updates_of_keys = draw(st.lists(any_update(), min_size=1, max_size=3,
                                    unique_by=lambda request: json.dumps(request["Key"], sort_keys=True)))
    return "transact_write_items", updates_of_keys


class Table:
    """A table with a range key, an index on (gsi_pk S, n N) and a stream of new and old images."""

    def __init__(self, endpoint: EmbeddedEndpoint) -> None:
        self.name = f"updates-{next(_tables)}"
        # one attempt: a retried write (ADD...) would apply twice and look like a difference
        self.db = client_for(endpoint.url, "dynamodb", Config(retries={"total_max_attempts": 1}))
        self.streams = endpoint.client("dynamodbstreams")
        self.db.create_table(
            TableName=self.name, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": name, "AttributeType": kind}
                                  for name, kind in (("pk", "S"), ("sk", "S"), ("gsi_pk", "S"), ("n", "N"))],
            GlobalSecondaryIndexes=[{"IndexName": "by_g", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
                {"AttributeName": "gsi_pk", "KeyType": "HASH"}, {"AttributeName": "n", "KeyType": "RANGE"}]}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
        self.seed()

    def seed(self) -> None:
        self.db.put_item(TableName=self.name, Item={
            **KEYS[0], "a": {"S": "x"}, "b": {"N": "5"}, "count_x": {"N": "2"}, "c": {"L": [{"N": "1"}]},
            "gsi_pk": {"S": "g"}, "n": {"N": "3"}})
        self.db.put_item(TableName=self.name, Item={**KEYS[1], "a": {"N": "7"}, "b": {"S": "s"}})

    def run(self, operation: tuple[str, Any]) -> Any:
        """The answer without its metadata, or ["error", code, message]; this table's name as TABLE."""
        call, request = operation
        try:
            if call == "update_item":
                answer = self.db.update_item(TableName=self.name, **request)
            else:
                answer = self.db.transact_write_items(
                    TransactItems=[{"Update": {"TableName": self.name, **update}} for update in request])
        except ClientError as error:
            answer = {"error": [error.response["Error"]["Code"], error.response["Error"]["Message"],
                                error.response.get("CancellationReasons"), error.response.get("Item")]}
        answer.pop("ResponseMetadata", None)
        return json.dumps(answer, default=repr).replace(self.name, "TABLE")  # a string: attribute order counts

    def items(self) -> list[str]:
        """Every item, in key order, each as JSON (attribute order counts)."""
        found = self.db.scan(TableName=self.name, ConsistentRead=True)["Items"]
        return sorted(json.dumps(item) for item in found)

    def index(self) -> str:
        return json.dumps(self.db.query(
            TableName=self.name, IndexName="by_g", KeyConditionExpression="gsi_pk = :g",
            ExpressionAttributeValues={":g": {"S": "g"}})["Items"])

    def stream(self) -> str:
        """Every stream record (event, keys, images), shard by shard in the stream's order of shards."""
        arn = self.db.describe_table(TableName=self.name)["Table"]["LatestStreamArn"]
        shards = []
        for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = self.streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            records: list[Any] = []
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records.extend([record["eventName"], record["dynamodb"].get("Keys"),
                                record["dynamodb"].get("OldImage"), record["dynamodb"].get("NewImage")]
                               for record in page["Records"])
                if not page["Records"]:
                    break
                iterator = page.get("NextShardIterator")
            shards.append(records)
        return json.dumps(shards)

    def drop(self) -> None:
        self.db.delete_table(TableName=self.name)


@contextmanager
def moto_s_own_update_item() -> Iterator[None]:
    """moto's own update_item behind queries' wrapper for the duration (every other fix in place)."""
    assert queries._original_update_item is updates.update_item, "the fast path is not installed"
    queries._original_update_item = updates.moto_update_item
    try:
        yield
    finally:
        queries._original_update_item = updates.update_item


class AppliedCount:
    """How many updates the fast path applied itself (not handed to moto)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        apply = updates._apply

        def counted(item: Any, plan: Any) -> None:
            self.count += 1
            apply(item, plan)

        monkeypatch.setattr(updates, "_apply", counted)


@pytest.fixture
def applied(endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> AppliedCount:
    moto_fixes.install()
    return AppliedCount(monkeypatch)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(operations(), min_size=1, max_size=6))
def test_updates_match_moto_s_own_request_by_request(endpoint: EmbeddedEndpoint, applied: AppliedCount,
                                                     sequence: list[tuple[str, Any]]) -> None:
    """The same sequence on two tables, by the fast path and by moto's own update_item: the same answers and
    errors (code, message, cancellation reasons, old image), the same items, index and stream records. (It
    found a fast path calling moto's update_item a second time when moto's first call raised: an UpdateItem
    that moto applies in part before refusing it, ADD a, then ADD of a string, added a twice.) A
    fast path that applied an update moto would refuse (or refused one moto applies), resolved an operand
    after an earlier action, aliased values differently, put new attributes in another order, skipped the
    condition, the stream record or the new item's own INSERT, would differ here."""
    fast, own = Table(endpoint), Table(endpoint)
    try:
        for operation in sequence:
            fast_answer = fast.run(operation)
            with moto_s_own_update_item():
                own_answer = own.run(operation)
            assert fast_answer == own_answer, operation
        assert fast.items() == own.items()
        assert fast.index() == own.index()
        assert fast.stream() == own.stream()
    finally:
        fast.drop()
        own.drop()


def test_the_fast_path_applies_the_platform_s_updates_itself(endpoint: EmbeddedEndpoint,
                                                             applied: AppliedCount) -> None:
    """A claim's queue entry update (SET, if_not_exists, ADD, REMOVE by placeholders) and a job row's update
    are applied by the fast path, and their results are moto's: without the fast path installed (or with a
    shape it does not recognize) the count of updates it applied stays 0 and the comparison above proves
    nothing."""
    fast, own = Table(endpoint), Table(endpoint)
    entry = ("transact_write_items", [{
        "Key": KEYS[2],
        "UpdateExpression": "SET #e = :e, #t = :t, #apk = :apk, #avt = if_not_exists(#avt, :vt) "
                            "ADD #band0 :band0, #waiting :delta REMOVE #ppk, #until",
        "ExpressionAttributeNames": {"#e": "entity", "#t": "tenant_id", "#apk": "active_pk", "#avt": "active_vt",
                                     "#band0": "band_0", "#waiting": "waiting", "#ppk": "parked_pk",
                                     "#until": "parked_until"},
        "ExpressionAttributeValues": {":e": {"S": "Q"}, ":t": {"S": "acme"}, ":apk": {"S": "A#1"},
                                      ":vt": {"N": "12"}, ":band0": {"N": "1"}, ":delta": {"N": "1"}}}])
    job_row = ("update_item", {
        "Key": KEYS[0], "UpdateExpression": "SET #a0 = :v0, #a1 = #a1 + :v1 REMOVE #a2",
        "ConditionExpression": "attribute_exists(pk)", "ReturnValues": "ALL_NEW",
        "ExpressionAttributeNames": {"#a0": "state", "#a1": "b", "#a2": "c"},
        "ExpressionAttributeValues": {":v0": {"S": "running"}, ":v1": {"N": "1"}}})
    try:
        for operation in (entry, entry, job_row, job_row):
            fast_answer = fast.run(operation)
            with moto_s_own_update_item():
                own_answer = own.run(operation)
            assert fast_answer == own_answer
        assert applied.count == 4
        assert fast.items() == own.items() and fast.stream() == own.stream()
        entry_item = fast.db.get_item(TableName=fast.name, Key=KEYS[2], ConsistentRead=True)["Item"]
        assert entry_item["waiting"] == {"N": "2"} and entry_item["active_vt"] == {"N": "12"}
    finally:
        fast.drop()
        own.drop()


# (a request, what it probes); each on the seeded items, compared as above
EDGE_CASES: list[tuple[tuple[str, Any], str]] = [
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET gsi_pk = :e", "ExpressionAttributeValues": {
        ":e": {"S": ""}}}), "an empty string for an index key (moto refuses it)"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET d = :e", "ExpressionAttributeValues": {
        ":e": {"S": ""}}}), "an empty string elsewhere"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET gsi_pk = d"}),
     "that empty string copied into an index key (moto refuses it)"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET n = :s", "ExpressionAttributeValues": {
        ":s": {"S": "x"}}}), "a string for the index's number key, by its plain name (moto refuses it)"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET #n = :s", "ExpressionAttributeNames": {"#n": "n"},
                      "ExpressionAttributeValues": {":s": {"S": "x"}}}), "the same by a placeholder (moto takes it)"),
    (("transact_write_items", [{"Key": KEYS[0], "UpdateExpression": "SET #k = :s",
                                "ExpressionAttributeNames": {"#k": "sk"}, "ExpressionAttributeValues": {
                                    ":s": {"S": "x"}}}]), "a key attribute"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET a = if_not_exists(pk, :s)",
                      "ExpressionAttributeValues": {":s": {"S": "x"}}}), "a key attribute read"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET size = :s", "ExpressionAttributeValues": {
        ":s": {"S": "x"}}}), "a reserved word"),
    (("update_item", {"Key": KEYS[2], "UpdateExpression": "SET a = :big, b = :big, c = :big",
                      "ExpressionAttributeValues": {":big": {"S": BIG}}}), "a new item past the size limit"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET d = :big, e = :big, f = :big",
                      "ExpressionAttributeValues": {":big": {"S": BIG}}}), "an item growing past the size limit"),
    (("update_item", {"Key": KEYS[3], "UpdateExpression": "ADD #a :one, #n :e", "ExpressionAttributeNames": {
        "#a": "a", "#n": "n"}, "ExpressionAttributeValues": {":one": {"N": "1"}, ":e": {"S": ""}}}),
     "an update moto applies in part (ADD a) before refusing it (ADD of a string): moto called once"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "ADD a :one", "ExpressionAttributeValues": {
        ":one": {"N": "1"}}}), "ADD to a string"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET z = :one, y = :one ADD x :one, w :one REMOVE a",
                      "ExpressionAttributeValues": {":one": {"N": "1"}}, "ReturnValues": "ALL_NEW"}),
     "new attributes in the expression's order"),
    (("update_item", {"Key": KEYS[1], "UpdateExpression": "SET s2 = s1", "ReturnValues": "ALL_NEW"}),
     "a set copied from another attribute (moto's SET shares the value)"),
    (("update_item", {"Key": KEYS[1], "UpdateExpression": "ADD s1 :more", "ReturnValues": "ALL_NEW",
                      "ExpressionAttributeValues": {":more": {"NS": ["9"]}}}),
     "then a number added to the original set in place (by moto: the copy shares it)"),
    (("update_item", {"Key": KEYS[0], "UpdateExpression": "SET b = b + :x, a = :x",
                      "ExpressionAttributeValues": {":x": {"N": "1.5"}}, "ReturnValues": "UPDATED_OLD"}),
     "arithmetic on decimals"),
]


def test_edge_cases_match_moto_s_own(endpoint: EmbeddedEndpoint, applied: AppliedCount) -> None:
    """Each edge case, in order, by the fast path and by moto's own update_item: the same answers, items and
    stream records. A fast path that skipped any of moto's refusals (an empty index key, a type moto's check
    compares by raw name, a key attribute, a reserved word, the size limit, ADD to a string), put new
    attributes in another order, or copied a value moto's SET shares (a later in-place ADD to the set shows
    through both) would differ here."""
    fast, own = Table(endpoint), Table(endpoint)
    for table in (fast, own):
        table.db.update_item(TableName=table.name, Key=KEYS[1], UpdateExpression="SET s1 = :s",
                             ExpressionAttributeValues={":s": {"NS": ["1"]}})
    seeded = applied.count
    try:
        for operation, probe in EDGE_CASES:
            fast_answer = fast.run(operation)
            with moto_s_own_update_item():
                own_answer = own.run(operation)
            assert fast_answer == own_answer, probe
        assert fast.items() == own.items() and fast.stream() == own.stream()
        assert applied.count - seeded >= 4  # by a placeholder, the order, the copy, the decimals
    finally:
        fast.drop()
        own.drop()

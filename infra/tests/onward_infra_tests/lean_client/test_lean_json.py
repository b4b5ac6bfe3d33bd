"""onward_infra.lean_client.codec: the lean codec gives what botocore's JSONSerializer and JSON parser give, byte for
byte
and key for key, for the platform's operations (hypothesis, generated from the service models) and for the
traits botocore treats on its own (a lab model: renamed members, floats, timestamps, unions, host prefixes).

Each comparison runs the same input through the lean codec and through botocore's own serializer or parser:
the request dict (its body's bytes included) or the parsed answer must be equal with every dict's keys in
the same order, and where botocore raises, the lean codec must raise the same. Counting fallbacks shows the
lean path was taken where it should be (the comparisons would pass vacuously if it never were).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse, HeadersDict
from botocore.config import Config
from botocore.exceptions import ParamValidationError
from botocore.model import OperationModel, ServiceModel, Shape
from botocore.parsers import ResponseParserFactory, create_parser
from botocore.serialize import JSONSerializer, create_serializer
from botocore.validate import ParamValidationDecorator, ParamValidator
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from onward.settings import Settings
from onward_infra.lean_client import WRAPPER
from onward_infra.lean_client.codec import LeanJSONParser, LeanJSONSerializer, LeanParserFactory, use_lean_json

PLATFORM_OPERATIONS = {
    "dynamodb": ("TransactWriteItems", "Query", "GetItem", "BatchGetItem", "PutItem", "UpdateItem"),
    "dynamodbstreams": ("GetRecords", "DescribeStream"),
    "kinesis": ("PutRecords", "GetRecords", "ListShards"),
}
PLATFORM = [(service, operation) for service, operations in PLATFORM_OPERATIONS.items() for operation in operations]
# Texts that look like the keys the lean codec searches for, or like JSON's own syntax
TRICKY_TEXTS = ('B', 'BS', '"B": ', 'x"B', '\\"B\\": ', 'B"', '\\', '"', 'null', ': ', 'é€😀', 'M', 'S', 'Items')
HEADERS = {"x-amzn-RequestId": "REQ-1", "Content-Type": "application/x-amz-json-1.0", "X-Amz-Crc32": "1",
           "Server": "Werkzeug, amazon.com"}


@cache
def service_model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def operation(service: str, name: str) -> OperationModel:
    return service_model(service).operation_model(name)


def ordered(value: Any) -> Any:
    """`value` with every dict as the list of its items: equal only when the keys come in the same order."""
    if isinstance(value, dict):
        return ("dict", [(key, ordered(member)) for key, member in value.items()])
    if isinstance(value, list | tuple):
        return [ordered(member) for member in value]
    return value


def outcome(call: Callable[[], Any]) -> Any:
    """What a call returned (keys in order), or the type and text of what it raised."""
    try:
        return ordered(call())
    except Exception as error:  # noqa: BLE001 - the lean codec must raise what botocore raises
        return ("raised", type(error), str(error))


class Counting:
    """botocore's serializer or parser factory, counting the requests or answers handed to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def serialize_to_request(self, parameters: Any, operation_model: OperationModel) -> Any:
        self.calls += 1
        return self.inner.serialize_to_request(parameters, operation_model)

    def create_parser(self, protocol: str) -> Any:
        self.calls += 1
        return self.inner.create_parser(protocol)


def serializers(*, validated: bool) -> tuple[Any, Any, Counting]:
    """(botocore's serializer, the lean one, the lean one's fallback), with or without botocore's validator."""
    fallback = Counting(JSONSerializer())
    lean: Any = LeanJSONSerializer(fallback, validated=validated)
    if validated:
        lean = ParamValidationDecorator(ParamValidator(), lean)
    return create_serializer("json", include_validation=validated), lean, fallback


def same_request(parameters: dict[str, Any], operation_model: OperationModel, *, validated: bool) -> Counting:
    botocore_serializer, lean, fallback = serializers(validated=validated)
    expected = outcome(lambda: botocore_serializer.serialize_to_request(copy.deepcopy(parameters), operation_model))
    got = outcome(lambda: lean.serialize_to_request(copy.deepcopy(parameters), operation_model))
    assert got == expected
    return fallback


def response(body: bytes, status: int = 200, **context: Any) -> dict[str, Any]:
    """The response dict botocore's Endpoint hands its parser (convert_to_response_dict)."""
    http = AWSResponse("http://127.0.0.1", status, HeadersDict({**HEADERS, "Content-Length": str(len(body))}), None)
    return {"headers": http.headers, "status_code": status, "body": body, "context": {"operation_name": "X", **context}}


def same_answer(body: bytes, shape: Shape | None, status: int = 200, **context: Any) -> Counting:
    factory = Counting(ResponseParserFactory())
    lean = LeanJSONParser(factory)
    expected = outcome(lambda: create_parser("json").parse(response(body, status, **context), shape))
    got = outcome(lambda: lean.parse(response(body, status, **context), shape))
    assert got == expected
    return factory


# --- values of a model's shapes, as a caller passes them (requests) or a service writes them (answers) -----

def texts(min_size: int = 0) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([text for text in TRICKY_TEXTS if len(text) >= min_size]),
                     st.text(min_size=min_size, max_size=10))


NUMBERS = st.one_of(st.integers(-10**20, 10**20).map(str), st.decimals(allow_nan=False, allow_infinity=False,
                                                                        places=3).map(str))


def attribute_values(depth: int, *, answers: bool) -> st.SearchStrategy[dict[str, Any]]:
    """One AttributeValue, as DynamoDB's callers write them (mostly one tag; binaries as bytes, or as text
    botocore encodes) or DynamoDB answers (binaries in base64)."""
    binary = (st.binary(max_size=6).map(lambda data: base64.b64encode(data).decode()) if answers
              else st.one_of(st.binary(max_size=6), texts()))
    plain = st.one_of(
        texts().map(lambda text: {"S": text}), NUMBERS.map(lambda number: {"N": number}),
        st.booleans().map(lambda flag: {"BOOL": flag}), st.just({"NULL": True}),
        st.lists(texts(), max_size=3).map(lambda strings: {"SS": strings}),
        st.lists(NUMBERS, max_size=3).map(lambda numbers: {"NS": numbers}),
    )
    rare = st.one_of(binary.map(lambda data: {"B": data}), st.lists(binary, max_size=2).map(lambda data: {"BS": data}))
    if depth <= 0:
        return st.one_of(plain, plain, plain, rare)
    inner = attribute_values(depth - 1, answers=answers)
    nested = st.one_of(st.dictionaries(texts(), inner, max_size=3).map(lambda members: {"M": members}),
                       st.lists(inner, max_size=3).map(lambda members: {"L": members}))
    return st.one_of(plain, plain, nested, nested, rare)


def item_names() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(["pk", "sk", "state", "version", "params", "B", "BS", 'x"B', "Items", "M"]),
                     texts(min_size=1))


def items(*, answers: bool) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(item_names(), attribute_values(2, answers=answers), max_size=6)


def values_of(shape: Shape, *, answers: bool, depth: int = 4) -> st.SearchStrategy[Any]:
    """A value of `shape`: its structures with their required members (requests) and a few others, in a random
    order; maps of AttributeValues as items."""
    kind = shape.type_name
    if shape.name == "AttributeValue":
        return attribute_values(2, answers=answers)
    if kind == "map" and shape.value.name == "AttributeValue":
        return items(answers=answers)
    if kind == "structure":
        return structures(shape, answers=answers, depth=depth)
    if kind == "list":
        return st.lists(values_of(shape.member, answers=answers, depth=depth - 1), max_size=3 if depth > 0 else 0)
    if kind == "map":
        return st.dictionaries(texts(min_size=1), values_of(shape.value, answers=answers, depth=depth - 1),
                               max_size=2 if depth > 0 else 0)
    if kind == "string":
        return st.sampled_from(shape.enum) if shape.enum else texts(min_size=3)
    if kind in ("integer", "long"):
        return st.integers(1, 10**12)
    if kind == "boolean":
        return st.booleans()
    if kind in ("float", "double"):
        return st.floats(0, 10**6)
    if kind == "blob":
        binary = st.binary(max_size=6)
        return binary.map(lambda data: base64.b64encode(data).decode()) if answers else st.one_of(binary, texts())
    if kind == "timestamp":
        if answers:
            return st.one_of(st.floats(10**9, 2 * 10**9), st.just("2024-05-06T07:08:09.123Z"))
        return st.one_of(st.datetimes(timezones=st.just(datetime.UTC)), st.integers(0, 2 * 10**9))
    return st.nothing()


def structures(shape: Shape, *, answers: bool, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    members: dict[str, Shape] = shape.members
    required = [] if answers else list(shape.required_members)
    optional = [name for name in members if name not in required]
    if depth <= 0:
        optional = [name for name in optional if members[name].type_name not in ("structure", "list", "map")]
    chosen = st.lists(st.sampled_from(optional), unique=True, max_size=4) if optional else st.just([])

    def build(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
        values = [values_of(members[name], answers=answers, depth=depth - 1) for name in names]
        return st.tuples(*values).map(lambda found: dict(zip(names, found, strict=True)))

    return chosen.flatmap(lambda names: st.permutations(required + names)).flatmap(build)


@st.composite
def answer_bodies(draw: st.DrawFn, shape: Shape) -> bytes:
    """An answer's body; now and then with what botocore drops: a null member, an unknown key."""
    answer = draw(structures(shape, answers=True, depth=4))
    odd = draw(st.sampled_from(["none", "none", "none", "null", "unknown", "null item"]))
    if odd == "null":
        answer[draw(st.sampled_from(list(shape.members)))] = None
    elif odd == "unknown":
        answer[draw(st.sampled_from(["Unknown", "__type", "ResponseMetadata"]))] = "x"
    elif odd == "null item" and answer.get("Items"):
        answer["Items"][0][draw(item_names())] = {"S": None}
    return json.dumps(answer).encode()


@st.composite
def requests(draw: st.DrawFn) -> tuple[OperationModel, dict[str, Any]]:
    service, name = draw(st.sampled_from(PLATFORM))
    model = operation(service, name)
    return model, draw(structures(model.input_shape, answers=False, depth=4))


@st.composite
def answers(draw: st.DrawFn) -> tuple[OperationModel, bytes]:
    service, name = draw(st.sampled_from(PLATFORM))
    model = operation(service, name)
    return model, draw(answer_bodies(model.output_shape))


# --- requests -------------------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(request=requests(), validated=st.booleans())
def test_requests_of_the_platforms_operations_are_serialized_as_botocore_does(
        request: tuple[OperationModel, dict[str, Any]], validated: bool) -> None:
    """Breaks if a body's bytes, a header or the request dict's keys differ from botocore's (a blob given as
    text sent as it is rather than in base64, a timestamp not converted, Decimal or NaN written by json), or
    if the lean codec answers where botocore raises."""
    operation_model, parameters = request
    fallback = same_request(parameters, operation_model, validated=validated)
    event(f"{operation_model.name}: {'botocore' if fallback.calls else 'lean'}")


@pytest.mark.parametrize("validated", [True, False])
def test_the_platforms_usual_requests_take_the_lean_path(validated: bool) -> None:
    """A claim's transaction, a Query, a GetItem: json.dumps writes them (no fallback). Breaks if the
    lean path is refused where it is exact (the codec would cost without saving)."""
    row = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}, "params": {"M": {"n": {"N": "1"}, "l": {"L": [{"S": "é"}]}}},
           "cancel_requested": {"BOOL": False}, "lease_owner": {"NULL": True}, "tags": {"SS": ["a"]}}
    transaction = {"TransactItems": [
        {"Put": {"TableName": "jobs", "Item": row, "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Update": {"TableName": "jobs", "Key": {"pk": {"S": "Q#t"}, "sk": {"S": "0"}},
                    "UpdateExpression": "ADD n :one", "ExpressionAttributeNames": {"#s": "state"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}},
        {"ConditionCheck": {"TableName": "jobs", "Key": {"pk": {"S": "T#t"}, "sk": {"S": "T"}},
                            "ConditionExpression": "attribute_exists(pk)"}},
        {"Delete": {"TableName": "jobs", "Key": {"pk": {"S": "X"}, "sk": {"S": "Y"}}}}]}
    query = {"TableName": "jobs", "IndexName": "ready", "KeyConditionExpression": "ready_pk = :p",
             "ExpressionAttributeValues": {":p": {"S": "t#0"}}, "Limit": 8, "ScanIndexForward": True}
    for name, parameters in (("TransactWriteItems", transaction), ("Query", query),
                             ("GetItem", {"TableName": "jobs", "Key": row, "ConsistentRead": True})):
        fallback = same_request(parameters, operation("dynamodb", name), validated=validated)
        assert fallback.calls == 0, name
    streams = same_request({"StreamArn": "arn:stream", "Limit": 100}, operation("dynamodbstreams", "DescribeStream"),
                           validated=validated)
    assert streams.calls == 0


@pytest.mark.parametrize("validated", [True, False])
@pytest.mark.parametrize("item", [
    {"data": {"B": "text botocore encodes in base64"}},
    {"data": {"BS": ["text", "more"]}},
    {"data": {"M": {"deep": {"L": [{"B": "x"}]}}}},
])
def test_a_binary_given_as_text_goes_through_botocore(item: dict[str, Any], validated: bool) -> None:
    """json would write the text as it is; botocore writes its base64. Breaks without the search for the
    converted members' keys in the dumped text."""
    fallback = same_request({"TableName": "jobs", "Item": item}, operation("dynamodb", "PutItem"), validated=validated)
    assert fallback.calls == 1


def test_a_converted_key_is_found_wherever_json_writes_it_and_only_as_a_key() -> None:
    """The reasoning behind the text search: json.dumps writes a key B as `"B": ` always, a string value
    never (its quotes are escaped), so a match is a key, exactly B or ending in `"B`. Breaks if json's
    escaping or separators changed (the search would then miss keys or match values)."""
    for value, found in (({"B": "x"}, True), ({"a": {"B": 1}}, True), ({"x\"B": 1}, True),
                         ({"a": '"B": '}, False), ({"a": ['"B": ', 'B']}, False), ({"a": 'x\\"B": '}, False),
                         ({"AB": 1}, False), ({"a": "B"}, False)):
        assert ('"B": ' in json.dumps(value)) is found, value


@given(value=st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), texts()),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(st.one_of(texts(), st.just("B")), inner, max_size=3)),
                          max_leaves=12))
def test_a_key_named_b_anywhere_is_found_in_the_dumped_text(value: Any) -> None:
    """No false negative: wherever a dict has a key B, the dumped text holds `"B": `. Breaks if a key could
    be written otherwise (a binary given as text would then be sent unencoded)."""

    def has_key(node: Any) -> bool:
        if isinstance(node, dict):
            return "B" in node or any(has_key(member) for member in node.values())
        return isinstance(node, list) and any(has_key(member) for member in node)

    if has_key(value):
        assert '"B": ' in json.dumps(value)


@pytest.mark.parametrize(("parameters", "why"), [
    ({"TableName": "jobs", "Key": {"pk": {"S": "a"}}, "Unknown": 1}, "an unknown member: botocore raises KeyError"),
    ({"TableName": "jobs", "Key": {"pk": {"X": "a"}}}, "an unknown tag: botocore raises KeyError"),
    ({"TableName": "jobs", "Key": {"pk": None}}, "a structure that is None: botocore raises AttributeError"),
    ({"TableName": "jobs", "Key": [("pk", {"S": "a"})]}, "a map that is a list: botocore raises AttributeError"),
    ({"TableName": "jobs", "Key": {"pk": {"S": "a"}}, "AttributesToGet": "ab"},
     "a list given a string: botocore sends its characters"),
    ({"TableName": "jobs", "Key": {"pk": {"SS": {"a": 1}}}}, "a list given a dict: botocore sends its keys"),
    ({"TableName": "jobs", "Key": {"pk": {"N": Decimal("1.5")}}}, "a Decimal json cannot write"),
    ({"TableName": "jobs", "Key": {"pk": {"N": float("nan")}}}, "NaN, which json writes but DynamoDB's JSON lacks"),
    ({"TableName": "jobs", "Key": {"pk": {"S": b"bytes"}}}, "bytes json cannot write"),
])
def test_unvalidated_parameters_botocore_would_refuse_or_reshape_go_through_it(parameters: dict[str, Any],
                                                                               why: str) -> None:
    """Without botocore's validator, the lean path walks the parameters for what botocore's serializer
    raises on or reshapes; each case breaks if that walk (or json's bail-outs) were skipped."""
    fallback = same_request(parameters, operation("dynamodb", "GetItem"), validated=False)
    assert fallback.calls == 1, why


# --- a lab model: the traits the platform's services do not use --------------------------------------------

def lab_model(**metadata: Any) -> ServiceModel:
    shapes = {
        "String": {"type": "string"}, "Integer": {"type": "integer"}, "Double": {"type": "double"},
        "Blob": {"type": "blob"}, "Timestamp": {"type": "timestamp"}, "Document": {"type": "structure",
                                                                                   "members": {}, "document": True},
        "Tags": {"type": "map", "key": {"shape": "String"}, "value": {"shape": "String"}},
        "Stamps": {"type": "list", "member": {"shape": "Timestamp"}},
        "Choice": {"type": "structure", "union": True,
                   "members": {"A": {"shape": "String"}, "C": {"shape": "Integer"}}},
        "Node": {"type": "structure", "members": {"Name": {"shape": "String"}, "Children": {"shape": "Nodes"},
                                                  "Ratio": {"shape": "Double"}}},
        "Nodes": {"type": "list", "member": {"shape": "Node"}},
        "Zone": {"type": "string"},
        "Lab": {"type": "structure", "members": {
            "Name": {"shape": "String"}, "Ratio": {"shape": "Double"}, "At": {"shape": "Timestamp"},
            "Data": {"shape": "Blob"}, "Renamed": {"shape": "String", "locationName": "renamed_on_wire"},
            "Tags": {"shape": "Tags"}, "Stamps": {"shape": "Stamps"}, "Choice": {"shape": "Choice"},
            "Tree": {"shape": "Node"}, "Free": {"shape": "Document"}, "Count": {"shape": "Integer"}}},
        "Zoned": {"type": "structure", "required": ["Zone"],
                  "members": {"Zone": {"shape": "Zone", "hostLabel": True}, "Name": {"shape": "String"}}},
        "Events": {"type": "structure", "members": {"Stream": {"shape": "EventStream"}}},
        "EventStream": {"type": "structure", "eventstream": True, "members": {"Hit": {"shape": "Hit"}}},
        "Hit": {"type": "structure", "event": True, "members": {"Name": {"shape": "String"}}},
    }
    operations = {
        "Put": {"name": "Put", "http": {"method": "POST", "requestUri": "/"},
                "input": {"shape": "Lab"}, "output": {"shape": "Lab"}},
        "Zoned": {"name": "Zoned", "http": {"method": "POST", "requestUri": "/"}, "endpoint": {"hostPrefix": "{Zone}."},
                  "input": {"shape": "Zoned"}, "output": {"shape": "Zoned"}},
        "Watch": {"name": "Watch", "http": {"method": "POST", "requestUri": "/"},
                  "input": {"shape": "Zoned"}, "output": {"shape": "Events"}},
        "Nothing": {"name": "Nothing", "http": {"method": "POST", "requestUri": "/"}},
    }
    return ServiceModel({"metadata": {"apiVersion": "2024-01-01", "endpointPrefix": "lab", "jsonVersion": "1.1",
                                      "protocol": "json", "protocols": ["json"], "serviceId": "Lab",
                                      "signatureVersion": "v4", "targetPrefix": "Lab_20240101", **metadata},
                         "operations": operations, "shapes": shapes})


LAB = lab_model()


@pytest.mark.parametrize("validated", [True, False])
@pytest.mark.parametrize(("parameters", "lean"), [
    ({"Name": "n", "Count": 3, "Tags": {"a": "b"}, "Tree": {"Name": "r", "Children": [{"Name": "c", "Ratio": 0.5}]},
      "Free": {"any": [1, {"B": None}]}, "Choice": {"A": "x"}}, True),
    ({"Ratio": 2}, True),
    ({"Ratio": Decimal("0.25")}, False),  # botocore makes it a float
    ({"Ratio": float("inf")}, False),  # botocore writes "Infinity"
    ({"Ratio": "0.5"}, False),  # botocore raises (math.isnan) where json would write the text
    ({"Tree": {"Children": [{"Ratio": "x"}]}}, False),
    ({"At": 1700000000}, False),  # a timestamp botocore converts
    ({"At": "2024-01-02T03:04:05Z"}, False),
    ({"Stamps": ["2024-01-02T03:04:05Z"]}, False),
    ({"Data": "text"}, False),  # a blob botocore encodes
    ({"Renamed": "x"}, False),  # botocore writes it as renamed_on_wire
    ({"Name": "has \"Renamed\": inside"}, True),  # a value, not a key
])
def test_lab_requests_match_botocore(parameters: dict[str, Any], lean: bool, validated: bool) -> None:
    """Floats, timestamps, blobs and renamed members as botocore writes them. Breaks if a converted member,
    a float json writes differently, or one botocore refuses, took the lean path."""
    operation_model = LAB.operation_model("Put")
    fallback = same_request(parameters, operation_model, validated=validated)
    if validated and ParamValidator().validate(parameters, operation_model.input_shape).has_errors():
        assert fallback.calls == 0  # the validator refused them before either serializer
    else:
        assert fallback.calls == (0 if lean else 1)


@pytest.mark.parametrize("validated", [True, False])
def test_host_prefixes_query_compatibility_and_no_input_go_through_botocore(validated: bool) -> None:
    """botocore adds a host prefix, the query-compatible header, or writes `{}` whatever the parameters:
    breaks if any of them took the lean path."""
    assert same_request({"Zone": "eu-1", "Name": "x"}, LAB.operation_model("Zoned"), validated=validated).calls == 1
    compatible = lab_model(awsQueryCompatible={})
    assert same_request({"Name": "x"}, compatible.operation_model("Put"), validated=validated).calls == 1
    assert same_request({}, LAB.operation_model("Nothing"), validated=validated).calls == 1


# --- answers -------------------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(answer=answers())
def test_answers_of_the_platforms_operations_are_parsed_as_botocore_does(answer: tuple[OperationModel, bytes]) -> None:
    """Breaks if a result differs from botocore's in a value (a blob not decoded, a timestamp not parsed, a
    null or an unknown key kept), in ResponseMetadata, or in the order of a structure's keys."""
    operation_model, body = answer
    factory = same_answer(body, operation_model.output_shape)
    event(f"{operation_model.name}: {'botocore' if factory.calls else 'lean'}")


def job_rows(count: int) -> list[dict[str, Any]]:
    return [{"pk": {"S": f"JOB#{number}"}, "sk": {"S": "JOB"}, "entity": {"S": "job"}, "state": {"S": "READY"},
             "version": {"N": "3"}, "attempt": {"N": "0"}, "params": {"M": {"n": {"N": str(number)},
                                                                         "l": {"L": [{"S": "é"}, {"NULL": True}]}}},
             "cancel_requested": {"BOOL": False}, "tags": {"SS": ["a", "b"]}, "created_at": {"N": "1700000000000"}}
            for number in range(count)]


def test_the_platforms_usual_answers_take_the_lean_path_in_botocores_member_order() -> None:
    """A Query of 8 rows (its members written out of the model's order), a GetItem, an empty GetItem, a
    transaction, a BatchGetItem: parsed without botocore and equal to its parse, keys in the same order.
    Breaks if the lean path is refused where it is exact, or if a structure's keys are not put in order."""
    query = {"ScannedCount": 8, "Count": 8, "Items": job_rows(8),
             "ConsumedCapacity": {"CapacityUnits": 4.0, "TableName": "jobs"}}
    batch = {"UnprocessedKeys": {}, "Responses": {"jobs": job_rows(2)}}
    for name, answer in (("Query", query), ("GetItem", {"Item": job_rows(1)[0]}), ("GetItem", {}),
                         ("TransactWriteItems", {}), ("BatchGetItem", batch)):
        factory = same_answer(json.dumps(answer).encode(), operation("dynamodb", name).output_shape)
        assert factory.calls == 0, name
    assert list(LeanJSONParser(ResponseParserFactory()).parse(
        response(json.dumps(query).encode()), operation("dynamodb", "Query").output_shape)) == [
        "Items", "Count", "ScannedCount", "ConsumedCapacity", "ResponseMetadata"]


@pytest.mark.parametrize(("answer", "why"), [
    ({"Item": {"blob": {"B": "AAEC"}}}, "a binary botocore decodes"),
    ({"Item": {"blobs": {"BS": ["AAEC"]}}}, "binaries botocore decodes"),
    ({"Item": {"deep": {"M": {"x": {"L": [{"B": "AAEC"}]}}}}}, "a binary deep in an item"),
    ({"Item": {"pk": {"S": None}}}, "a null member botocore drops"),
    ({"Item": None}, "a null member botocore drops"),
    ({"Item": {"pk": {"S": "a"}}, "Extra": 1}, "an unknown member botocore drops"),
    ({"Item": {"pk": {"X": "a"}}}, "an unknown tag botocore drops"),
    ({"Item": {"pk": {"S": "a", "N": "1"}}, "Unknown": 1}, "an unknown member past a reordered one"),
    ({"Item": ["pk"]}, "a map that is a list: botocore raises"),
    ({"Item": {"pk": {"SS": "ab"}}}, "a list that is a string: botocore returns its characters"),
    ({"Item": {"pk": {"SS": {"a": 1}}}}, "a list that is a dict: botocore returns its keys"),
    ({"Item": {"pk": "text"}}, "a structure that is a string: botocore raises"),
    (["Item"], "an answer that is not an object: botocore raises"),
])
def test_answers_botocore_converts_drops_or_refuses_go_through_it(answer: Any, why: str) -> None:
    """Each breaks if the lean path took an answer whose parse is not json's."""
    factory = same_answer(json.dumps(answer).encode(), operation("dynamodb", "GetItem").output_shape)
    assert factory.calls == 1, why


def test_an_attribute_value_with_two_tags_is_put_in_member_order() -> None:
    """botocore builds each AttributeValue in the model's member order: breaks if a multi-tag value (not what
    DynamoDB writes, but what botocore parses) kept the answer's order."""
    factory = same_answer(json.dumps({"Item": {"pk": {"N": "1", "S": "a"}, "sk": {"S": "b"}}}).encode(),
                          operation("dynamodb", "GetItem").output_shape)
    assert factory.calls == 0


@pytest.mark.parametrize(("body", "status"), [
    (b'{"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException", "message": "no table"}', 400),
    (b'{"__type": "ThrottlingException"}', 503),
    (b"", 500),
    (b"", 200),
    (b"not json", 200),
    (b"\xff\xfe", 200),
    (b'{"Item": {"pk": {"S": "a"}}}', 300),
])
def test_errors_and_odd_bodies_go_through_botocore(body: bytes, status: int) -> None:
    """An error's parse (its code, message and metadata), an empty body, one that is not JSON or not UTF-8:
    botocore's, fallback counted. Breaks if the lean path parsed any of them."""
    factory = same_answer(body, operation("dynamodb", "GetItem").output_shape, status)
    assert factory.calls == 1


def test_a_checksum_algorithm_is_reported_as_botocore_reports_it() -> None:
    """botocore adds the algorithm a response's checksum was validated with to ResponseMetadata: breaks if the
    lean path left it out."""
    factory = same_answer(b'{"Item": {"pk": {"S": "a"}}}', operation("dynamodb", "GetItem").output_shape,
                          checksum={"response_algorithm": "crc32"})
    assert factory.calls == 0


@pytest.mark.parametrize(("operation_name", "answer", "lean"), [
    ("Put", {"Name": "n", "Count": 2, "Ratio": 0.5, "Tags": {"Renamed": "x"}, "Free": {"a": [1, "B"]},
             "Tree": {"Children": [{"Ratio": 1.5, "Name": "c"}], "Name": "r"}}, True),
    ("Put", {"At": 1700000000.5}, False),
    ("Put", {"Stamps": [1700000000]}, False),
    ("Put", {"Data": "AAEC"}, False),
    ("Put", {"renamed_on_wire": "x"}, False),  # botocore renames it Renamed
    ("Put", {"Renamed": "x"}, False),  # a key botocore does not read
    ("Put", {"Choice": {"A": "x"}}, False),  # a tagged union: botocore checks it, may replace it
    ("Put", {"Stamps": []}, True),  # nothing to convert in an empty list
    ("Watch", {}, False),  # an event stream
    ("Nothing", {}, False),  # no output shape
])
def test_lab_answers_match_botocore(operation_name: str, answer: dict[str, Any], lean: bool) -> None:
    """Renamed members, timestamps, blobs, unions, documents, event streams and a missing output shape as
    botocore parses them. Breaks if any that botocore converts took the lean path."""
    operation_model = LAB.operation_model(operation_name)
    if operation_model.output_shape is not None and operation_model.output_shape.event_stream_name:
        # botocore reads an event stream from the raw body (no bytes to compare): the lean path refuses it
        factory = Counting(ResponseParserFactory())
        assert LeanJSONParser(factory)._lean(response(b"{}"), operation_model.output_shape) is None
        return
    factory = same_answer(json.dumps(answer).encode(), operation_model.output_shape)
    assert factory.calls == (0 if lean else 1)


# --- on a client ------------------------------------------------------------------------------------------------

def client(service: str = "dynamodb", *, validation: bool = True) -> Any:
    return boto3.client(service, endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(parameter_validation=validation, retries={"max_attempts": 0}))


def answering(target: Any, body: bytes) -> list[bytes]:
    """Answer `target`'s requests with `body` (before anything is sent), and keep each request's body."""
    sent: list[bytes] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.append(request.body)
        http_response = AWSResponse(request.url, 200, HeadersDict(HEADERS), None)
        http_response._content = body
        return http_response

    target.meta.events.register_first("before-send.*", answer)
    return sent


@pytest.mark.parametrize("validation", [True, False])
def test_a_client_sends_and_reads_the_same_through_the_codec(validation: bool) -> None:
    """The whole client path: the same call through a client with and without the codec sends the same bytes
    and returns the same result. Breaks if use_lean_json wires either half wrongly."""
    body = json.dumps({"Count": 2, "Items": job_rows(2)}).encode()
    plain, lean = client(validation=validation), use_lean_json(client(validation=validation))
    sent_plain, sent_lean = answering(plain, body), answering(lean, body)
    call = {"TableName": "jobs", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "x"}}}
    assert ordered(lean.query(**call)) == ordered(plain.query(**call))
    assert sent_lean == sent_plain
    assert isinstance(lean._endpoint._response_parser_factory, LeanParserFactory)


def test_validation_still_runs_before_the_lean_serializer() -> None:
    """The lean serializer goes inside botocore's validator: breaks if it replaced the validator (a malformed
    request would be sent, not refused)."""
    lean = use_lean_json(client(validation=True))
    assert isinstance(lean._serializer, ParamValidationDecorator)
    with pytest.raises(ParamValidationError):
        lean._serializer.serialize_to_request({"TableName": 7, "Key": {}}, lean.meta.service_model.operation_model(
            "GetItem"))


def test_the_codec_is_applied_once_and_leaves_the_sessions_factory_alone() -> None:
    """A second use_lean_json changes nothing; another client of the same session keeps botocore's parser
    factory (it is shared by the session's clients). Breaks if the shared factory were patched."""
    lean = use_lean_json(client())
    serializer, factory = lean._serializer._serializer, lean._endpoint._response_parser_factory
    assert use_lean_json(lean) is lean
    assert lean._serializer._serializer is serializer and lean._endpoint._response_parser_factory is factory
    assert not isinstance(client()._endpoint._response_parser_factory, LeanParserFactory)
    assert factory.create_parser("rest-json").__class__.__name__ == "RestJSONParser"


def test_clients_of_other_protocols_are_refused() -> None:
    """The codec writes the JSON protocol only: breaks if a client of another (S3's XML) were accepted and
    its requests written as JSON."""
    with pytest.raises(ValueError, match="JSON protocol"):
        use_lean_json(client("s3"))


def test_settings_give_the_lean_clients_the_codec_with_lean_client_only() -> None:
    """ONWARD_CLIENT_WRAPPER (the lean client): DynamoDB, Streams and Kinesis clients get the codec; breaks if
    Settings.client
    forgot to apply it (or applied it without the setting, or to a service of another protocol)."""
    lean = Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", client_wrapper=WRAPPER)
    plain = Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    for service in ("dynamodb", "dynamodbstreams", "kinesis"):
        assert isinstance(lean.client(service)._endpoint._response_parser_factory, LeanParserFactory), service
        assert not isinstance(plain.client(service)._endpoint._response_parser_factory, LeanParserFactory)
    assert not isinstance(lean.client("sqs")._endpoint._response_parser_factory, LeanParserFactory)

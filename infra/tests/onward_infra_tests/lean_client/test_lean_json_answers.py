"""A boto3 client answers the same with onward_infra.lean_client.codec's codec as without it (ONWARD_CLIENT_WRAPPER).

Two embedded endpoints are sent the same calls in the same order, one through clients with the codec and
one through clients without it (both sending through onward_infra.lean_client.http, as Settings.client does, and without
botocore's parameter validation, as `onward up` and the benches run: the codec then walks the parameters
itself). The workload: test_lean_http_answers' (DynamoDB's item operations, errors of each kind, binary
values, DynamoDB Streams' and Kinesis' reads and writes), then the platform's own shapes: job rows written
by 4-action transactions, read back by a Query of 8 rows, a GetItem of a missing key, a BatchGetItem and an
UpdateItem returning the row. What botocore hands back must be the same, but for what the endpoint stamps
per request or with the clock; and the codec must have served the platform's shapes itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config

from onward_infra.endpoint import EndpointProcess, client_for
from onward_infra.lean_client.codec import LeanJSONParser, LeanJSONSerializer, use_lean_json
from onward_infra.lean_client.http import use_lean_http
from onward_infra_tests.lean_client.test_lean_http_answers import _masked, _workload, answer

pytestmark = pytest.mark.integration

JOBS = "lean-json-jobs"
SERVICES = ("dynamodb", "dynamodbstreams", "kinesis")


class Fallbacks:
    """botocore's serializer or parser factory behind the codec, counting what the codec handed to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def serialize_to_request(self, parameters: Any, operation_model: Any) -> Any:
        self.calls += 1
        return self.inner.serialize_to_request(parameters, operation_model)

    def create_parser(self, protocol: str) -> Any:
        self.calls += 1
        return self.inner.create_parser(protocol)


def _row(number: int) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{number:04d}"}, "sk": {"S": "JOB"}, "entity": {"S": "job"},
            "tenant_id": {"S": "tenant-a"}, "type": {"S": "noop"}, "state": {"S": "READY"},
            "version": {"N": "1"}, "attempt": {"N": "0"}, "max_attempts": {"N": "3"}, "priority": {"N": "0"},
            "params": {"M": {"n": {"N": str(number)}, "text": {"S": "é \"B\": x"}, "list": {"L": [{"N": "1.5"},
                                                                                                  {"NULL": True}]}}},
            "cancel_requested": {"BOOL": False}, "not_before": {"N": "1700000000000"},
            "created_at": {"N": "1700000000000"}, "updated_at": {"N": "1700000000000"},
            "ready_pk": {"S": "tenant-a#0"}, "ready_due": {"N": "1700000000000"}}


def _job_workload(dynamodb: Any) -> Iterator[Any]:
    """The platform's request shapes, each call's answer (or the error botocore raised) in order."""
    yield answer(lambda: dynamodb.create_table(
        TableName=JOBS, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": kind} for name, kind in
                              (("pk", "S"), ("sk", "S"), ("ready_pk", "S"), ("ready_due", "N"))],
        GlobalSecondaryIndexes=[{"IndexName": "ready", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "ready_pk", "KeyType": "HASH"},
                                               {"AttributeName": "ready_due", "KeyType": "RANGE"}]}]))
    for first in range(0, 8, 2):
        yield answer(lambda first=first: dynamodb.transact_write_items(TransactItems=[
            {"Put": {"TableName": JOBS, "Item": _row(first), "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": JOBS, "Item": _row(first + 1), "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": JOBS, "Key": {"pk": {"S": "QUEUE#tenant-a"}, "sk": {"S": "0"}},
                        "UpdateExpression": "ADD #n :one", "ExpressionAttributeNames": {"#n": "waiting"},
                        "ExpressionAttributeValues": {":one": {"N": "2"}}}},
            {"Put": {"TableName": JOBS, "Item": {"pk": {"S": f"OUTBOX#{first}"}, "sk": {"S": "E"},
                                                 "body": {"S": "{\"kind\": \"created\"}"}}}}]))
    yield answer(lambda: dynamodb.query(TableName=JOBS, IndexName="ready", Limit=8,
                                        KeyConditionExpression="ready_pk = :p AND ready_due <= :now",
                                        ExpressionAttributeValues={":p": {"S": "tenant-a#0"},
                                                                   ":now": {"N": "1800000000000"}}))
    yield answer(lambda: dynamodb.query(TableName=JOBS, KeyConditionExpression="pk = :p",
                                        ExpressionAttributeValues={":p": {"S": "JOB#0003"}},
                                        ReturnConsumedCapacity="TOTAL"))
    yield answer(lambda: dynamodb.get_item(TableName=JOBS, Key={"pk": {"S": "JOB#9999"}, "sk": {"S": "JOB"}},
                                           ConsistentRead=True))
    yield answer(lambda: dynamodb.batch_get_item(RequestItems={JOBS: {
        "Keys": [{"pk": {"S": f"JOB#{number:04d}"}, "sk": {"S": "JOB"}} for number in (1, 2, 42)]}}))
    yield answer(lambda: dynamodb.update_item(
        TableName=JOBS, Key={"pk": {"S": "JOB#0005"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET #s = :running, version = version + :one REMOVE ready_pk",
        ConditionExpression="#s = :ready", ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":running": {"S": "RUNNING"}, ":ready": {"S": "READY"}, ":one": {"N": "1"}},
        ReturnValues="ALL_NEW"))
    yield answer(lambda: dynamodb.put_item(TableName=JOBS, Item=_row(6), ConditionExpression="attribute_not_exists(pk)",
                                           ReturnValuesOnConditionCheckFailure="ALL_OLD"))


def _clients(url: str, *, lean: bool) -> dict[str, Any]:
    clients = {}
    for service in SERVICES:
        client = use_lean_http(client_for(url, service, Config(parameter_validation=False)))
        clients[service] = use_lean_json(client) if lean else client
    return clients


def _answers(*, lean: bool) -> tuple[list[Any], list[Any], Fallbacks, Fallbacks]:
    """(test_lean_http_answers' workload's answers, the job workload's, and what the DynamoDB client's codec
    handed to botocore during the job workload: requests, answers)."""
    with EndpointProcess() as endpoint:
        clients = _clients(endpoint.url, lean=lean)
        general = list(_workload(clients))
        dynamodb = clients["dynamodb"]
        requests, answers = Fallbacks(None), Fallbacks(None)
        if lean:
            serializer, parser = dynamodb._serializer, dynamodb._endpoint._response_parser_factory.create_parser("json")
            assert isinstance(serializer, LeanJSONSerializer) and isinstance(parser, LeanJSONParser)
            requests.inner, serializer.fallback = serializer.fallback, requests
            answers.inner, parser.factory = parser.factory, answers
        return general, list(_job_workload(dynamodb)), requests, answers


@pytest.fixture(scope="module")
def both_ways() -> tuple[Any, Any]:
    return _answers(lean=False), _answers(lean=True)


def test_botocore_hands_back_the_same_answers_with_the_codec(both_ways: tuple[Any, Any]) -> None:
    """Breaks if the codec sent different bytes (the endpoint would answer differently) or parsed an answer
    differently: a value, an error, ResponseMetadata, the order of a structure's keys."""
    (general_plain, jobs_plain, _, _), (general_lean, jobs_lean, _, _) = both_ways
    for name, plain, lean in (("general", general_plain, general_lean), ("jobs", jobs_plain, jobs_lean)):
        assert len(plain) == len(lean)
        for number, (expected, got) in enumerate(zip(plain, lean, strict=True)):
            assert repr(_masked(got)) == repr(_masked(expected)), f"{name} workload, call {number}"


def test_the_codec_served_the_platforms_shapes_itself(both_ways: tuple[Any, Any]) -> None:
    """The comparison is not vacuous: the job workload's 8-row Query came back, a condition failed, and the
    codec wrote every request of it and read every answer but the table's creation (its answer holds
    timestamps) and the failed condition's (an error) without botocore. Breaks if the codec refused the
    platform's shapes on the wire (it would cost without saving)."""
    _, (_, jobs, requests, answers) = both_ways
    ready = jobs[5]
    assert ready["Count"] == 8 and ready["Items"][3]["params"]["M"]["text"]["S"] == "é \"B\": x"
    assert jobs[-1]["error"]["Error"]["Code"] == "ConditionalCheckFailedException"
    assert jobs[-1]["error"]["Item"]["pk"]["S"] == "JOB#0006"
    assert requests.calls == 0
    # CreateTable's answer (timestamps); the failed condition's error, parsed and then read for its modeled
    # fields (botocore's Endpoint asks for a parser twice)
    assert answers.calls == 3

"""A boto3 client answers the same through onward_infra.lean_client.http as through urllib3 (ONWARD_CLIENT_WRAPPER).

Two embedded endpoints are sent the same calls in the same order, one through each transport: the
operations the platform sends (DynamoDB's item operations, a batch read, a transaction and a cancelled
one, a failed condition, a validation error, a missing table; DynamoDB Streams' and Kinesis' reads and
writes, binary values both ways). What botocore hands back must be the same, errors included (their
code, message, cancellation reasons and HTTP status), but for what the endpoint stamps per request or
with the clock. A header's value joined differently, a body cut or framed wrongly, an error's status
lost would show here as a difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward_infra.endpoint import EndpointProcess, client_for
from onward_infra.lean_client.http import LeanHttpSession, use_lean_http

TABLE = "lean-http-jobs"
STREAM = "lean-http-events"
PER_REQUEST = {"RequestId", "date", "x-amzn-requestid", "x-amz-crc32", "content-length", "x-amz-id-2"}
pytestmark = pytest.mark.integration  # it starts endpoint processes of its own

CLOCK_MEMBERS = {"CreationDateTime", "LatestStreamArn", "LatestStreamLabel", "StreamArn", "ShardIterator",
                 "NextShardIterator", "ApproximateArrivalTimestamp", "ApproximateCreationDateTime",
                 "StreamCreationTimestamp", "StreamLabel", "EventID", "eventID", "SizeBytes", "ShardId",
                 "SequenceNumber", "StartingSequenceNumber", "EndingSequenceNumber", "TableId",
                 "CreationRequestDateTime"}

Call = Callable[[dict[str, Any]], Any]


def _key(number: int) -> dict[str, Any]:
    return {"pk": {"S": f"job#{number}"}, "sk": {"S": "row"}}


def answer(call: Callable[[], Any]) -> Any:
    """What `call` returned, or the error botocore raised as the service answered it."""
    try:
        return call()
    except ClientError as error:
        return {"error": error.response, "operation": error.operation_name}


def _workload(clients: dict[str, Any]) -> Iterator[Any]:
    """Every call's answer (or the error botocore raised), in order."""
    dynamodb, streams, kinesis = clients["dynamodb"], clients["dynamodbstreams"], clients["kinesis"]
    yield answer(lambda: dynamodb.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}))
    for number in range(5):
        item = {**_key(number), "version": {"N": "1"}, "blob": {"B": bytes(range(number, number + 40))},
                "payload": {"M": {"é": {"S": "ünï" * number}, "l": {"L": [{"N": "1.50"}, {"NULL": True}]}}}}
        yield answer(lambda item=item: dynamodb.put_item(TableName=TABLE, Item=item))
    yield answer(lambda: dynamodb.get_item(TableName=TABLE, Key=_key(1), ConsistentRead=True))
    yield answer(lambda: dynamodb.get_item(TableName=TABLE, Key=_key(99)))
    yield answer(lambda: dynamodb.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                                        ExpressionAttributeValues={":p": {"S": "job#2"}}))
    yield answer(lambda: dynamodb.batch_get_item(RequestItems={TABLE: {"Keys": [_key(n) for n in range(4)]}}))
    yield answer(lambda: dynamodb.update_item(
        TableName=TABLE, Key=_key(0), UpdateExpression="SET version = version + :one",
        ExpressionAttributeValues={":one": {"N": "1"}}, ReturnValues="ALL_NEW"))
    yield answer(lambda: dynamodb.put_item(TableName=TABLE, Item=_key(1),
                                           ConditionExpression="attribute_not_exists(pk)",
                                           ReturnValuesOnConditionCheckFailure="ALL_OLD"))
    yield answer(lambda: dynamodb.transact_write_items(TransactItems=[
        {"Update": {"TableName": TABLE, "Key": _key(2), "UpdateExpression": "SET version = :v",
                    "ExpressionAttributeValues": {":v": {"N": "2"}}}},
        {"Put": {"TableName": TABLE, "Item": {**_key(10), "version": {"N": "1"}}}}]))
    yield answer(lambda: dynamodb.transact_write_items(TransactItems=[
        {"ConditionCheck": {"TableName": TABLE, "Key": _key(3), "ConditionExpression": "version = :v",
                            "ExpressionAttributeValues": {":v": {"N": "7"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"Delete": {"TableName": TABLE, "Key": _key(4)}}]))
    yield answer(lambda: dynamodb.query(TableName=TABLE, KeyConditionExpression="nope = :p",
                                        ExpressionAttributeValues={":p": {"S": "x"}}))
    yield answer(lambda: dynamodb.get_item(TableName="missing-table", Key=_key(1)))
    stream_arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    yield answer(lambda: streams.describe_stream(StreamArn=stream_arn))
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        yield answer(lambda iterator=iterator: streams.get_records(ShardIterator=iterator, Limit=100))
    yield answer(lambda: kinesis.create_stream(StreamName=STREAM, ShardCount=1))
    yield answer(lambda: kinesis.put_records(StreamName=STREAM, Records=[
        {"Data": bytes([number]) * (number * 100 + 1), "PartitionKey": f"job#{number}"} for number in range(5)]))
    yield answer(lambda: kinesis.list_shards(StreamName=STREAM))
    shard_id = kinesis.list_shards(StreamName=STREAM)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=STREAM, ShardId=shard_id,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    yield answer(lambda: kinesis.get_records(ShardIterator=iterator, Limit=100))
    yield answer(lambda: kinesis.describe_stream_summary(StreamName="missing-stream"))


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: "<per request>" if key in CLOCK_MEMBERS | PER_REQUEST else _masked(member)
                for key, member in value.items()}
    if isinstance(value, list):
        return [_masked(member) for member in value]
    return value


def _answers(lean: bool) -> list[Any]:
    with EndpointProcess() as endpoint:
        clients = {service: client_for(endpoint.url, service) for service in ("dynamodb", "dynamodbstreams", "kinesis")}
        if lean:
            for client in clients.values():
                use_lean_http(client)
                assert isinstance(client._endpoint.http_session, LeanHttpSession)
        return list(_workload(clients))


@pytest.fixture(scope="module")
def both_ways() -> tuple[list[Any], list[Any]]:
    return _answers(lean=False), _answers(lean=True)


def test_botocore_hands_back_the_same_answers_through_either_transport(
        both_ways: tuple[list[Any], list[Any]]) -> None:
    through_urllib3, through_lean = both_ways
    assert len(through_urllib3) == len(through_lean)
    for number, (expected, got) in enumerate(zip(through_urllib3, through_lean, strict=True)):
        assert _masked(got) == _masked(expected), f"call {number} of the workload"


def test_the_workload_covers_successes_errors_and_binary_values(both_ways: tuple[list[Any], list[Any]]) -> None:
    """The comparison is not vacuous: errors of each kind were answered, records and binaries came back."""
    _, lean = both_ways
    codes = {answer["error"]["Error"]["Code"] for answer in lean if "error" in answer}
    assert codes >= {"ConditionalCheckFailedException", "TransactionCanceledException", "ValidationException",
                     "ResourceNotFoundException"}
    cancelled = next(answer for answer in lean if "error" in answer
                     and answer["error"]["Error"]["Code"] == "TransactionCanceledException")
    assert cancelled["error"]["CancellationReasons"][0]["Code"] == "ConditionalCheckFailed"
    assert sum(1 for answer in lean if "error" not in answer) >= 18
    kinesis_records = lean[-2]["Records"]
    assert [record["Data"] for record in kinesis_records] == [bytes([n]) * (n * 100 + 1) for n in range(5)]
    stream_records = next(answer["Records"] for answer in lean if "error" not in answer
                          and answer.get("Records") and "dynamodb" in answer["Records"][0])
    assert stream_records[0]["dynamodb"]["NewImage"]["blob"]["B"] == bytes(range(40))

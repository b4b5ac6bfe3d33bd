"""The endpoint's direct routes (infra/onward_infra/moto_fixes/server.py `direct_app`) answer exactly as moto's own
way (domain dispatcher, then Flask) does: same status, same body, same headers but the per-request ones.

A direct route that built its answer differently (another request class, an error left to Flask, a
header lost) would show here as a difference between the two apps' answers to the same request, on the
same moto state: a success, a client error and a failed condition, for DynamoDB, DynamoDB Streams and
Kinesis.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

from onward_infra import moto_fixes
from onward_infra.moto_fixes import server

AUTH = ("AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/{service}/aws4_request, "
        "SignedHeaders=host;x-amz-date;x-amz-target, Signature=" + "0" * 64)
PER_REQUEST_HEADERS = {"date", "x-amzn-requestid", "x-amz-crc32", "server", "content-length"}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


PASSED_ON: list[str] = []  # the targets the direct app handed to moto's way (none should be)


@pytest.fixture(scope="module")
def apps() -> tuple[Client, Client]:
    moto_fixes.install()
    moto = DomainDispatcherApplication(create_backend_app)

    def passed_on(environ: dict[str, Any], start_response: Any) -> Any:
        PASSED_ON.append(environ.get("HTTP_X_AMZ_TARGET", ""))
        return moto(environ, start_response)

    return Client(moto), Client(server.direct_app(passed_on))


def _call(client: Client, service: str, target: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    version = "1.0" if target.startswith("DynamoDB") else "1.1"
    response = client.post("/", data=json.dumps(body), headers={
        "X-Amz-Target": target, "Content-Type": f"application/x-amz-json-{version}",
        "Authorization": AUTH.format(service=service), "X-Amz-Date": "20261201T000000Z"})
    headers = {name.lower(): value for name, value in response.headers.items()
               if name.lower() not in PER_REQUEST_HEADERS}
    text = response.get_data(as_text=True)
    return response.status_code, headers, json.loads(text) if text else None


def _same(apps: tuple[Client, Client], service: str, target: str, body: dict[str, Any]) -> Any:
    moto_way, direct = (_call(client, service, target, body) for client in apps)
    assert direct == moto_way
    assert not PASSED_ON  # answered by the direct route, not by moto's way
    return direct[2]


def test_dynamodb_answers_alike(apps: tuple[Client, Client]) -> None:
    table = f"direct-{uuid.uuid4().hex[:8]}"
    moto_way, _ = apps
    created = _call(moto_way, "dynamodb", "DynamoDB_20120810.CreateTable", {
        "TableName": table, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}})
    assert created[0] == 200
    put = {"TableName": table, "Item": {"pk": {"S": "a"}, "n": {"N": "1"}}}
    for client in apps:
        assert _call(client, "dynamodb", "DynamoDB_20120810.PutItem", put)[0] == 200
    read = _same(apps, "dynamodb", "DynamoDB_20120810.GetItem", {"TableName": table, "Key": {"pk": {"S": "a"}}})
    assert read == {"Item": {"pk": {"S": "a"}, "n": {"N": "1"}}}
    refused = _same(apps, "dynamodb", "DynamoDB_20120810.PutItem", {
        **put, "ConditionExpression": "attribute_not_exists(pk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    assert refused["__type"].endswith("ConditionalCheckFailedException")
    missing = _same(apps, "dynamodb", "DynamoDB_20120810.GetItem", {"TableName": "absent", "Key": {"pk": {"S": "a"}}})
    assert missing["__type"].endswith("ResourceNotFoundException")
    described_table = _same(apps, "dynamodb", "DynamoDB_20120810.DescribeTable", {"TableName": table})
    stream = described_table["Table"]["LatestStreamArn"]
    described = _same(apps, "dynamodb", "DynamoDBStreams_20120810.DescribeStream", {"StreamArn": stream})
    assert described["StreamDescription"]["StreamArn"] == stream


def test_kinesis_answers_alike(apps: tuple[Client, Client]) -> None:
    stream = f"direct-{uuid.uuid4().hex[:8]}"
    moto_way, _ = apps
    created = _call(moto_way, "kinesis", "Kinesis_20131202.CreateStream", {"StreamName": stream, "ShardCount": 1})
    assert created[0] == 200
    shards = _same(apps, "kinesis", "Kinesis_20131202.ListShards", {"StreamName": stream})
    assert len(shards["Shards"]) == 1
    missing = _same(apps, "kinesis", "Kinesis_20131202.ListShards", {"StreamName": "absent"})
    assert missing["__type"].endswith("ResourceNotFoundException")

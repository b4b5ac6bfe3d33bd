"""The endpoint's lean request path answers byte for byte as its whole path does.

The lean path (infra/onward_infra/moto_fixes/connections.py `_plain_environ` and the single write of an answer;
server.py `_lean_request`, `_environ_headers`, `_lean_answer`) builds a plain request's environ at once,
hands moto the body already read and the headers as one dict, and writes moto's answer without building
a werkzeug Response. Two endpoint processes, one with the lean path and one without
(ONWARD_LEAN_REQUESTS=false), are sent the same raw requests in the same order: every operation the
platform sends (DynamoDB's item operations, conditions failed, transactions cancelled, validation errors,
a missing table, an unknown operation; DynamoDB Streams' and Kinesis' reads and writes) and bodies that
take moto's own parser or werkzeug's decompression (a binary value, a gzip body). Their answers must be
the same status, headers and body, but for the request id, the date and what moto stamps with the clock.
Without the lean path's care a default Content-Type, a status line, a header's spelling, a body read twice
would show as a difference here.

What both endpoints share is tested against what it replaced: the answer's single write against http.server's
send_response / send_header / end_headers, the request id's `enrich_response` against moto's, and the plain
environ against werkzeug's and moto's make_environ (in one endpoint, the handler's `lean` switched).
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import types
from collections.abc import Iterator
from typing import Any

import pytest
from moto.moto_api._internal import mock_random

from onward_infra.endpoint import EmbeddedEndpoint, EndpointProcess, _QuietRequestHandler
from onward_infra.moto_fixes import request_setup, server

TABLE = "lean-jobs"
STREAM = "lean-events"
PER_REQUEST_HEADERS = {"date", "x-amzn-requestid", "x-amz-id-2"}
# What moto stamps with the clock or draws at random: masked in both answers before they are compared.
CLOCK_MEMBERS = {"CreationDateTime", "LatestStreamArn", "LatestStreamLabel", "StreamArn", "ShardIterator",
                 "NextShardIterator", "ApproximateArrivalTimestamp", "ApproximateCreationDateTime",
                 "StreamCreationTimestamp", "StreamLabel", "EventID", "LastUpdateToPayPerRequestDateTime",
                 "CreationRequestDateTime", "ShardId", "eventID",
                 "SizeBytes"}  # (a stream record's size counts its timestamp's digits)


def _dynamo(operation: str, body: dict[str, Any]) -> tuple[str, bytes, dict[str, str]]:
    return f"DynamoDB_20120810.{operation}", json.dumps(body).encode(), {}


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _workload() -> list[tuple[str, bytes, dict[str, str]]]:
    """(X-Amz-Target, body, extra headers) of every request, in order; streams' iterators are fetched by
    `_run` from the answers before."""
    item = {**_key("job#1", "row"), "state": {"S": "ready"}, "version": {"N": "1"}, "tenant": {"S": "t&x=1"},
            "payload": {"M": {"a": {"L": [{"N": "1.50"}, {"BOOL": True}, {"NULL": True}]}, "é": {"S": "ünï"}}}}
    index = {"IndexName": "ready", "Projection": {"ProjectionType": "ALL"},
             "KeySchema": [{"AttributeName": "state", "KeyType": "HASH"}, {"AttributeName": "pk", "KeyType": "RANGE"}]}
    return [
        _dynamo("CreateTable", {"TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
                                "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"}
                                                         for n in ("pk", "sk", "state")],
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "sk", "KeyType": "RANGE"}],
                                "GlobalSecondaryIndexes": [index],
                                "StreamSpecification": {"StreamEnabled": True,
                                                        "StreamViewType": "NEW_AND_OLD_IMAGES"}}),
        _dynamo("PutItem", {"TableName": TABLE, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}),
        _dynamo("PutItem", {"TableName": TABLE, "Item": item, "ConditionExpression": "attribute_not_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}),  # the condition fails
        _dynamo("PutItem", {"TableName": TABLE, "Item": {**_key("job#2", "row"), "state": {"S": "ready"},
                                                          "blob": {"B": "AAEC"}}}),  # moto's own parser
        _dynamo("GetItem", {"TableName": TABLE, "Key": _key("job#1", "row"), "ConsistentRead": True}),
        _dynamo("GetItem", {"TableName": TABLE, "Key": _key("job#9", "row")}),
        _dynamo("GetItem", {"TableName": "no-such-table", "Key": _key("job#1", "row")}),
        _dynamo("UpdateItem", {"TableName": TABLE, "Key": _key("job#1", "row"),
                               "UpdateExpression": "SET #s = :s, version = version + :one ADD tries :one",
                               "ConditionExpression": "version = :v", "ReturnValues": "ALL_NEW",
                               "ExpressionAttributeNames": {"#s": "state"},
                               "ExpressionAttributeValues": {":s": {"S": "running"}, ":one": {"N": "1"},
                                                             ":v": {"N": "1"}}}),
        _dynamo("UpdateItem", {"TableName": TABLE, "Key": _key("job#1", "row"),
                               "UpdateExpression": "SET version = :v", "ConditionExpression": "version = :old",
                               "ExpressionAttributeValues": {":v": {"N": "9"}, ":old": {"N": "1"}}}),  # fails
        _dynamo("UpdateItem", {"TableName": TABLE, "Key": _key("job#1", "row"),
                               "UpdateExpression": "SET version = :missing"}),  # validation error
        _dynamo("Query", {"TableName": TABLE, "IndexName": "ready", "KeyConditionExpression": "#s = :s",
                          "ExpressionAttributeNames": {"#s": "state"},
                          "ExpressionAttributeValues": {":s": {"S": "ready"}}, "Limit": 1}),
        _dynamo("Query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p",
                          "ExpressionAttributeValues": {":p": {"S": "job#1"}}, "ScanIndexForward": False}),
        _dynamo("Scan", {"TableName": TABLE, "Limit": 5}),
        _dynamo("BatchWriteItem", {"RequestItems": {TABLE: [
            {"PutRequest": {"Item": {**_key(f"job#{n}", "row"), "state": {"S": "ready"}}}} for n in range(3, 6)]}}),
        _dynamo("BatchGetItem", {"RequestItems": {TABLE: {"Keys": [_key(f"job#{n}", "row") for n in range(1, 7)]}}}),
        _dynamo("TransactWriteItems", {"TransactItems": [
            {"Update": {"TableName": TABLE, "Key": _key("job#3", "row"), "UpdateExpression": "SET #s = :s",
                        "ConditionExpression": "#s = :r", "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":s": {"S": "claimed"}, ":r": {"S": "ready"}}}},
            {"Put": {"TableName": TABLE, "Item": {**_key("job#3", "claim"), "owner": {"S": "w1"}}}},
            {"Delete": {"TableName": TABLE, "Key": _key("job#4", "row")}}]}),
        _dynamo("TransactWriteItems", {"TransactItems": [  # cancelled: the first condition fails
            {"ConditionCheck": {"TableName": TABLE, "Key": _key("job#3", "row"), "ConditionExpression": "#s = :r",
                                "ExpressionAttributeNames": {"#s": "state"},
                                "ExpressionAttributeValues": {":r": {"S": "ready"}},
                                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            {"Put": {"TableName": TABLE, "Item": {**_key("job#5", "row"), "state": {"S": "gone"}}}}]}),
        _dynamo("TransactGetItems", {"TransactItems": [{"Get": {"TableName": TABLE, "Key": _key("job#3", "row")}},
                                                       {"Get": {"TableName": TABLE, "Key": _key("job#4", "row")}}]}),
        _dynamo("DeleteItem", {"TableName": TABLE, "Key": _key("job#5", "row"), "ReturnValues": "ALL_OLD"}),
        _dynamo("DescribeTable", {"TableName": TABLE}),
        _dynamo("Frobnicate", {"TableName": TABLE}),  # an operation DynamoDB does not have
        ("DynamoDB_20120810.GetItem", b"{not json", {}),
        # an empty body: moto takes the request's headers for its parameters, and an Action among them for the
        # operation (DescribeLimits, not ListTables)
        ("DynamoDB_20120810.ListTables", b"", {"Action": "DescribeLimits"}),
        ("DynamoDB_20120810.", b"{}", {}),  # no operation: moto's 404, its body empty, no Content-Type
        ("DynamoDBStreams_20120810.ListStreams", json.dumps({"TableName": TABLE}).encode(), {}),
        ("Kinesis_20131202.CreateStream", json.dumps({"StreamName": STREAM, "ShardCount": 2}).encode(), {}),
        ("Kinesis_20131202.DescribeStreamSummary", json.dumps({"StreamName": STREAM}).encode(), {}),
        ("Kinesis_20131202.ListShards", json.dumps({"StreamName": STREAM}).encode(), {}),
        ("Kinesis_20131202.PutRecord", json.dumps({"StreamName": STREAM, "Data": "aGVsbG8=",
                                                    "PartitionKey": "job#1"}).encode(), {}),
        ("Kinesis_20131202.PutRecords", json.dumps({"StreamName": STREAM, "Records": [
            {"Data": "d29ybGQ=", "PartitionKey": f"job#{n}"} for n in range(4)]}).encode(), {}),
        ("Kinesis_20131202.PutRecord", json.dumps({"StreamName": "no-such-stream", "Data": "eA==",
                                                    "PartitionKey": "k"}).encode(), {}),
        ("DynamoDB_20120810.GetItem", gzip.compress(json.dumps({"TableName": TABLE, "Key": _key("job#1", "row")})
                                                    .encode()), {"Content-Encoding": "gzip"}),
    ]


def _post(connection: http.client.HTTPConnection, target: str, body: bytes,
          extra: dict[str, str]) -> tuple[int, str, dict[str, str], bytes]:
    version = "1.0" if target.startswith("DynamoDB") else "1.1"
    connection.request("POST", "/", body=body, headers={
        "X-Amz-Target": target, "Content-Type": f"application/x-amz-json-{version}",
        "User-Agent": "Boto3/1.35 md/Botocore#1.35 ua/2.0 os/linux", **extra})
    response = connection.getresponse()
    return response.status, response.reason, dict(response.getheaders()), response.read()


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: "<clock>" if key in CLOCK_MEMBERS else _masked(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_masked(member) for member in value]
    return value


def _comparable(answer: tuple[int, str, dict[str, str], bytes]) -> tuple[Any, ...]:
    status, reason, headers, body = answer
    try:
        parsed: Any = _masked(json.loads(body))
    except ValueError:
        parsed = body
    changed_by_mask = parsed != body and json.dumps(parsed) != json.dumps(json.loads(body))
    volatile = PER_REQUEST_HEADERS | ({"x-amz-crc32", "content-length"} if changed_by_mask else set())
    kept = [(name, "<per request>" if name.lower() in volatile else value) for name, value in headers.items()]
    return status, reason, kept, parsed


def _stream_reads(connection: http.client.HTTPConnection,
                  answers: list[Any]) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """The reads of both streams from their first record: iterators taken from the answers so far."""
    table_stream = json.loads(answers[0][3])["TableDescription"]["LatestStreamArn"]
    yield "DynamoDBStreams_20120810.DescribeStream", json.dumps({"StreamArn": table_stream}).encode(), {}
    for target_service, arn_member, arn in (("DynamoDBStreams_20120810", "StreamArn", table_stream),
                                            ("Kinesis_20131202", "StreamName", STREAM)):
        shards = json.loads(_post(connection, f"{target_service}.DescribeStream",
                                  json.dumps({arn_member: arn}).encode(), {})[3])["StreamDescription"]["Shards"]
        for shard in shards:
            iterator = json.loads(_post(connection, f"{target_service}.GetShardIterator", json.dumps(
                {arn_member: arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"}).encode(),
                {})[3])["ShardIterator"]
            yield f"{target_service}.GetRecords", json.dumps({"ShardIterator": iterator, "Limit": 100}).encode(), {}


def _run(endpoint: EndpointProcess) -> list[tuple[int, str, dict[str, str], bytes]]:
    host, port = endpoint.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    answers = [_post(connection, *request) for request in _workload()]
    answers += [_post(connection, *request) for request in list(_stream_reads(connection, answers))]
    connection.close()
    return answers


@pytest.fixture(scope="module")
def both_ways(request: pytest.FixtureRequest) -> tuple[list[Any], list[Any]]:
    monkeypatch = pytest.MonkeyPatch()
    try:
        monkeypatch.setenv(server.LEAN_VARIABLE, "false")
        with EndpointProcess() as whole:
            whole_answers = _run(whole)
        monkeypatch.setenv(server.LEAN_VARIABLE, "true")
        with EndpointProcess() as lean:
            lean_answers = _run(lean)
    finally:
        monkeypatch.undo()
    return whole_answers, lean_answers


def test_every_answer_of_the_lean_path_is_the_whole_paths(both_ways: tuple[list[Any], list[Any]]) -> None:
    whole, lean = both_ways
    assert len(whole) == len(lean)
    for number, (expected, got) in enumerate(zip(whole, lean, strict=True)):
        assert _comparable(got) == _comparable(expected), f"request {number} of the workload"


def test_the_workload_covers_successes_and_errors(both_ways: tuple[list[Any], list[Any]]) -> None:
    """The comparison is not vacuous: the workload's answers include the errors it means to send."""
    _, lean = both_ways
    statuses = [status for status, _, _, _ in lean]
    bodies = b" ".join(body for _, _, _, body in lean)
    assert statuses.count(200) >= 20
    for error in (b"ConditionalCheckFailedException", b"TransactionCanceledException", b"ValidationException",
                  b"ResourceNotFoundException"):
        assert error in bodies, error
    records = [json.loads(body)["Records"] for _, _, _, body in lean[-3:]]
    assert all(records), "every stream read found records"


def test_the_plain_environ_is_make_environs() -> None:
    """connections.py's `_plain_environ` gives the application the environ werkzeug's and moto's
    make_environ give it (a key missing or spelled otherwise would show here even where no answer uses it)."""
    seen: list[dict[str, Any]] = []
    with EmbeddedEndpoint() as endpoint:
        app = endpoint._server.app

        def recording(environ: dict[str, Any], start_response: Any) -> Any:
            seen.append({key: value for key, value in environ.items() if key not in {"wsgi.input", "werkzeug.socket"}})
            return app(environ, start_response)

        endpoint._server.app = recording
        handler = endpoint._server.RequestHandlerClass
        host, port = endpoint.url.removeprefix("http://").split(":")
        try:
            for lean in (False, True):
                handler.lean = lean  # type: ignore[attr-defined]
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                for target, body, extra in _workload()[:3]:
                    _post(connection, target, body, {**extra, "X-Repeated": "a"})
                connection.close()
        finally:
            handler.lean = server.LEAN  # type: ignore[attr-defined]
    assert len(seen) == 6
    for whole, plain in zip(seen[:3], seen[3:], strict=True):
        assert {k: v for k, v in plain.items() if k != "REMOTE_PORT"} == {
            k: v for k, v in whole.items() if k != "REMOTE_PORT"}
        assert list(plain) == list(whole)


def _stdlib_send(handler: Any, environ: dict[str, Any], status: str, headers: list[tuple[str, str]],
                 body: bytes) -> None:
    """connections.py's `_send` as it was: through http.server's send_response, send_header, end_headers."""
    code_text, message = status.split(None, 1)
    code = int(code_text)
    declared = [value for name, value in headers if name.lower() == "content-length"]
    if environ["REQUEST_METHOD"] == "HEAD" or code in (204, 304):
        framed = not body
    elif declared:
        framed = declared == [str(len(body))]
    else:
        headers = [*headers, ("Content-Length", str(len(body)))]
        framed = True
    closing = handler.close_connection or not framed
    handler.send_response(code, message)
    for name, value in headers:
        handler.send_header(name, value)
    if closing:
        if not any(name.lower() == "connection" for name, _ in headers):
            handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    if body:
        handler.wfile.write(body)


def _bare_handler() -> Any:
    handler = object.__new__(_QuietRequestHandler)
    handler.request_version, handler.close_connection, handler.wfile = "HTTP/1.1", False, io.BytesIO()
    handler.server = types.SimpleNamespace(_server_version="Werkzeug/3")
    return handler


@pytest.mark.parametrize(("method", "status", "headers", "body"), [
    ("POST", "200 OK", [("Content-Type", "application/x-amz-json-1.0")], b'{"Item":{}}'),
    ("POST", "400 BAD REQUEST", [("status", "400"), ("x-amzn-requestid", "r")], b'{"__type":"x"}'),
    ("POST", "200 OK", [("Content-Length", "3")], b"four"),  # a wrong length: the connection closes
    ("POST", "200 OK", [("Connection", "close")], b"{}"),
    ("POST", "200 OK", [("connection", "Keep-Alive")], b"{}"),
    ("HEAD", "200 OK", [("Content-Length", "10")], b""),
    ("POST", "204 NO CONTENT", [], b""),
    ("POST", "200 OK", [("X-Unicode", "é")], b"\xc3\xa9"),
])
def test_an_answer_is_written_as_http_server_writes_it(method: str, status: str, headers: list[tuple[str, str]],
                                                       body: bytes) -> None:
    """connections.py's `_send` writes in one write the bytes send_response, send_header and end_headers
    wrote (status line, Server, Date, the headers, Connection: close when closing), and leaves the connection
    to close or stay open alike: a header dropped or a Connection header ignored would show here."""
    ours, stdlib = _bare_handler(), _bare_handler()
    environ = {"REQUEST_METHOD": method}
    ours._send(environ, status, list(headers), body)
    _stdlib_send(stdlib, environ, status, list(headers), body)
    assert (ours.wfile.getvalue(), ours.close_connection) == (stdlib.wfile.getvalue(), stdlib.close_connection)


@pytest.mark.parametrize(("headers", "body"), [
    ({"Content-Type": "application/x-amz-json-1.0"}, '{"Items":[]}'),
    ({"status": 400}, '{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"}'),
    ({}, "<Response><RequestId>old</RequestId></Response>"),
    ({"status": "200"}, b'{"bytes": true}'),
    ({}, ""),
])
def test_the_request_id_is_added_as_moto_adds_it(headers: dict[str, Any], body: Any) -> None:
    """request_setup.py's `enrich_response` gives moto's `_enrich_response`'s headers and body (the request
    id drawn from the same generator state); a status left an int, an id not drawn, an XML body's RequestId
    not replaced would show here."""
    original = request_setup._original_enrich_response
    mock_random.seed(7)
    expected = original(dict(headers), body)
    mock_random.seed(7)
    assert request_setup.enrich_response(dict(headers), body) == expected

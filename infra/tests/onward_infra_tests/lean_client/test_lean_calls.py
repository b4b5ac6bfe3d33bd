"""A call sent by onward_infra.lean_client.calls is the call botocore would send, and answers the same
(ONWARD_CLIENT_WRAPPER).

Two clients of the same embedded endpoint, one botocore's own and one with the lean transport, codec and
calls, are made the same calls: the operations the platform sends (test_lean_http_answers' workload), retries
(a before-send handler answering for the endpoint: botocore's way of stubbing, which lean calls honour), an
error botocore would not retry, a refused connection, an idempotency token, a handler someone registered.
What reaches the wire, what comes back, how many attempts, and what the retry quota holds afterwards must be
the same, but for what botocore draws per call (the invocation id, a generated token) or the endpoint stamps.
"""

from __future__ import annotations

import importlib
import json
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from aws_lambda_powertools.shared.user_agent import _create_feature_function
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from onward.settings import Settings
from onward_infra.endpoint import EndpointProcess, client_for
from onward_infra.lean_client import WRAPPER
from onward_infra.lean_client.calls import LeanCalls, use_lean_calls
from onward_infra.lean_client.codec import use_lean_json
from onward_infra.lean_client.http import _request_bytes, use_lean_http
from onward_infra_tests.lean_client.test_lean_http_answers import _masked, _workload

pytestmark = pytest.mark.integration  # it starts an endpoint process of its own

TABLE = "lean-calls"
DRAWN_PER_CALL = {"amz-sdk-invocation-id"}


def _lean(client: Any) -> Any:
    return use_lean_calls(use_lean_json(use_lean_http(client)))


def _clients(url: str, service: str = "dynamodb", config: Config | None = None) -> dict[str, Any]:
    return {"botocore": client_for(url, service, config), "lean": _lean(client_for(url, service, config))}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[EndpointProcess]:
    with EndpointProcess() as process:
        client = client_for(process.url, "dynamodb")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        yield process


class _Botocore:
    """Counts the calls a LeanCalls handed to botocore's own `_make_api_call`."""

    def __init__(self, client: Any) -> None:
        calls = vars(client)["_make_api_call"]
        assert isinstance(calls, LeanCalls)
        self.calls: list[str] = []
        original = calls._original

        def counted(operation_name: str, api_params: dict[str, Any]) -> Any:
            self.calls.append(operation_name)
            return original(operation_name, api_params)

        calls._original = counted


class _Wire:
    """Every request a client sent (a before-send handler sees each attempt), answered by `answers` first:
    each a (status, body) the endpoint is taken to have answered, None to let the request through."""

    def __init__(self, client: Any, answers: list[tuple[int, dict[str, Any]] | None] | None = None) -> None:
        self.requests: list[AWSPreparedRequest] = []
        self._answers = list(answers or [])
        client.meta.events.register("before-send.*", self._before_send)

    def _before_send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        self.requests.append(request)
        scripted = self._answers.pop(0) if self._answers else None
        if scripted is None:
            return None
        status, body = scripted
        response = AWSResponse(request.url, status, {"x-amzn-requestid": "scripted",
                                                     "content-type": "application/x-amz-json-1.0"}, None)
        response._content = json.dumps(body).encode()
        return response

    def bytes_sent(self) -> list[bytes]:
        """What the lean transport writes for each request, the invocation id's line left out and the user
        agent's feature ids sorted (botocore lists a set: its order varies from call to call)."""
        sent = []
        for request in self.requests:
            parts = urlsplit(request.url)
            lines = _request_bytes(request, parts.netloc, parts.path or "/", parts.query).split(b"\r\n")
            kept = [re.sub(rb" m/([^ ]+)", lambda m: b" m/" + b",".join(sorted(m.group(1).split(b","))), line)
                    for line in lines if not line.startswith(b"amz-sdk-invocation-id:")]
            sent.append(b"\r\n".join(kept))
        return sent

    def headers(self) -> list[dict[str, str]]:
        return [{name: value.decode() if isinstance(value, bytes) else value for name, value in request.headers.items()
                 if name not in DRAWN_PER_CALL} for request in self.requests]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return _masked(call())
    except ClientError as error:
        return {"error": type(error).__name__, "response": _masked(error.response)}


def test_the_platform_s_calls_answer_as_botocore_s() -> None:
    """test_lean_http_answers' workload (item operations, a batch read, transactions and a cancelled one,
    failed conditions, validation errors, a missing table, streams and Kinesis with binary values), each call
    sent lean (none handed to botocore). A parse, an error class or a modeled error field (cancellation
    reasons) lost on the lean way shows as a difference."""
    answers = {}
    for way in ("botocore", "lean"):
        with EndpointProcess() as process:
            clients = {service: client_for(process.url, service)
                       for service in ("dynamodb", "dynamodbstreams", "kinesis")}
            handed = []
            if way == "lean":
                handed = [_Botocore(_lean(client)) for client in clients.values()]
            answers[way] = list(_workload(clients))
            assert all(not counter.calls for counter in handed), [counter.calls for counter in handed]
    assert len(answers["lean"]) == len(answers["botocore"]) >= 20
    for number, (expected, got) in enumerate(zip(answers["botocore"], answers["lean"], strict=True)):
        assert _masked(got) == _masked(expected), f"call {number} of the workload"


def test_the_wire_carries_what_botocore_writes(endpoint: EndpointProcess) -> None:
    """Method, URL, headers (user agent with its feature ids, the attempt and max-attempts header, the
    target, the content type) and body, for reads, writes and a transaction with its token given: equal, the
    invocation id aside (drawn per call). A header left out or written from the wrong source differs here."""
    clients = _clients(endpoint.url)
    wires = {way: _Wire(client) for way, client in clients.items()}
    for client in clients.values():
        client.put_item(TableName=TABLE, Item={"pk": {"S": "wire"}, "n": {"N": "1"}})
        client.get_item(TableName=TABLE, Key={"pk": {"S": "wire"}}, ConsistentRead=True)
        client.transact_write_items(ClientRequestToken="token-1", TransactItems=[
            {"Update": {"TableName": TABLE, "Key": {"pk": {"S": "wire"}}, "UpdateExpression": "SET n = n + :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
    botocore_wire, lean_wire = wires["botocore"], wires["lean"]
    for lean_bytes, botocore_bytes in zip(lean_wire.bytes_sent(), botocore_wire.bytes_sent(), strict=True):
        assert lean_bytes == botocore_bytes, (lean_bytes, botocore_bytes)
    assert len(lean_wire.requests) == 3
    assert all(request.headers["amz-sdk-invocation-id"] for request in lean_wire.requests)


def test_an_idempotency_token_is_drawn_when_missing_and_kept_across_retries(endpoint: EndpointProcess) -> None:
    """A TransactWriteItems without ClientRequestToken gets one, as botocore's generate_idempotent_uuid gives
    it, and its retry carries the same token and invocation id: a retried transaction the service already
    applied is then recognised (on AWS) instead of applied twice."""
    client = _lean(client_for(endpoint.url, "dynamodb"))
    wire = _Wire(client, [(500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                                 "message": "scripted"})])
    client.transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": {"pk": {"S": "token"}}}}])
    tokens = [json.loads(request.body)["ClientRequestToken"] for request in wire.requests]
    assert len(tokens) == 2 and tokens[0] == tokens[1] and uuid.UUID(tokens[0])
    assert len({request.headers["amz-sdk-invocation-id"] for request in wire.requests}) == 1


THROTTLED = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                   "message": "scripted"})
UNAVAILABLE = (503, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "scripted"})


def test_retries_are_botocore_s_attempt_by_attempt(endpoint: EndpointProcess) -> None:
    """A throttled then unavailable answer, then the endpoint's: both clients make three attempts, with the
    same attempt headers, report RetryAttempts 2, and leave the retry quota where botocore leaves it (the
    after-call event gives back what the retries took: without it a long run's quota would drain and retries
    stop). A first attempt sent lean and its retries not, or not at all, differs here."""
    clients = _clients(endpoint.url)
    seen = {}
    for way, client in clients.items():
        wire = _Wire(client, [THROTTLED, UNAVAILABLE])
        answer = client.get_item(TableName=TABLE, Key={"pk": {"S": "absent"}})
        quota = next(handler.__self__ for handler in client.meta.events._emitter._handlers.prefix_search(
            "after-call.dynamodb.GetItem") if type(getattr(handler, "__self__", None)).__name__ == "RetryQuotaChecker")
        seen[way] = ([headers["amz-sdk-request"].split("; ")[-2:] for headers in wire.headers()],
                     answer["ResponseMetadata"]["RetryAttempts"], quota._quota.available_capacity)
    assert seen["lean"] == seen["botocore"]
    assert seen["lean"][0] == [["attempt=1", "max=4"], ["attempt=2", "max=4"], ["attempt=3", "max=4"]]
    assert seen["lean"][1] == 2


def test_an_error_botocore_would_not_retry_is_raised_at_once_as_botocore_raises_it(endpoint: EndpointProcess) -> None:
    """A failed condition: one attempt, the same error class, code, message and status."""
    outcomes = {}
    for way, client in _clients(endpoint.url).items():
        wire = _Wire(client)
        outcomes[way] = (_outcome(lambda client=client: client.put_item(
            TableName=TABLE, Item={"pk": {"S": "taken"}}, ConditionExpression="attribute_exists(pk)")),
            len(wire.requests))
    assert outcomes["lean"] == outcomes["botocore"]
    assert outcomes["lean"][0]["error"] == "ConditionalCheckFailedException" and outcomes["lean"][1] == 1


def test_a_refused_connection_is_retried_then_raised_as_botocore_raises_it() -> None:
    """No endpoint listening: both clients try total_max_attempts times and raise EndpointConnectionError."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, not listening: refused
        attempts = {}
        for way, client in _clients(url, config=Config(retries={"mode": "standard", "total_max_attempts": 2},
                                                       connect_timeout=2)).items():
            wire = _Wire(client)
            with pytest.raises(EndpointConnectionError):
                client.get_item(TableName=TABLE, Key={"pk": {"S": "x"}})
            attempts[way] = len(wire.requests)
    assert attempts == {"botocore": 2, "lean": 2}


def test_a_handler_someone_registers_makes_the_calls_botocore_s(endpoint: EndpointProcess) -> None:
    """A handler of a per-call event that lean calls do not run (here before-call, registered after lean calls
    were made) is honoured: the client's calls go botocore's way from then on. Without the check the lean way
    would skip it silently."""
    client = _lean(client_for(endpoint.url, "dynamodb"))
    handed = _Botocore(client)
    client.get_item(TableName=TABLE, Key={"pk": {"S": "x"}})
    assert handed.calls == []
    called: list[str] = []
    client.meta.events.register("before-call.dynamodb.GetItem", lambda **kwargs: called.append("before-call"))
    client.get_item(TableName=TABLE, Key={"pk": {"S": "x"}})
    assert called == ["before-call"] and handed.calls == ["GetItem"]
    client.put_item(TableName=TABLE, Item={"pk": {"S": "other"}})  # another operation, no handler: lean
    assert handed.calls == ["GetItem"]


def test_lean_calls_need_the_lean_transport_and_codec(endpoint: EndpointProcess) -> None:
    with pytest.raises(ValueError, match="lean transport"):
        use_lean_calls(client_for(endpoint.url, "dynamodb"))
    with pytest.raises(ValueError, match="lean codec"):
        use_lean_calls(use_lean_http(client_for(endpoint.url, "dynamodb")))


def test_the_user_agent_powertools_writes_goes_out_the_same(endpoint: EndpointProcess) -> None:
    """Powertools appends its feature to every request's user agent (a request-created handler, registered on
    the botocore session when it is imported, as in every Lambda function here): the calls stay lean and the
    header reads as botocore's calls write it. Without the probe of request-created the feature would be
    missing; without the handler allowed every call would go botocore's way (as it did at first)."""
    clients = _clients(endpoint.url)
    for client in clients.values():
        client.meta.events.register("request-created", _create_feature_function("streaming"))
    wires = {way: _Wire(client) for way, client in clients.items()}
    handed = _Botocore(clients["lean"])
    for client in clients.values():
        client.get_item(TableName=TABLE, Key={"pk": {"S": "x"}})
    assert handed.calls == []
    assert wires["lean"].bytes_sent() == wires["botocore"].bytes_sent()
    assert b"PT/streaming/" in wires["lean"].bytes_sent()[0]


# what the endpoint ruleset reads of a call's parameters (DynamoDB's ResourceArn and ResourceArnList)
ENOUGH_TO_RESOLVE = {"TableName": TABLE, "RequestItems": {TABLE: {}}, "TransactItems": []}
PLATFORM_OPERATIONS = {
    "dynamodb": ("TransactWriteItems", "Query", "GetItem", "BatchGetItem", "PutItem", "UpdateItem", "BatchWriteItem"),
    "dynamodbstreams": ("GetRecords", "GetShardIterator", "DescribeStream"),
    "kinesis": ("PutRecords", "GetRecords", "ListShards", "GetShardIterator"),
}


def test_the_platform_s_clients_send_their_calls_lean(endpoint: EndpointProcess) -> None:
    """The clients the functions build (Settings.client, with every handler module imported as the processes
    import them: Powertools registers on botocore's sessions) take the lean way for the operations the
    platform sends. A handler someone adds to every client (a tracer's patch, a library's feature) would
    silently send every call botocore's way: this names it."""
    for module in ("api.app", "entrypoints.relay", "entrypoints.projector", "entrypoints.reaper",
                   "entrypoints.worker", "entrypoints.scheduler"):
        importlib.import_module(f"onward.{module}")
    settings = Settings.from_environment({**endpoint.environment, "ONWARD_CLIENT_WRAPPER": WRAPPER})
    for service, operations in PLATFORM_OPERATIONS.items():
        calls = vars(settings.client(service))["_make_api_call"]
        assert isinstance(calls, LeanCalls)
        for operation in operations:
            assert calls._lean_operation(operation, ENOUGH_TO_RESOLVE) is not None, f"{service}.{operation}"

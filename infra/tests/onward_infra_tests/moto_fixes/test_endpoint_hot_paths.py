"""The embedded endpoint's per-request shortcuts answer exactly as before them: connections kept open
between requests (infra/onward_infra/moto_fixes/connections.py), update expressions parsed once and validated faster
(expressions.py), a response class's methods listed once (server.py), index queries with a Limit read only
the partition's first items and projections convert only what they read (queries.py).

Where a test compares with "stock moto", the same requests were answered with every fix of moto put back
(`moto_fixes.uninstall()`), on the same endpoint: requests are serialized and tests run one at a time.
Each test's docstring says how it would break without the code.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.core import responses as moto_responses
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.responses import DynamoHandler
from werkzeug.serving import make_server

from onward_infra import moto_fixes
from onward_infra.endpoint import REGION, STATE_PATH, EmbeddedEndpoint
from onward_infra.moto_fixes import connections, expressions, queries, server

pytestmark = pytest.mark.integration

_stacks = itertools.count()
LIST_TABLES = (b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
               b"Content-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 "
               b"Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n"
               b"Content-Length: 2\r\n\r\n{}")


class Stack:
    """A fresh deployment of template.yaml's data resources, with a DynamoDB client for it."""

    def __init__(self, endpoint: EmbeddedEndpoint) -> None:
        self.environment = endpoint.deploy(f"hot-{next(_stacks)}").environment
        self.jobs = self.environment["JOBS_TABLE"]
        self.db = endpoint.client("dynamodb")


@pytest.fixture
def stack(endpoint: EmbeddedEndpoint) -> Stack:
    return Stack(endpoint)


@contextmanager
def stock_moto() -> Iterator[None]:
    """Every fix of moto put back for the duration."""
    moto_fixes.uninstall()
    try:
        yield
    finally:
        moto_fixes.install()


def answer_or_error(call: Callable[..., dict[str, Any]], **request: Any) -> Any:
    """The answer without its metadata (request id...), or ["error", code, message]."""
    try:
        answer = call(**request)
    except ClientError as error:
        return ["error", error.response["Error"]["Code"], error.response["Error"]["Message"]]
    answer.pop("ResponseMetadata", None)
    return json.loads(json.dumps(answer, default=repr))


def every_page(call: Callable[..., dict[str, Any]], request: dict[str, Any],
               between: Callable[[], Any] = lambda: None) -> list[Any]:
    """Each answer of `call` (a Query or a Scan) from `request`, following LastEvaluatedKey to the end (at most
    100 pages), `between` called before each next page."""
    pages: list[Any] = []
    for _ in range(100):
        page = answer_or_error(call, **request)
        pages.append(page)
        if not isinstance(page, dict) or "LastEvaluatedKey" not in page:
            break
        request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}
        between()
    return pages


def renamed(answers: Any, stock: Stack, ours: Stack) -> Any:
    """Answers given on the stock stack, its table names replaced with ours (ConsumedCapacity names them)."""
    return json.loads(json.dumps(answers).replace(stock.jobs, ours.jobs))


class Response:
    """One HTTP response read off a socket: status, headers, body (by its Content-Length)."""

    def __init__(self, stream: Any) -> None:
        self.status = int(stream.readline().split()[1])
        self.headers = http.client.parse_headers(stream)
        self.body: bytes = stream.read(int(self.headers["Content-Length"]))


def read_responses(sock: socket.socket, count: int, timeout_s: float = 10.0) -> list[Response]:
    """`count` HTTP responses read one after the other from one socket."""
    sock.settimeout(timeout_s)
    stream = sock.makefile("rb")
    return [Response(stream) for _ in range(count)]


# --- connections ----------------------------------------------------------------------------------------

def test_many_requests_share_one_connection_each_answer_with_its_length(endpoint: EmbeddedEndpoint) -> None:
    """Without the keep-alive handler werkzeug answers `Connection: close` and no Content-Length... every
    request of a client would open a new connection (here: a new local port each time), and its thread."""
    host, port = endpoint.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    ports = set()
    try:
        for _ in range(60):
            connection.request("POST", "/", body=b"{}", headers={
                "X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0",
                "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
                                 "SignedHeaders=host, Signature=0"})
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200 and "TableNames" in json.loads(body)
            assert response.getheader("Content-Length") == str(len(body))
            assert response.getheader("Connection") != "close"
            assert connection.sock is not None
            ports.add(connection.sock.getsockname()[1])
    finally:
        connection.close()
    assert len(ports) == 1


def test_the_date_header_is_the_stdlib_s_for_the_second_of_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the second's check the Date header would stay the first answer's for the life of the
    endpoint; without the cache, every answer formats it again. Both give http.server's value, for now and
    for a timestamp given."""
    import http.server

    handler = connections.KeepAliveRequestHandler.__new__(connections.KeepAliveRequestHandler)
    stdlib = http.server.BaseHTTPRequestHandler.date_time_string
    for now in (1_780_000_000.2, 1_780_000_000.9, 1_780_000_001.0, 1_780_003_601.5, 1_780_000_000.5):
        monkeypatch.setattr(connections.time, "time", lambda now=now: now)
        assert handler.date_time_string() == stdlib(handler, int(now))
    assert handler.date_time_string(1_700_000_000) == stdlib(handler, 1_700_000_000)


def test_pipelined_requests_and_unread_bodies_are_delimited(endpoint: EmbeddedEndpoint) -> None:
    """Three requests sent at once on one connection, the first with a body the application never reads
    (GET of the state path). Without reading each body whole before the application runs, its bytes would
    be taken for the next request line (a 400); without answering from what is already buffered, the
    requests after the first would wait for bytes that never come."""
    host, port = endpoint.url.removeprefix("http://").split(":")
    state = (f"GET {STATE_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nhello world").encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(state + LIST_TABLES + LIST_TABLES)
        first, *listings = read_responses(sock, 3)
    assert first.status == 200 and "restored" in json.loads(first.body)
    for response in listings:
        assert response.status == 200 and "TableNames" in json.loads(response.body)


def test_a_client_asking_to_close_is_answered_as_werkzeug_did(endpoint: EmbeddedEndpoint) -> None:
    """A request with `Connection: close` goes through werkzeug's own handling: answered, then closed.
    Without honouring it the server would keep the connection open, and this read would time out."""
    host, port = endpoint.url.removeprefix("http://").split(":")
    request = LIST_TABLES.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        (response,) = read_responses(sock, 1)
        assert response.status == 200 and response.headers["Connection"] == "close"
        assert sock.recv(1) == b""  # closed by the server


def test_stopping_closes_idle_kept_alive_connections_and_a_restart_serves_the_same_client() -> None:
    """A client's pooled connection and a raw idle one are open when the endpoint stops. Without shutting
    down idle connections at server_close, stop() would still return (request threads are daemons), but
    those connections would live on and the stopped endpoint's thread would answer on them, from the state of
    an endpoint that no longer runs (here: the raw socket would get a ListTables answer after the stop)."""
    first = EmbeddedEndpoint().start()
    port = int(first.url.rpartition(":")[2])
    client = first.client("dynamodb")
    client.list_tables()  # leaves a connection in the client's pool
    idle = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        idle.sendall(LIST_TABLES)
        (answered,) = read_responses(idle, 1)
        assert answered.status == 200
        started = time.monotonic()
        first.stop()
        assert time.monotonic() - started < 2.0
        idle.sendall(LIST_TABLES)
        assert idle.recv(1) == b""  # shut down by the stopped server, not answered
    finally:
        idle.close()
    second = EmbeddedEndpoint(port=port).start()
    try:
        assert "TableNames" in client.list_tables()  # the same client, its pooled connection gone: reconnects
    finally:
        second.stop()


def test_application_errors_are_answered_500_and_the_connection_goes_on() -> None:
    """An application that raises gets werkzeug's 500 (its traceback logged), framed with its length, and
    the connection serves the next request; an answer without a Content-Length gets one. Without building
    the whole answer before sending it, a failure could not be answered with a length on a kept connection."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ["PATH_INFO"] == "/boom":
            raise RuntimeError("boom")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello ", b"world"]

    class Handler(connections.KeepAliveRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            """Quiet."""

    logged: list[str] = []
    served = connections.closing_idle_connections(
        make_server("127.0.0.1", 0, app, threaded=True, request_handler=Handler))
    served.log = lambda kind, message, *args: logged.append(kind)  # type: ignore[method-assign]  # quiet
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", served.server_address[1]), timeout=10) as sock:
            sock.sendall(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            failed, fine = read_responses(sock, 2)
        assert failed.status == 500 and b"Internal Server Error" in failed.body
        assert fine.status == 200 and fine.body == b"hello world" and logged == ["error"]
    finally:
        served.shutdown()
        served.server_close()
        thread.join(timeout=5)


# --- update expressions ---------------------------------------------------------------------------------

UPDATE_NAMES = {"#s": "state", "#v": "version", "#l": "log", "#m": "meta", "#pk": "pk", "#gone": "gone"}
UPDATE_EXPRESSIONS = [
    "SET #s = :s, #v = #v + :one",
    "SET #v = if_not_exists(#v, :zero) + :one REMOVE #gone",
    "SET #l = list_append(if_not_exists(#l, :empty), :entry)",
    "SET #m.a = :s",
    "REMOVE #l[0], #l[2]",
    "ADD #v :one, tags :tags DELETE oldtags :tags",
    "SET #pk = :s",  # a key attribute: UpdateHashRangeKeyException
    "SET #s = :s, #s = :s",  # twice: DuplicateUpdateExpression
    "SET #v = #s + :one",  # a string plus a number
    "SET #s = :missing",
    "SET #s = :s,",  # a syntax error
    "SET size = :s",  # a reserved word
]


def _update_values(number: int) -> dict[str, Any]:
    return {":s": {"S": f"state-{number}"}, ":one": {"N": str(number)}, ":zero": {"N": "0"},
            ":empty": {"L": []}, ":entry": {"L": [{"N": str(number)}]}, ":tags": {"SS": [f"t{number}", "x"]}}


def _updates(stack: Stack) -> list[Any]:
    """Every expression, twice, on two items with different values, by UpdateItem and by TransactWriteItems."""
    for number in (1, 2):
        stack.db.put_item(TableName=stack.jobs, Item={
            "pk": {"S": f"JOB#{number}"}, "sk": {"S": "JOB"}, "version": {"N": "1"}, "meta": {"M": {}},
            "log": {"L": [{"N": str(n)} for n in range(5)]}, "oldtags": {"SS": ["t1", "t2", "x"]}, "gone": {"S": "-"}})
    answers = []
    for expression, repeat, number in itertools.product(UPDATE_EXPRESSIONS, range(2), (1, 2)):
        key = {"pk": {"S": f"JOB#{number}"}, "sk": {"S": "JOB"}}
        values = _update_values(number + repeat)
        used = {name: value for name, value in values.items() if name in expression}
        names = {name: value for name, value in UPDATE_NAMES.items() if name in expression}
        request: dict[str, Any] = {"TableName": stack.jobs, "Key": key, "UpdateExpression": expression}
        if used:
            request["ExpressionAttributeValues"] = used
        if names:
            request["ExpressionAttributeNames"] = names
        answers.append(answer_or_error(stack.db.update_item, **request, ReturnValues="ALL_NEW"))
        answers.append(answer_or_error(stack.db.transact_write_items, TransactItems=[{"Update": request}]))
        answers.append(answer_or_error(stack.db.get_item, TableName=stack.jobs, Key=key, ConsistentRead=True))
    return answers


def test_updates_by_one_expression_with_other_values_match_stock_moto(endpoint: EmbeddedEndpoint) -> None:
    """The same expression text applied to two items with different values, again and again, and invalid
    expressions: the same items and the same errors (code and message) as stock moto. Without a fresh copy
    of the kept tree for each validation, the first update's values (resolved into the tree) would be
    applied again by the next; without parsing an invalid expression again, its error would differ or vanish."""
    expressions.forget()
    ours_stack, stock_stack = Stack(endpoint), Stack(endpoint)
    ours = _updates(ours_stack)
    with stock_moto():
        stock = _updates(stock_stack)
    assert ours == renamed(stock, stock_stack, ours_stack)
    errors = {answer[1] for answer in ours if isinstance(answer, list)}
    assert errors == {"ValidationException", "TransactionCanceledException"}  # (:missing in a transaction)
    assert sum(isinstance(answer, list) for answer in ours) == 6 * 2 * 2 * 2  # 6 invalid, 2 items, twice, 2 APIs
    assert any(isinstance(answer, dict) and answer.get("Attributes", {}).get("state") == {"S": "state-2"}
               for answer in ours)
    assert expressions._parsed and all(pickled is not None for _, pickled in expressions._pickles.values())


def test_a_kept_expression_is_never_changed_by_its_uses(stack: Stack) -> None:
    """Each validation works on its own copy of the kept tree: the tree's pickle stays what it was after
    many updates with different values. Without the copy, validation would write values into the kept tree."""
    expression = "SET #s = :s, #v = #v + :one"
    expressions.forget()
    key = {"pk": {"S": "JOB#kept"}, "sk": {"S": "JOB"}}
    stack.db.put_item(TableName=stack.jobs, Item={**key, "version": {"N": "0"}})
    for number in range(1, 6):
        stack.db.transact_write_items(TransactItems=[{"Update": {
            "TableName": stack.jobs, "Key": key, "UpdateExpression": expression,
            "ExpressionAttributeNames": {"#s": "state", "#v": "version"},
            "ExpressionAttributeValues": {":s": {"S": f"s{number}"}, ":one": {"N": str(number)}}}}])
        if number == 1:
            tree = expressions._parsed[(UpdateExpressionParser, expression)]
            kept_tree, pickled = expressions._pickles[id(tree)]
            assert kept_tree is tree and pickled is not None
    item = stack.db.get_item(TableName=stack.jobs, Key=key, ConsistentRead=True)["Item"]
    assert item["state"] == {"S": "s5"} and item["version"] == {"N": "15"}
    assert expressions._parsed[(UpdateExpressionParser, expression)] is tree
    assert expressions._pickles[id(tree)][1] == pickled
    assert expressions._pickle_if_faithful(tree) == pickled  # the tree itself is unchanged


# --- response classes' methods --------------------------------------------------------------------------

def test_a_response_class_s_methods_are_listed_again_when_the_class_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept list is moto's own, and a class that gains (or loses) a method is listed again. Without
    checking the classes' sizes, an action added to a response class would stay unknown (NotImplemented)."""
    assert moto_responses.method_names_from_class is server.method_names_from_class
    listed = server.method_names_from_class(DynamoHandler)
    assert listed == server._original_method_names_from_class(DynamoHandler)
    assert server.method_names_from_class(DynamoHandler) is listed  # kept
    monkeypatch.setattr(DynamoHandler, "zz_new_action", lambda self: None, raising=False)
    assert "zz_new_action" in server.method_names_from_class(DynamoHandler)
    monkeypatch.delattr(DynamoHandler, "zz_new_action")
    assert "zz_new_action" not in server.method_names_from_class(DynamoHandler)


# --- index queries with a Limit, projections ------------------------------------------------------------

PARTITIONS = ("acme#0#0", "acme#0#1")


def _fill_ready(stack: Stack) -> None:
    for number in range(40):
        item: dict[str, Any] = {
            "pk": {"S": f"JOB#{number:02d}"}, "sk": {"S": "JOB" if number % 3 else "RUN#1"},
            "state": {"S": "queued"}, "version": {"N": str(number % 4)},
            "meta": {"M": {"b": {"L": [{"N": "1"}, {"S": "two"}, {"N": "3"}]}, "c": {"S": "x" * number}}},
        }
        if number % 10 != 9:  # some jobs are in no ready queue
            item["ready_pk"] = {"S": PARTITIONS[number % 2]}
            if number % 10 != 8:  # and some have a queue but no due time (not in the index)
                item["ready_due"] = {"N": str([5, 10, 10, 15, -3, 2.5][number % 6])}
        else:  # running: on the leases index (INCLUDE projection: attempt, lease_owner)
            item |= {"lease_pk": {"S": PARTITIONS[0]}, "lease_expires_at": {"N": str(number % 4 * 5)},
                     "attempt": {"N": "1"}, "lease_owner": {"S": f"worker-{number}"}}
        stack.db.put_item(TableName=stack.jobs, Item=item)


def _move_some(stack: Stack) -> None:
    """Updates moving items between queues, removing them, deleting them: the kept order must follow."""
    for number in range(0, 40, 7):
        key = {"pk": {"S": f"JOB#{number:02d}"}, "sk": {"S": "JOB" if number % 3 else "RUN#1"}}
        if number % 2:
            stack.db.delete_item(TableName=stack.jobs, Key=key)
        else:
            stack.db.update_item(TableName=stack.jobs, Key=key, UpdateExpression="SET ready_pk = :p, ready_due = :d",
                                 ExpressionAttributeValues={":p": {"S": PARTITIONS[1]}, ":d": {"N": "10"}})
    stack.db.update_item(TableName=stack.jobs, Key={"pk": {"S": "JOB#02"}, "sk": {"S": "JOB"}},
                         UpdateExpression="REMOVE ready_due")


QUERY_VARIANTS: list[dict[str, Any]] = [
    {},
    {"FilterExpression": "version > :v", "ExpressionAttributeValues": {":v": {"N": "1"}}},
    {"ProjectionExpression": "pk, ready_due, meta.b[1], meta.b[0], meta, #s",
     "ExpressionAttributeNames": {"#s": "state"}},
    {"Select": "COUNT"},
]
KEY_CONDITIONS = [
    ("ready_pk = :p", {}),
    ("ready_pk = :p AND ready_due <= :d", {":d": {"N": "10"}}),
    ("ready_pk = :p AND ready_due > :d", {":d": {"N": "5"}}),  # the matches last
    ("ready_pk = :p AND ready_due < :d", {":d": {"N": "-10"}}),  # none
    ("ready_pk = :p AND ready_due BETWEEN :d AND :e", {":d": {"N": "2.5"}, ":e": {"N": "10"}}),
    ("lease_pk = :p AND lease_expires_at < :d", {":d": {"N": "10"}}),  # the leases index
]


def _ready_pages(stack: Stack) -> list[Any]:
    """Every page of many ready- (and leases-) index queries, following LastEvaluatedKey to the end."""
    pages: list[Any] = []
    for partition, limit, forward, (condition, bounds), variant in itertools.product(
            (*PARTITIONS, "nobody#0#0"), (1, 3, 8, None), (True, False), KEY_CONDITIONS, QUERY_VARIANTS):
        index = condition.partition("_")[0]  # "ready" or "lease"
        request: dict[str, Any] = {"TableName": stack.jobs, "IndexName": "leases" if index == "lease" else "ready",
                                   "KeyConditionExpression": condition, "ScanIndexForward": forward, **variant,
                                   "ExpressionAttributeValues": {":p": {"S": partition}, **bounds,
                                                                 **variant.get("ExpressionAttributeValues", {})}}
        if limit is not None:
            request["Limit"] = limit
        pages += every_page(stack.db.query, request)
    return pages


def _projections(stack: Stack) -> list[Any]:
    keys = [{"pk": {"S": f"JOB#{number:02d}"}, "sk": {"S": "JOB" if number % 3 else "RUN#1"}} for number in (4, 5, 9)]
    projections = ("meta, meta.b[0], meta.b[2]", "meta.b[2], meta.b[0]", "pk, pk, meta.c",
                   "nothing, meta.nothing, meta.b[7]")
    return [answer_or_error(stack.db.get_item, TableName=stack.jobs, Key=key, ProjectionExpression=projection)
            for key in keys for projection in projections]


def test_limited_index_queries_and_projections_match_stock_moto(endpoint: EmbeddedEndpoint) -> None:
    """Limits with filters (a Limit counts the items read before the filter), reversed order, pages after
    pages (ExclusiveStartKey), range conditions matching first, last or nothing, projections of nested paths
    and of an INCLUDE index, counts, tied due times, items without a due time; before and after writes
    moving items between queues: the same pages as stock moto.
    Without stopping only where moto stops (LastEvaluatedKey set) a page could end early or skip items; with
    an order kept by other rules than moto's comparisons, the pages would hold other items; with a
    projection's conversion shared between its paths, `meta, meta.b[0], meta.b[2]` would lose elements."""
    ours_stack, stock_stack = Stack(endpoint), Stack(endpoint)
    for stack in (ours_stack, stock_stack):
        _fill_ready(stack)
    ours = [_ready_pages(ours_stack), _projections(ours_stack)]
    with stock_moto():
        stock = [_ready_pages(stock_stack), _projections(stock_stack)]
    assert ours == renamed(stock, stock_stack, ours_stack)
    for stack in (ours_stack, stock_stack):
        _move_some(stack)
    after = _ready_pages(ours_stack)
    with stock_moto():
        stock_after = _ready_pages(stock_stack)
    assert after == renamed(stock_after, stock_stack, ours_stack)
    assert after != ours[0]  # the writes changed the answers


def test_a_limited_index_query_reads_only_the_partition_s_first_items(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim's query (Limit 8, every job due) on a queue of 300 hands moto 9 items (8, and the next one
    that sets LastEvaluatedKey), not 300: without _limited_query its cost would grow with the backlog."""
    for start in range(0, 300, 25):
        stack.db.batch_write_item(RequestItems={stack.jobs: [{"PutRequest": {"Item": {
            "pk": {"S": f"JOB#{number:03d}"}, "sk": {"S": "JOB"}, "ready_pk": {"S": "big#0#0"},
            "ready_due": {"N": str(1000 + number % 50)}}}} for number in range(start, start + 25)]})
    handed: list[int] = []
    real_query_over = queries._query_over

    def counting(table: Any, items: list[Any], *args: Any) -> Any:
        handed.append(len(items))
        return real_query_over(table, items, *args)

    monkeypatch.setattr(queries, "_query_over", counting)
    answer = stack.db.query(TableName=stack.jobs, IndexName="ready", Limit=8,
                            KeyConditionExpression="ready_pk = :p AND ready_due <= :now",
                            ExpressionAttributeValues={":p": {"S": "big#0#0"}, ":now": {"N": "2000"}})
    assert handed == [9]
    assert [item["pk"]["S"] for item in answer["Items"]] == [f"JOB#{n:03d}" for n in (0, 50, 100, 150, 200, 250, 1, 51)]
    assert answer["LastEvaluatedKey"]["pk"] == {"S": "JOB#051"}


def test_a_partition_holding_a_key_value_of_another_type_is_left_to_moto(endpoint: EmbeddedEndpoint) -> None:
    """moto accepts an index range key value of another type than the declared one; its query of that
    partition then fails comparing them (a 500). The kept order cannot place such an item: the partition is
    queried by moto, whole, and fails alike. Without that, the query would answer (from the other items)."""
    once = boto3.client("dynamodb", endpoint_url=endpoint.url, region_name=REGION, aws_access_key_id="testing",
                        aws_secret_access_key="testing", config=Config(retries={"max_attempts": 1}))
    ours_stack, stock_stack = Stack(endpoint), Stack(endpoint)
    for stack in (ours_stack, stock_stack):
        for number, due in enumerate(({"N": "1"}, {"S": "soon"}, {"N": "2"})):
            stack.db.put_item(TableName=stack.jobs, Item={"pk": {"S": f"JOB#{number}"}, "sk": {"S": "JOB"},
                                                          "ready_pk": {"S": "odd#0#0"}, "ready_due": due})

    def query(stack: Stack) -> Any:
        return answer_or_error(once.query, TableName=stack.jobs, IndexName="ready", Limit=2,
                               KeyConditionExpression="ready_pk = :p",
                               ExpressionAttributeValues={":p": {"S": "odd#0#0"}})

    ours = query(ours_stack)
    with stock_moto():
        stock = query(stock_stack)
    assert ours == stock and ours[:2] == ["error", "500"]

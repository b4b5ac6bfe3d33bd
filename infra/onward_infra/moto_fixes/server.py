"""Routing. moto's server finds each request's service by listing its own package directory (one `isdir`
per moto module, about 150) on every request: that listing was about two thirds of the endpoint's CPU under
load. `install` lists it once.

Responses. moto writes every answer by walking botocore's output shapes member by member (about a third of
the endpoint's CPU once routing was fixed). The answers of the operations the platform calls all the time
(DynamoDB's item operations, DynamoDB Streams' and Kinesis' record reads and writes) are plain JSON once
written as the JSON protocol writes them: binary values base64, timestamps as epoch seconds to the
millisecond, members without a value left out. They are dumped directly; any other answer, and any error,
still goes through moto's serializer.

Conversion. moto turns an item operation's result (items of DynamoType values) into plain values with
`dynamo_to_dict`, which asks every value of every item what it is (isinstance, then hasattr) on the way down:
about a tenth of the endpoint's CPU once the queries read whole rows (the claim's head read: eight rows of
the ready index). `plain_dynamo` does the same by each value's exact type, and leaves to `dynamo_to_dict`
anything else (binary values, timestamps, other objects).

Direct routes. Every request went through moto's domain dispatcher (its service guessed from the headers)
and a Flask app per service (URL map, request context, response class) before reaching the response class
that does the work: about a tenth of the endpoint's CPU per request. `direct_app` hands the JSON-protocol
requests of the services the platform calls (DynamoDB, DynamoDB Streams, Kinesis: named by X-Amz-Target) to
that class's `dispatch` as moto's Flask view does (the same request class, the same ClientError answer, the
same CORS header); any other request, and any request from a browser (with an Origin), takes moto's way.

The lean path. A direct request whose body was read whole into memory (not gzip, not chunked: what
connections.py's kept-alive requests are) is handed to moto with its body already read (werkzeug's stream,
form and cached data not walked again) and without `dict(request.headers)` over werkzeug's EnvironHeaders
(moto's setup reads the headers it is given only when the body holds no query-string pair, which a JSON
body always does); its answer is written as werkzeug's Response would write it (`_lean_answer`: werkzeug's
status line, its default Content-Type, a Content-Length) without building one, when werkzeug would change
nothing else (no Location, no Content-Length of moto's, a status with a body). moto's setup itself
(`setup_class`) still runs: what a response class reads of it is whatever it pleases. A differential test
(infra/tests/onward_infra_tests/moto_fixes/test_endpoint_lean_path.py) sends the same raw requests to an
endpoint with and without it (ONWARD_LEAN_REQUESTS=false) and compares the answers byte for byte.

Dispatch. moto lists a response class's functions with `inspect.getmembers` on every request, to tell
whether the requested action is one of them (about 2% of the endpoint's CPU). `method_names_from_class`
lists them once per class, and again whenever a class of its MRO gains or loses an attribute (our patches
replace functions with functions: the names stay the same).
"""

from __future__ import annotations

import base64
import calendar
import io
import json
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError
from moto import backends as moto_backends
from moto.core import responses as moto_responses
from moto.core import utils as moto_utils
from moto.core.common_types import TYPE_RESPONSE
from moto.core.responses import ActionContext, ActionResult
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.utilities import dynamo_to_dict
from moto.dynamodb.responses import DynamoHandler, DynamoResult
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.kinesis.responses import KinesisResponse
from moto.moto_api import recorder
from moto.moto_server.werkzeug_app import BackendRequest
from moto.settings import DISABLE_GLOBAL_CORS
from werkzeug.wrappers import Response

from onward.settings import flag_setting
from onward_infra.moto_fixes import request_setup

# Item operations whose answers hold only strings, numbers, booleans, lists, maps and binary values.
PLAIN_JSON_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                                   "BatchWriteItem", "TransactWriteItems", "TransactGetItems"})
# The operations, by service, whose answers (moto's ActionResult) are dumped directly: every one of their
# members is a string, number, boolean, list, map, binary value or timestamp.
PLAIN_JSON_ANSWERS: dict[str, frozenset[str]] = {
    "dynamodb": PLAIN_JSON_OPERATIONS,
    "dynamodbstreams": frozenset({"GetRecords", "GetShardIterator", "DescribeStream"}),
    "kinesis": frozenset({"PutRecords", "PutRecord", "GetRecords", "GetShardIterator", "ListShards",
                          "DescribeStreamSummary"}),
}


class _NotPlainJson(TypeError):
    pass


def _wire_value(value: Any) -> Any:
    """A binary value or a timestamp as the JSON protocol writes it (moto's serializer's own conversions)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):  # epoch seconds, to the millisecond (naive: UTC, as moto stamps them)
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    raise _NotPlainJson(type(value).__name__)


def _without_nones(value: Any) -> Any:
    """`value` without the members whose value is None (the serializer writes no member for them)."""
    if isinstance(value, dict):
        return {key: _without_nones(member) for key, member in value.items() if member is not None}
    if isinstance(value, list):
        return [_without_nones(member) for member in value]
    return value


def _plain_json_answer(result: object, context: ActionContext, *, nones: bool) -> TYPE_RESPONSE | None:
    """The answer to an operation of PLAIN_JSON_ANSWERS dumped directly; None for anything else (an error, a
    value JSON cannot hold). `nones`: the result may hold members without a value."""
    operation = context.operation_model
    service = operation.service_model
    if isinstance(result, Exception) or operation.name not in PLAIN_JSON_ANSWERS.get(service.service_name, ()):
        return None
    try:
        body = json.dumps(_without_nones(result) if nones else result, default=_wire_value, separators=(",", ":"))
    except _NotPlainJson:
        return None
    return 200, {"Content-Type": f"application/x-amz-json-{service.metadata.get('jsonVersion', '1.0')}"}, body


def dynamo_result_execute(self: DynamoResult, context: ActionContext) -> TYPE_RESPONSE:
    """moto's answer to an item operation (its DynamoDB types already converted), dumped directly."""
    return _plain_json_answer(self.result, context, nones=False) or _original_dynamo_result_execute(self, context)


def action_result_execute(self: ActionResult, context: ActionContext) -> TYPE_RESPONSE:
    """moto's answer to one of PLAIN_JSON_ANSWERS' operations, dumped directly; moto's serializer otherwise."""
    return _plain_json_answer(self.result, context, nones=True) or _original_action_result_execute(self, context)


_SCALARS = frozenset({str, int, float, bool, type(None)})
_BINARY_TYPES = frozenset({"B", "BS"})


def plain_dynamo(value: Any) -> Any:
    """`dynamo_to_dict(value)`, by exact types: the same plain values, sooner."""
    kind = type(value)
    if kind is dict:
        return {key: plain_dynamo(member) for key, member in value.items()}
    if kind is list:
        return [plain_dynamo(member) for member in value]
    if kind is DynamoType and value.type not in _BINARY_TYPES:
        inner = value.value
        return {value.type: inner if type(inner) in _SCALARS else plain_dynamo(inner)}
    if kind in _SCALARS:
        return value
    return dynamo_to_dict(value)


def dynamo_result_init(self: DynamoResult, result: object) -> None:
    """moto's DynamoResult, its result converted by `plain_dynamo`."""
    ActionResult.__init__(self, plain_dynamo(result))


_original_action_result_execute = ActionResult.execute_result
_original_dynamo_result_execute = DynamoResult.execute_result
_original_list_of_moto_modules = moto_backends.list_of_moto_modules
_MOTO_MODULES: tuple[str, ...] = ()


def list_of_moto_modules() -> tuple[str, ...]:
    """moto's module names, listed once: the package directory does not change while the server runs."""
    global _MOTO_MODULES
    if not _MOTO_MODULES:
        _MOTO_MODULES = tuple(_original_list_of_moto_modules())
    return _MOTO_MODULES


_original_method_names_from_class = moto_utils.method_names_from_class  # what moto_responses imported
# class -> (the number of attributes of each class of its MRO, moto's list of its function names)
_METHOD_NAMES: dict[type, tuple[tuple[int, ...], list[str]]] = {}


def method_names_from_class(clazz: object) -> list[str]:
    """moto's list of a class's function names, listed again only when a class of its MRO changed size."""
    if not isinstance(clazz, type):
        return _original_method_names_from_class(clazz)
    shape = tuple(len(vars(kind)) for kind in clazz.__mro__)
    found = _METHOD_NAMES.get(clazz)
    if found is None or found[0] != shape:
        found = _METHOD_NAMES[clazz] = (shape, _original_method_names_from_class(clazz))
    return found[1]


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# X-Amz-Target's prefix -> the moto response class that answers it (its URL rule is the only one of its service)
DIRECT_TARGETS: dict[str, Callable[..., Any]] = {
    "DynamoDB_20120810": DynamoHandler.dispatch,
    "DynamoDBStreams_20120810": DynamoDBStreamsHandler.dispatch,
    "Kinesis_20131202": KinesisResponse.dispatch,
}


def _raw_url(environ: dict[str, Any], request: BackendRequest) -> str:
    """The request's URL, as moto's `raw_url` builds it through werkzeug, written at once for the requests the
    SDKs send (a POST to "/" with a Host and no query)."""
    host = environ.get("HTTP_HOST", "")
    if (environ.get("PATH_INFO"), environ.get("RAW_URI", "/"), environ.get("QUERY_STRING", ""),
            environ.get("SCRIPT_NAME", "")) == ("/", "/", "", "") and host and not host.endswith((":80", ":443")):
        return f"{environ['wsgi.url_scheme']}://{host}/"  # (werkzeug drops a scheme's default port)
    return str(request.raw_url)


def direct_app(app: WsgiApp) -> WsgiApp:
    """`app` (moto's domain dispatcher), except that a POST naming one of DIRECT_TARGETS is answered by its
    response class at once, as moto's Flask view (`convert_to_flask_response`) would answer it."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        dispatch = DIRECT_TARGETS.get(environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0])
        if dispatch is None or environ.get("REQUEST_METHOD") != "POST" or "HTTP_ORIGIN" in environ:
            return app(environ, start_response)  # (a browser's request: its CORS answer is flask-cors's)
        request = BackendRequest(environ)
        lean = LEAN and not _raw_body_class(dispatch) and _lean_request(environ, request)
        recorder._record_request(request)
        request_setup.without_form_data(request)
        # (moto's setup reads the headers given only for a body without a query string's pair: no JSON body)
        headers_sent = {} if lean and request._cached_data.strip(b"&") else dict(request.headers)
        try:
            result = dispatch(request, _raw_url(environ, request), headers_sent)
        except ClientError as error:
            result = 400, {}, error.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        if not DISABLE_GLOBAL_CORS:  # what moto's Flask apps add to an answer to a request without an Origin
            headers = {**headers, "Access-Control-Allow-Origin": "*"}
        answer = _lean_answer(status, headers, content) if lean else None
        if answer is not None:
            start_response(answer[0], answer[1])
            return [answer[2]]
        response: Iterable[bytes] = Response(response=content, status=status, headers=headers)(environ, start_response)
        return response

    return serve


# Off ("false"/"0"): every direct request takes moto's whole setup and werkzeug's Response (the lean path's
# differential test runs an endpoint each way); any other value than a flag stops the endpoint at start.
LEAN_VARIABLE = "ONWARD_LEAN_REQUESTS"
LEAN = flag_setting(os.environ, LEAN_VARIABLE, default=True)


def _raw_body_class(dispatch: Callable[..., Any]) -> bool:
    """Whether the response class of `dispatch` (its bound classmethod) keeps bodies raw: moto's setup then
    reads the headers it is given (or does not say: taken as yes)."""
    return bool(getattr(getattr(dispatch, "__self__", None), "use_raw_body", True))


def _lean_request(environ: dict[str, Any], request: BackendRequest) -> bool:
    """Whether a direct request can be set up leanly, its body given to `request` as read: a plain JSON body
    read whole into memory (no gzip, no chunks), nothing of it read yet."""
    body_stream = environ.get("wsgi.input")
    if type(body_stream) is not io.BytesIO or "HTTP_CONTENT_ENCODING" in environ or "wsgi.input_terminated" in environ:
        return False
    body = body_stream.getvalue()
    if body_stream.tell() or str(len(body)) != environ.get("CONTENT_LENGTH"):
        return False
    request._cached_data = body  # what werkzeug's get_data would read and cache: the whole body
    return True


_WERKZEUG_FIXED = frozenset({"location", "content-location", "content-length"})
_STATUS_LINES: dict[int, str] = {}  # status code -> werkzeug's status line ("400 BAD REQUEST")


def _lean_answer(status: object, headers: dict[str, Any],
                 content: object) -> tuple[str, list[tuple[str, str]], bytes] | None:
    """What `Response(response=content, status=status, headers=headers)` gives a WSGI server (status line,
    headers, body) for an answer werkzeug does not adjust: a str or bytes body, str header values, no
    Location, Content-Location or Content-Length of moto's, a status with a body; None for anything else."""
    if type(status) is not int or not 200 <= status < 600 or status in (204, 304):
        return None
    if type(content) is str:
        body = content.encode()
    elif type(content) is bytes:
        body = content
    else:
        return None
    listed: list[tuple[str, str]] = []
    content_type = False
    for name, value in headers.items():
        if type(name) is not str or type(value) is not str or "\n" in value or "\r" in value:
            return None
        lowered = name.lower()
        if lowered in _WERKZEUG_FIXED:
            return None
        content_type = content_type or lowered == "content-type"
        listed.append((name, value))
    if not content_type:
        listed.append(("Content-Type", "text/plain; charset=utf-8"))
    listed.append(("Content-Length", str(len(body))))
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = Response(status=status).status
    return line, listed, body


PATCHES = (
    (moto_backends, "list_of_moto_modules", list_of_moto_modules),
    (moto_responses, "method_names_from_class", method_names_from_class),
    (DynamoResult, "execute_result", dynamo_result_execute),
    (DynamoResult, "__init__", dynamo_result_init),
    (ActionResult, "execute_result", action_result_execute),
)

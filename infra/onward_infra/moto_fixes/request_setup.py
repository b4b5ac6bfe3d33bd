"""A request's setup before moto's response class runs it: about a third of the endpoint's CPU for a GetItem.

- Request parameters. moto parses every request body by walking botocore's input shapes member by member,
  which for DynamoDB's JSON gives exactly what `json.loads` gives, except for binary values (base64 in the
  body, bytes once parsed). A DynamoDB body with no binary value (`"B"` / `"BS"` nowhere in it) is loaded
  with `json.loads`; any other body, and every other service's, is moto's to parse.
- Request ids. moto draws each answer's 52-character request id one character at a time from its seeded
  random generator (about 8% of a GetItem): drawn in one call to the same generator.
- Request ids in answers. moto puts each answer's request id into its body with a regular expression (an
  XML body's `<RequestId>`), scanning every body, JSON ones too: a str body without `<RequestId>` is left
  as it is without the scan (`enrich_response`; the same headers, the same body).
- Form data. werkzeug parses the body of every request as a form before moto reads it as JSON:
  `without_form_data` sets the empty form a JSON request parses to (infra/onward_infra/moto_fixes/server.py's
  direct routes call it).
"""

from __future__ import annotations

import json
import string
from typing import Any

from moto.core import responses as moto_responses
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.moto_api._internal import mock_random

_REQUEST_ID_CHARACTERS = string.ascii_letters + string.digits
_BINARY_MEMBERS = (b'"B"', b'"BS"')


def gen_amzn_requestid_long(headerdict: dict[str, Any] | None = None) -> str:
    """moto's request id (52 letters and digits, from moto's random generator), drawn in one call."""
    request_id = "".join(mock_random.choices(_REQUEST_ID_CHARACTERS, k=52))
    if isinstance(headerdict, dict):
        headerdict["x-amzn-requestid"] = request_id
    return request_id


def dynamo_parse_parameters(self: DynamoHandler, request: Request) -> None:
    """A DynamoDB request's parameters: its JSON body as loaded when it holds no binary value."""
    body = request.data
    if any(member in body for member in _BINARY_MEMBERS):
        _original_parse_parameters(self, request)
        return
    self.params = json.loads(body) if body else {}


def enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
    """moto's `BaseResponse._enrich_response`: the status header as a string, the request id drawn into the
    headers (and into an XML body's RequestId), without the body's scan when it cannot hold a RequestId."""
    if type(body) is not str or "<RequestId>" in body:
        return _original_enrich_response(headers, body)
    if "status" in headers:
        headers["status"] = str(headers["status"])
    moto_responses.gen_amzn_requestid_long(headers)  # type: ignore[attr-defined]  # ours once installed, as moto's
    return headers, body


def without_form_data(request: Request) -> None:
    """Mark a JSON-protocol request's form as parsed, empty, as werkzeug's parser would leave it."""
    if "form" not in request.__dict__:
        request.__dict__["form"] = request.parameter_storage_class()
        request.__dict__["files"] = request.parameter_storage_class()


_original_parse_parameters = moto_responses.BaseResponse.parse_parameters
_original_enrich_response = moto_responses.BaseResponse._enrich_response

PATCHES = (
    (moto_responses, "gen_amzn_requestid_long", gen_amzn_requestid_long),
    (DynamoHandler, "parse_parameters", dynamo_parse_parameters),
    (moto_responses.BaseResponse, "_enrich_response", staticmethod(enrich_response)),
)

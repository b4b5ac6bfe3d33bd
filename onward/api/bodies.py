"""The request's JSON body as every route with a body reads it, before its model validates it: declared JSON
(415), at most MAX_BODY_BYTES (413), valid base64 when encoded and JSON that can be stored (400)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from onward.api.answers import Problem
from onward.domain.documents import parse_json_float

MAX_BODY_BYTES = 256 * 1024


def json_body(event: BaseProxyEvent) -> Any:
    """The request's JSON body: 415 unless it is declared JSON, 413 over MAX_BODY_BYTES, 400 unless it is
    JSON that can be stored (no NaN or Infinity, no nesting that exhausts the parser). A number a float cannot
    hold (1e-400) is read as its Decimal, for the models to refuse by its own value rather than keep its 0.0."""
    content_type = (event.headers or {}).get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise Problem(415, "Unsupported media type", "send the body as Content-Type: application/json",
                      headers={"Accept": "application/json"})
    raw: bytes
    body = event.body or ""
    if event.is_base64_encoded:
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:
            raise Problem(400, "Malformed body", "the body is not valid base64") from error
    else:
        raw = body.encode()
    if len(raw) > MAX_BODY_BYTES:
        raise Problem(413, "Payload too large", f"the body takes {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        return json.loads(raw, parse_constant=_refuse_constant, parse_float=parse_json_float)
    except RecursionError as error:
        raise Problem(400, "Malformed JSON", "the body nests too deeply") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {error}") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and not a number DynamoDB can store)")

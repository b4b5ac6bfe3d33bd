"""An HTTP client for the API tests of the status page's routes that holds every answer to the OpenAPI
document: its status must be documented for the route it was answered on, and its body must parse with the
very model the documented schema was generated from. Also: calling the handler as API Gateway's JWT
authorizer would (claims, no token), for credentials only JWTs can carry (an operator bound to a tenant)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from onward.api import app as api
from onward.api.app import openapi_document
from onward.api.contract import ANSWERS
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.api_support import http_call

CONTRACT = {model.__name__: model for model in ANSWERS}
DOCUMENT = openapi_document()


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$")


# Static paths first: /jobs/counts is not the job "counts" (API Gateway and the resolver prefer them too).
ROUTES = sorted(DOCUMENT["paths"], key=lambda template: ("{" in template, template))


def documented_route(path: str) -> str:
    bare = path.split("?", 1)[0]
    return next(template for template in ROUTES if _pattern(template).match(bare))


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def conforms(method: str, path: str, status: int, content_type: str, body: Any) -> None:
    responses = DOCUMENT["paths"][documented_route(path)][method.lower()]["responses"]
    assert str(status) in responses, f"{method} {path} answered {status}, not in the OpenAPI document"
    if "content" not in responses[str(status)]:  # documented without content (204, 304): none is sent
        assert body is None, f"{method} {path} answered {status} with content"
        return
    schema = responses[str(status)]["content"][content_type]["schema"]
    refs = [schema] if "$ref" in schema else schema.get("anyOf", [])
    errors = []
    for ref in refs:
        try:
            CONTRACT[ref["$ref"].rsplit("/", 1)[1]].model_validate_json(json.dumps(body))
            break
        except ValueError as error:
            errors.append(error)
    else:
        assert not refs, f"{method} {path}: the answer matches none of {refs}: {errors}"
    if status >= 400:
        assert content_type == "application/problem+json"
        assert {"type", "title", "status", "detail"} <= set(body) and body["status"] == status


class Client:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, token: str | None = None, *, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> Reply:
        answer = http_call(self.url, method, path, token=token, body=body, raw=raw, headers=headers)
        if answer.status == 204:  # no content: the document must say the route answers 204
            assert "204" in DOCUMENT["paths"][documented_route(path)][method.lower()]["responses"]
            assert answer.body is None
        else:
            conforms(method, path, answer.status, answer.headers.get("content-type", ""), answer.body)
        return Reply(answer.status, answer.headers, answer.body)

    def get(self, path: str, token: str | None = None) -> Reply:
        return self.call("GET", path, token)


def call_with_claims(method: str, path: str, claims: dict[str, Any], body: Any = None) -> Reply:
    """The handler invoked as behind API Gateway's JWT authorizer (set ONWARD_AUTH=jwt first)."""
    raw = b"" if body is None else json.dumps(body).encode()
    headers = [] if body is None else [("Content-Type", "application/json")]
    event = build_event(method, path, headers, raw)
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    reply = api.handler(event, LocalLambdaContext("onward-api"))
    headers_out = {name.lower(): value for name, value in (reply.get("headers") or {}).items()}
    parsed = json.loads(reply["body"]) if reply.get("body") else None
    conforms(method, path, reply["statusCode"], headers_out["content-type"], parsed)
    return Reply(reply["statusCode"], headers_out, parsed)

"""How the resolver generates the OpenAPI document (GET /openapi.json): the document's title and security scheme,
the answers every route declares (`ok`, `problem`, `secured`), and the few marks the document adds to what
Powertools generates from the routes' typed signatures and the contract's pydantic models (onward.api.contract).

The routes (onward/api/routes/) declare their parameters, body and answers; nothing here lists a path."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from onward.api.answers import PROBLEM_JSON
from onward.api.contract.common import ProblemDetails
from onward.api.contract.jobs import BatchJob
from onward.domain.states import CLAIMABLE_STATES, REPLAYABLE_STATES, TERMINAL_STATES

REF_TEMPLATE = "#/components/schemas/{model}"
TITLE, VERSION = "Onward", "1.0.0"
DESCRIPTION = "Background jobs: submit, watch (status view with freshness), cancel, replay."
SECURED: list[dict[str, list[str]]] = [{"bearer": []}]
# What Powertools documents for its own validation answer (a 422 of its schema): this API answers problem+json.
POWERTOOLS_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError", "ResponseValidationError")
# Answers that never have content (RFC 9110: 204 No Content, 304 Not Modified).
BODILESS_STATUSES = ("204", "304")


def configure(app: ApiGatewayResolver) -> None:
    """The document's title, description and bearer scheme (the routes name it in `security`)."""
    app.configure_openapi(title=TITLE, version=VERSION, description=DESCRIPTION,
                          security_schemes={"bearer": HTTPBearer()})


def ok(description: str, model: type[BaseModel] | Any) -> OpenAPIResponse:
    """A success answer of `model` (a contract model, or a union of them) as application/json."""
    return {"description": description, "content": {"application/json": {"model": model}}}


def problem(description: str) -> OpenAPIResponse:
    """A refusal: application/problem+json (ProblemDetails)."""
    return {"description": description, "content": {PROBLEM_JSON: {"model": ProblemDetails}}}


UNAUTHORIZED = problem("no valid bearer token")
NO_TENANT = problem("the credential names no valid tenant and gives no operator role (a JWT whose tenant claim is "
                    "missing or not a tenant id)")
OPERATORS_ONLY = problem("the credential is not an operator's")
EVERY_TENANT = problem("the credential is not an operator's, or is an operator's bound to a tenant (this shows "
                       "every tenant's data)")
NOT_FOUND = problem("no such job for this tenant (another tenant's job is answered the same way)")
BODY_TOO_LARGE = problem("the body is over 256 KiB")
OVER_QUOTA = problem("the tenant's requests are over its quota (requests a second, counted per tenant over 10 s "
                     "windows; operators bound to no tenant are not counted): retry after Retry-After")
NOT_JSON = problem("the body is not declared Content-Type: application/json")


def secured(answers: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    """A route's answers when it needs a bearer token: its own, and what any such route may answer (401; 403
    for a credential of no tenant unless the route says more; 429 past the tenant's request quota; 500; 503)."""
    return {**answers, 401: UNAUTHORIZED, 403: answers.get(403, NO_TENANT), 429: OVER_QUOTA,
            500: problem("an unexpected failure; safe to retry (with the same Idempotency-Key for a create)"),
            503: problem("contention on the job, or a failover to this Region adopting its jobs (writes); "
                         "retry after Retry-After")}


@cache
def _generated(app: ApiGatewayResolver) -> str:
    return app.get_openapi_json_schema()


def document(app: ApiGatewayResolver, job_types: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The document the resolver generates from the routes, without Powertools' own validation answer (the API
    answers a refusal as problem+json, declared by each route), with the job states' sets marked, and
    `job_types` (a deployment's) as the examples of a job's type (the status page offers them)."""
    served: dict[str, Any] = json.loads(_generated(app))
    schemas = served["components"]["schemas"]
    for name in POWERTOOLS_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    for item in served["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", ()):
                if parameter["in"] == "header":  # Powertools lowers a header's name; its title keeps the alias
                    parameter["name"] = parameter["schema"].get("title", parameter["name"])
            for status in BODILESS_STATUSES:  # Powertools gives every answer the route's return type as content
                operation["responses"].get(status, {}).pop("content", None)
            answer = operation["responses"].get("422", {})
            if "HTTPValidationError" in json.dumps(answer):
                del operation["responses"]["422"]
    schemas["JobState"]["x-terminal"] = sorted(TERMINAL_STATES)  # the statuses that never change again
    schemas["JobState"]["x-replayable"] = sorted(REPLAYABLE_STATES)  # the statuses an operator may replay
    schemas["JobState"]["x-waiting"] = sorted(CLAIMABLE_STATES)  # waiting for a worker: GET /jobs/{id}/explain says why
    # A batch's entries are checked one by one (a bad one refuses only itself), so its body's model names
    # BatchJob only in its schema: no route's signature brings it in.
    entry = BatchJob.model_json_schema(ref_template=REF_TEMPLATE)
    schemas.update(entry.pop("$defs", {}))
    schemas.setdefault("BatchJob", entry)
    # The paths in the order the routes were declared (Powertools lists the dynamic ones first).
    declared = [re.sub(r"<(\w+)>", r"{\1}", re.sub(r"^[A-Z]+", "", key)) for key in app._route_keys]
    served["paths"] = dict(sorted(served["paths"].items(), key=lambda item: declared.index(item[0])))
    if job_types:
        for name in ("NewJob", "BatchJob"):
            schemas[name]["properties"]["type"]["examples"] = sorted(job_types)
    return served

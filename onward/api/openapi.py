"""The OpenAPI document of the HTTP API (onward/api/routes/). The schemas are generated from the contract's
pydantic models (onward.api.contract, onward.domain.models), the same ones the API validates with and answers from;
the paths (routes, parameters, status codes) are written here, and tests/integration/api/test_api.py checks them
against the app's routes and every answer it gives."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from onward.api.contract import ANSWERS
from onward.api.contract.jobs import BatchCreate, BatchJob
from onward.api.contract.operators import BulkCancelRequest, BulkReplay, BulkReplayRequest
from onward.domain.models import NewJob
from onward.domain.schedules import NewSchedule
from onward.domain.states import CLAIMABLE_STATES, REPLAYABLE_STATES, TERMINAL_STATES
from onward.domain.text_patterns import (
    IDEMPOTENCY_KEY,
    JOB_ID,
    JOB_ID_PREFIX,
    JOB_TYPE,
    SCHEDULE_NAME,
    TENANT_ID,
    WEB_ASSET,
)

PROBLEM = {"$ref": "#/components/schemas/ProblemDetails"}
REF_TEMPLATE = "#/components/schemas/{model}"


def _schemas() -> dict[str, Any]:
    """Every body's schema, from its model: requests as validated, answers as serialized."""
    _, generated = models_json_schema([(NewJob, "validation"), (NewSchedule, "validation"), (BulkReplay, "validation"),
                                       (BatchJob, "validation"), (BatchCreate, "validation"),
                                       (BulkReplayRequest, "validation"), (BulkCancelRequest, "validation"),
                                       *((model, "serialization") for model in ANSWERS)],
                                      ref_template=REF_TEMPLATE)
    schemas: dict[str, Any] = generated["$defs"]
    schemas["JobState"]["x-terminal"] = sorted(TERMINAL_STATES)  # the statuses that never change again
    schemas["JobState"]["x-replayable"] = sorted(REPLAYABLE_STATES)  # the statuses an operator may replay
    schemas["JobState"]["x-waiting"] = sorted(CLAIMABLE_STATES)  # waiting for a worker: GET /jobs/{id}/explain says why
    schemas["TenantId"] = TENANT_ID.schema()
    return schemas


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": PROBLEM}}}


def _ok(description: str, schema: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


UNAUTHORIZED = _problem("no valid bearer token")
OPERATORS_ONLY = _problem("the credential is not an operator's")
EVERY_TENANT = _problem("the credential is not an operator's, or is an operator's bound to a tenant (this shows "
                        "every tenant's data)")
TENANT_QUERY = {"name": "tenant", "in": "query", "schema": {"$ref": "#/components/schemas/TenantId"},
                "description": "operators not bound to a tenant name the tenant; any other credential may only "
                               "name its own (403 otherwise)"}


def _limit_query(default: int = 20) -> dict[str, Any]:
    return {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100,
                                                        "default": default}}


def _bulk_operation(operation_id: str, body: str, answer: str, forbidden: str) -> dict[str, Any]:
    """A bulk action's route (POST /ops/bulk/...): a filter in, a BulkActionReport out."""
    return {"operationId": operation_id, "security": SECURED,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{body}"}}}},
            "responses": {"200": _ok(answer + "; at most max_jobs jobs a call (`more`: call again), acting for at "
                                     "most 20 s (`stopped`)", "BulkActionReport"),
                          "400": _problem("malformed JSON"), "401": UNAUTHORIZED, "403": _problem(forbidden),
                          "413": _problem("the body is over 256 KiB"),
                          "415": _problem("the body is not declared Content-Type: application/json"),
                          "422": _problem("a bad filter (unknown fields, a state the action does not act on, "
                                          "until before since, a time without a zone): nothing was done")}}


NOT_FOUND = _problem("no such job for this tenant (another tenant's job is answered the same way)")
JOB_ID_PATH = {"name": "job_id", "in": "path", "required": True, "schema": JOB_ID.schema()}
SECURED: list[dict[str, list[str]]] = [{"bearer": []}]

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Onward", "version": "1.0.0",
             "description": "Background jobs: submit, watch (status view with freshness), cancel, replay."},
    "paths": {
        "/health": {"get": {"operationId": "health", "security": [], "responses": {
            "200": _ok("the API answers", "Health")}}},
        "/openapi.json": {"get": {"operationId": "openapi", "security": [], "responses": {
            "200": {"description": "this document", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/": {"get": {"operationId": "statusPage", "security": [], "responses": {
            "200": {"description": "the status page (HTML; its scripts and styles are under /web/)",
                    "content": {"text/html": {"schema": {"type": "string"}}}}}},
              "post": {"operationId": "statusPageForm", "security": [], "responses": {
                  "303": {"description": "the page again (Location: /): a form of the page submitted before its "
                                         "scripts took it over; the body is not read",
                          "headers": {"Location": {"schema": {"type": "string"}}}}}}},
        "/web/{name}": {"get": {
            "operationId": "statusPageAsset", "security": [],
            "parameters": [{"name": "name", "in": "path", "required": True,
                            "schema": WEB_ASSET.schema()}],
            "responses": {"200": {"description": "a static file of the status page",
                                  "content": {"text/javascript": {"schema": {"type": "string"}},
                                              "text/css": {"schema": {"type": "string"}},
                                              "image/svg+xml": {"schema": {"type": "string"}}}},
                          "404": _problem("no such file")}}},
        "/view": {"get": {"operationId": "viewLag", "security": SECURED, "responses": {
            "200": _ok("how far behind the status view may be right now", "ViewLag"),
            "401": UNAUTHORIZED}}},
        "/jobs": {
            "post": {
                "operationId": "createJob", "security": SECURED,
                "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                                "description": "a retry with the same key and body returns the first answer",
                                "schema": IDEMPOTENCY_KEY.schema()}],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/NewJob"}}}},
                "responses": {
                    "200": _ok("an earlier request with this Idempotency-Key created the job; nothing new",
                               "Accepted"),
                    "202": _ok("the job is queued", "Accepted"),
                    "400": _problem("malformed JSON (NaN and Infinity included, or nested too deeply) or an "
                                    "invalid Idempotency-Key"),
                    "401": UNAUTHORIZED,
                    "403": _problem("the credential names no tenant (an operator token)"),
                    "409": _problem("the Idempotency-Key was used for a different request"),
                    "413": _problem("the body is over 256 KiB, or params over 300,000 bytes as JSON"),
                    "415": _problem("the body is not declared Content-Type: application/json"),
                    "422": _problem("unknown fields, wrong types, params DynamoDB cannot store, or an unknown "
                                    "job type; `errors` lists each place and why"),
                },
            },
            "get": {
                "operationId": "listJobs", "security": SECURED,
                "parameters": [
                    TENANT_QUERY,
                    {"name": "status", "in": "query", "style": "form", "explode": False,
                     "description": "only jobs in one of these statuses (a comma list)",
                     "schema": {"type": "array", "minItems": 1,
                                "items": {"$ref": "#/components/schemas/JobState"}}},
                    {"name": "type", "in": "query", "description": "only jobs of this type",
                     "schema": JOB_TYPE.schema()},
                    {"name": "id_prefix", "in": "query", "description": "only jobs whose id starts with this",
                     "schema": JOB_ID_PREFIX.schema()},
                    _limit_query(),
                    {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 2048},
                     "description": "opaque; the `cursor` of the previous page (filters are not in it: send the "
                                    "same ones)"},
                ],
                "responses": {"200": _ok("the tenant's jobs from the status view, newest first; a filtered page "
                                         "can be short or empty with a `cursor` to search further", "JobPage"),
                              "400": _problem("bad limit, status, type, id_prefix, tenant or cursor, or an operator "
                                              "without ?tenant="),
                              "401": UNAUTHORIZED,
                              "403": _problem("a tenant's credential named another tenant")},
            },
        },
        "/jobs/batch": {"post": {
            "operationId": "createJobs", "security": SECURED,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/BatchCreate"}}}},
            "responses": {
                "200": _ok("each entry's answer in the order sent, as POST /jobs would give it: 202 created, 200 "
                           "found by its idempotency_key, or its problem (409 key used for another job, 413 params "
                           "too large, 422 invalid or of an unknown type with `errors` placed under "
                           "[\"jobs\", index], 503 contended); a refused entry refuses only itself", "BatchCreated"),
                "400": _problem("malformed JSON, or an Idempotency-Key header (each entry takes its own "
                                "idempotency_key)"),
                "401": UNAUTHORIZED,
                "403": _problem("the credential names no tenant (an operator token)"),
                "413": _problem("the body is over 256 KiB"),
                "415": _problem("the body is not declared Content-Type: application/json"),
                "422": _problem("not an object whose `jobs` is a list of 1 to 100 objects: nothing was created"),
            }}},
        "/jobs/counts": {"get": {
            "operationId": "countJobs", "security": SECURED,
            "parameters": [TENANT_QUERY, {"name": "type", "in": "query", "description": "only jobs of this type",
                                          "schema": JOB_TYPE.schema()}],
            "responses": {"200": _ok("the tenant's jobs per status in the status view (its index), over its "
                                     "newest 10,000", "StatusCounts"),
                          "400": _problem("bad type or tenant, or an operator without ?tenant="),
                          "401": UNAUTHORIZED,
                          "403": _problem("a tenant's credential named another tenant")}}},
        "/whoami": {"get": {"operationId": "whoami", "security": SECURED, "responses": {
            "200": _ok("the tenant and role of this credential", "Caller"), "401": UNAUTHORIZED}}},
        "/jobs/{job_id}": {"get": {
            "operationId": "getJob", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"200": {
                "description": "the job's status from the status view with its freshness (`visible: true`), or, "
                               "while the view has not seen the job yet, no status and the view's lag "
                               "(`visible: false`): never an older status than one answered before",
                "content": {"application/json": {"schema": {
                    "oneOf": [{"$ref": "#/components/schemas/JobStatus"},
                              {"$ref": "#/components/schemas/PendingJob"}],
                    "discriminator": {"propertyName": "visible"}}}}},
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/runs": {"get": {
            "operationId": "getJobRuns", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"200": _ok("one record per attempt, from the authoritative table", "Runs"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/params": {"get": {
            "operationId": "getJobParams", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"200": _ok("what the job was created with (the job table; it never changes)",
                                     "JobParams"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/explain": {"get": {
            "operationId": "explainJob", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"200": _ok("why the job is not running and until when: scheduled, backoff, "
                                     "tenant_at_cap, no_worker or waiting_for_share with an ETA from its tenant's "
                                     "recent claims; `running` or `finished` for a job that is not waiting (200 "
                                     "too: nothing is wrong with asking)", "JobExplanation"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"202": _ok("cancelled, or cancel requested (a running job stops at its next heartbeat)",
                                     "CancelAccepted"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND,
                          "409": _problem("already completed")}}},
        "/jobs/{job_id}/replay": {"post": {
            "operationId": "replayJob", "security": SECURED, "parameters": [JOB_ID_PATH],
            "responses": {"202": _ok("queued again as a new version", "Accepted"),
                          "401": UNAUTHORIZED, "403": _problem("operators only"), "404": NOT_FOUND,
                          "409": _problem("only dead or quarantined jobs replay")}}},
        "/ops/replay": {"post": {
            "operationId": "replayJobs", "security": SECURED,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/BulkReplay"}}}},
            "responses": {"200": _ok("each job's answer, as its own replay route gives it (202, 404, 409, 503); "
                                     "an operator bound to a tenant replays only that tenant's", "BulkReplayed"),
                          "400": _problem("malformed JSON"), "401": UNAUTHORIZED, "403": OPERATORS_ONLY,
                          "413": _problem("the body is over 256 KiB"),
                          "415": _problem("the body is not declared Content-Type: application/json"),
                          "422": _problem("not 1 to 100 distinct job ids, or unknown fields: nothing was replayed")}}},
        "/ops/bulk/replay": {"post": _bulk_operation(
            "bulkReplay", "BulkReplayRequest",
            "the report: with dry_run (the default) the matching dead and quarantined jobs counted, a sample, "
            "nothing changed; else each replayed through the store's replay, what it refused skipped with the "
            "reason", "not an operator, or an operator bound to another tenant than `tenant`")},
        "/ops/bulk/cancel": {"post": _bulk_operation(
            "bulkCancel", "BulkCancelRequest",
            "the report: with dry_run (the default) the tenant's matching waiting and running jobs counted, a "
            "sample, nothing changed; else waiting ones cancelled, running ones asked to stop, those that ended "
            "meanwhile skipped with the reason", "not an operator, or an operator bound to another tenant")},
        "/ops/replayable": {"get": {
            "operationId": "replayableJobs", "security": SECURED, "parameters": [TENANT_QUERY, _limit_query()],
            "responses": {"200": _ok("dead and quarantined jobs from the status view, newest first, up to "
                                     "`limit` per tenant", "ReplayableJobs"),
                          "400": _problem("bad limit or tenant"), "401": UNAUTHORIZED,
                          "403": _problem("not an operator, or an operator bound to another tenant")}}},
        "/ops/tenants": {"get": {
            "operationId": "tenantLoads", "security": SECURED,
            "responses": {"200": _ok("every tenant's weight, cap, running and waiting jobs, and its claims "
                                     "minute by minute over the last 5 minutes", "Tenants"),
                          "401": UNAUTHORIZED, "403": EVERY_TENANT}}},
        "/ops/lag": {"get": {
            "operationId": "pipelineLag", "security": SECURED,
            "responses": {"200": _ok("the status view's lag per events-stream shard, and the relay's",
                                     "PipelineLag"),
                          "401": UNAUTHORIZED, "403": OPERATORS_ONLY}}},
        "/ops/parked": {"get": {
            "operationId": "parkedRecords", "security": SECURED,
            "parameters": [{"name": "source", "in": "query", "schema": {"enum": ["projector", "relay"]}},
                           _limit_query()],
            "responses": {"200": _ok("stream records the relay or the projector could not read, with why",
                                     "ParkedRecords"),
                          "400": _problem("bad source or limit"), "401": UNAUTHORIZED, "403": EVERY_TENANT}}},
        "/ops/conflicts": {"get": {
            "operationId": "projectionConflicts", "security": SECURED, "parameters": [_limit_query()],
            "responses": {"200": _ok("same-version events the projector kept apart, with the fields that differ",
                                     "Conflicts"),
                          "400": _problem("bad limit"), "401": UNAUTHORIZED, "403": EVERY_TENANT}}},
        "/schedules": {
            "post": {
                "operationId": "createSchedule", "security": SECURED, "parameters": [TENANT_QUERY],
                "description": "A periodic job: each fire creates exactly one job of the tenant (Idempotency-Key "
                               "`schedule:<name>:<created_at>:<fire time>`, so two schedulers never double-fire), "
                               "queued when the fire is due, never ahead, and claimed in the tenant's fair share "
                               "like any other. After an outage only the LATEST missed fire is created (no "
                               "catch-up storm); the schedule then waits for its next fire. Cron is evaluated on "
                               "the wall clock of `timezone`: a time skipped by a daylight-saving jump fires once "
                               "at the moment it maps to, a time that occurs twice fires at its first occurrence.",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/NewSchedule"}}}},
                "responses": {
                    "201": _ok("the schedule, with its next fire time", "ScheduleInfo"),
                    "400": _problem("malformed JSON, a bad ?tenant=, or an operator without ?tenant="),
                    "401": UNAUTHORIZED,
                    "403": _problem("a tenant's credential named another tenant"),
                    "409": _problem("the tenant has a schedule of this name, or 1,000 schedules (delete one first)"),
                    "413": _problem("the body is over 256 KiB, or `params` over 16 KiB as compact JSON with non-ASCII "
                                    "characters escaped"),
                    "415": _problem("the body is not declared Content-Type: application/json"),
                    "422": _problem("unknown fields, a bad name, cron, rate or timezone, both cron and rate or "
                                    "neither, or an unknown job type; `errors` lists each place and why"),
                },
            },
            "get": {
                "operationId": "listSchedules", "security": SECURED,
                "parameters": [TENANT_QUERY, _limit_query(),
                               {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 2048},
                                "description": "opaque; the `cursor` of the previous page"}],
                "responses": {"200": _ok("a page of the tenant's schedules by name, each with its next fire time, "
                                         "and the `cursor` of the next page (null: the last)", "Schedules"),
                              "400": _problem("bad tenant, limit or cursor, or an operator without ?tenant="),
                              "401": UNAUTHORIZED,
                              "403": _problem("a tenant's credential named another tenant")},
            },
        },
        "/schedules/{name}": {"delete": {
            "operationId": "deleteSchedule", "security": SECURED,
            "parameters": [{"name": "name", "in": "path", "required": True,
                            "schema": SCHEDULE_NAME.schema()}, TENANT_QUERY],
            "responses": {"204": {"description": "deleted: it fires no more (a tick already under way may still "
                                                 "create the one fire it read)"},
                          "400": _problem("bad tenant, or an operator without ?tenant="),
                          "401": UNAUTHORIZED,
                          "403": _problem("a tenant's credential named another tenant"),
                          "404": _problem("no schedule of this name for this tenant")}}},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": _schemas(),
    },
}

for _item in DOCUMENT["paths"].values():
    for _operation in _item.values():
        if _operation["security"]:
            _operation["responses"].setdefault("403", _problem(
                "the credential names no valid tenant and gives no operator role (a JWT whose tenant claim is "
                "missing or not a tenant id)"))
            _operation["responses"]["500"] = _problem("an unexpected failure; safe to retry (with the same "
                                                      "Idempotency-Key for a create)")
            _operation["responses"]["503"] = _problem("contention on the job; retry after Retry-After")


def document(job_types: frozenset[str]) -> dict[str, Any]:
    """The document as served: DOCUMENT with this deployment's job types as the examples of a job's type
    (the status page offers them)."""
    served = {**DOCUMENT, "components": {**DOCUMENT["components"], "schemas": dict(DOCUMENT["components"]["schemas"])}}
    for name in ("NewJob", "BatchJob"):
        new_job = served["components"]["schemas"][name]
        properties = {**new_job["properties"], "type": {**new_job["properties"]["type"], "examples": sorted(job_types)}}
        served["components"]["schemas"][name] = {**new_job, "properties": properties}
    return served

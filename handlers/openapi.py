"""The OpenAPI document of the HTTP API (handlers/api.py), written by hand to say exactly what the code
answers; tests/integration/test_api.py checks routes and status codes against the running API."""

from __future__ import annotations

from typing import Any

PROBLEM = {"$ref": "#/components/schemas/Problem"}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": PROBLEM}}}


def _ok(description: str, schema: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


UNAUTHORIZED = _problem("no valid bearer token")
NOT_FOUND = _problem("no such job for this tenant (another tenant's job is answered the same way)")
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}
SECURED = [{"bearer": []}]

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Onward", "version": "1.0.0",
             "description": "Background jobs: submit, watch (status view with freshness), cancel, replay."},
    "paths": {
        "/health": {"get": {"operationId": "health", "security": [], "responses": {
            "200": {"description": "the API answers",
                    "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/openapi.json": {"get": {"operationId": "openapi", "security": [], "responses": {
            "200": {"description": "this document", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/": {"get": {"operationId": "statusPage", "security": [], "responses": {
            "200": {"description": "the status page (HTML; its scripts and styles are under /web/)",
                    "content": {"text/html": {"schema": {"type": "string"}}}}}}},
        "/web/{name}": {"get": {
            "operationId": "statusPageAsset", "security": [],
            "parameters": [{"name": "name", "in": "path", "required": True,
                            "schema": {"type": "string", "pattern": "^[a-z0-9-]+\\.(js|css|svg)$"}}],
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
                                "schema": {"type": "string", "pattern": "^[ -~]{1,128}$"}}],
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
                    {"name": "tenant", "in": "query", "schema": {"$ref": "#/components/schemas/TenantId"},
                     "description": "operators not bound to a tenant name the tenant to list; any other "
                                    "credential may only name its own (403 otherwise)"},
                    {"name": "status", "in": "query", "schema": {"$ref": "#/components/schemas/Status"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100,
                                                                 "default": 20}},
                    {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 2048},
                     "description": "opaque; the `cursor` of the previous page"},
                ],
                "responses": {"200": _ok("the tenant's jobs from the status view, newest first", "JobPage"),
                              "400": _problem("bad limit, status or cursor, or an operator without ?tenant="),
                              "401": UNAUTHORIZED,
                              "403": _problem("a tenant's credential named another tenant")},
            },
        },
        "/jobs/{job_id}": {"get": {
            "operationId": "getJob", "security": SECURED, "parameters": [JOB_ID],
            "responses": {"200": _ok("the job's status with its freshness", "JobStatus"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/runs": {"get": {
            "operationId": "getJobRuns", "security": SECURED, "parameters": [JOB_ID],
            "responses": {"200": _ok("one record per attempt, from the authoritative table", "Runs"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND}}},
        "/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "security": SECURED, "parameters": [JOB_ID],
            "responses": {"202": _ok("cancelled, or cancel requested (a running job stops at its next heartbeat)",
                                     "CancelAccepted"),
                          "401": UNAUTHORIZED, "404": NOT_FOUND,
                          "409": _problem("already completed")}}},
        "/jobs/{job_id}/replay": {"post": {
            "operationId": "replayJob", "security": SECURED, "parameters": [JOB_ID],
            "responses": {"202": _ok("queued again as a new version", "Accepted"),
                          "401": UNAUTHORIZED, "403": _problem("operators only"), "404": NOT_FOUND,
                          "409": _problem("only dead or quarantined jobs replay")}}},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Status": {"type": "string", "enum": ["queued", "running", "retry_wait", "succeeded", "dead",
                                                  "cancelled", "quarantined"]},
            "Problem": {"type": "object", "required": ["type", "title", "status", "detail"], "properties": {
                "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
                "detail": {"type": "string"}}},
            "TenantId": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
            "NewJob": {"type": "object", "additionalProperties": False, "required": ["type"], "properties": {
                "type": {"type": "string", "maxLength": 128, "pattern": "^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$",
                         "description": "one of the deployment's job types (422 names them)"},
                "params": {"type": "object", "propertyNames": {"minLength": 1},
                           "description": "stored as a DynamoDB map, so within DynamoDB's rules: at most "
                                          "300,000 bytes as JSON, nesting at most 31 levels below params, "
                                          "numbers of at most 38 significant digits with a magnitude from "
                                          "1e-130 to below 1e126 (no NaN or Infinity), valid Unicode "
                                          "strings, no empty keys"},
                "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
                "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 0}}},
            "Accepted": {"type": "object", "required": ["job_id", "status", "version"], "properties": {
                "job_id": {"type": "string"}, "status": {"$ref": "#/components/schemas/Status"},
                "version": {"type": "integer"}}},
            "CancelAccepted": {"type": "object", "required": ["job_id", "status", "version"], "properties": {
                "job_id": {"type": "string"}, "status": {"type": "string", "enum": ["cancelled", "cancel_requested"]},
                "version": {"type": "integer"}}},
            "Freshness": {"type": "object", "required": ["as_of", "age_s", "view_lag_s", "stale"], "properties": {
                "as_of": {"type": "string", "format": "date-time"}, "age_s": {"type": "number"},
                "view_lag_s": {"type": ["number", "null"]}, "watermark": {"type": ["string", "null"]},
                "stale": {"type": "boolean"}}},
            "JobStatus": {"type": "object",
                          "required": ["job_id", "type", "status", "version", "attempt", "updated_at", "freshness"],
                          "properties": {
                              "job_id": {"type": "string"}, "type": {"type": "string"},
                              "status": {"$ref": "#/components/schemas/Status"}, "version": {"type": "integer"},
                              "attempt": {"type": "integer"}, "cancel_requested": {"type": "boolean"},
                              "updated_at": {"type": "string", "format": "date-time"},
                              "result": {"type": "object"}, "error": {"type": "object"},
                              "source": {"type": "string", "enum": ["view", "job_table"],
                                         "description": "job_table: the view has not seen the job yet"},
                              "freshness": {"$ref": "#/components/schemas/Freshness"}}},
            "ViewLag": {"type": "object",
                        "required": ["measured_at", "view_lag_s", "watermark", "stale", "stale_after_s", "shards"],
                        "properties": {
                            "measured_at": {"type": "string", "format": "date-time",
                                            "description": "when this lag was measured"},
                            "view_lag_s": {"type": ["number", "null"],
                                           "description": "upper bound of how far behind the view is"},
                            "watermark": {"type": ["string", "null"], "format": "date-time",
                                          "description": "the view is complete up to this commit time"},
                            "stale": {"type": "boolean"}, "stale_after_s": {"type": "number"},
                            "shards": {"type": "integer"}}},
            "JobPage": {"type": "object", "required": ["jobs", "cursor", "view"], "properties": {
                "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/JobStatus"}},
                "cursor": {"type": ["string", "null"]},
                "view": {"$ref": "#/components/schemas/ViewLag"}}},
            "Runs": {"type": "object", "required": ["job_id", "runs"], "properties": {
                "job_id": {"type": "string"}, "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}}},
            "Run": {"type": "object", "required": ["job_id", "attempt", "worker_id", "claimed_at", "lease_expires_at"],
                    "properties": {
                        "job_id": {"type": "string"}, "attempt": {"type": "integer", "minimum": 1},
                        "worker_id": {"type": "string"},
                        "claimed_at": {"type": "string", "format": "date-time"},
                        "lease_expires_at": {"type": "string", "format": "date-time"},
                        "finished_at": {"type": ["string", "null"], "format": "date-time"},
                        "outcome": {"type": ["string", "null"], "enum": [
                            "succeeded", "failed", "lease_expired", "released", "cancelled", "fenced", None]},
                        "error": {"type": ["object", "null"]},
                        "reclaimed_as": {"type": ["string", "null"]}, "late_report": {"type": ["string", "null"]},
                        "late_report_at": {"type": ["string", "null"], "format": "date-time"}}},
        },
    },
}

for _item in DOCUMENT["paths"].values():
    for _operation in _item.values():
        if _operation["security"]:
            _operation["responses"]["500"] = _problem("an unexpected failure; safe to retry (with the same "
                                                      "Idempotency-Key for a create)")
            _operation["responses"]["503"] = _problem("contention on the job; retry after Retry-After")

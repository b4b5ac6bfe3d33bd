"""Lambda entry point for the HTTP API (API Gateway HTTP API, payload 2.0); the local gateway
(infra/onward_infra/gateway.py) invokes the same `handler` with the same event shape.

The resolver, the routers it includes and how a refusal is answered; the routes are in onward/api/routes/, one
router per area, each typed with its parameters and body model: the resolver validates every request against
them (after the route's access: onward.api.routing) and generates the OpenAPI document from them
(onward.api.openapi). Thin: authenticate, let the resolver parse the request at the edge (pydantic, extra fields
refused), call the core (JobStore, StatusViewReader, CheckpointStore, onward.domain.freshness), shape the
response (onward.api.answers). The authenticator, the known job types and the core are the environment's
ApiDeployment's (onward/bootstrap.py: clients with short timeouts and 3 attempts, to answer within API
Gateway's 29 s), built once. Errors are application/problem+json. Tokens are never logged (the event is not
logged at all).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from onward.api.answers import Problem, problem_of
from onward.api.observability import logger, metrics, tracer
from onward.api.openapi import configure, document
from onward.api.request import invalid_request
from onward.api.routes import about, job_types, jobs, ops, page, pauses, rate_limits, schedules, webhooks
from onward.api.routing import WholePathResolver
from onward.domain.errors import (
    ConcurrencyLimitReached,
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    PayloadTooLarge,
    StoreContention,
    UniqueKeyHeld,
)
from onward.observability.otlp import exports_after_invocation
from onward.telemetry import discard_unflushed

app = WholePathResolver()
configure(app)
# Each router's routes go through the resolver's own route compile (whole-path matching). A static route is tried
# before every dynamic one (POST /jobs/batch before POST /jobs/<job_id>/...), the dynamic ones in this order.
app.include_router(about.router)
app.include_router(page.router)
app.include_router(jobs.router)
app.include_router(ops.router)
app.include_router(schedules.router)
app.include_router(webhooks.router)  # completion webhooks (issue 38)
app.include_router(rate_limits.router)  # rate limits (issue 37)
app.include_router(job_types.router)  # retry policies per job type (issue 37)
app.include_router(pauses.router)  # pause, resume and the drain switch (issue 37)


# --- error mapping ----------------------------------------------------------------------------------------------

ProblemHandler = TypeVar("ProblemHandler", bound=Callable[[Any], Response[str]])


def _handles(*error_classes: type[Exception]) -> Callable[[ProblemHandler], ProblemHandler]:
    """`app.exception_handler(error_classes)`, typed (Powertools leaves it unannotated): registers the
    decorated function as the answer to each of `error_classes` and returns it unchanged."""
    register: Callable[[ProblemHandler], ProblemHandler] = app.exception_handler(list(error_classes))
    return register


@_handles(Problem)
def _problem(error: Problem) -> Response[str]:
    return error.response()


@_handles(RequestValidationError)
def _invalid_request(error: RequestValidationError) -> Response[str]:
    return invalid_request(error.errors(), app.context.get("_route_args", {}), app.current_event.path).response()


@_handles(JobNotFound, IdempotencyConflict, NotReplayable, PayloadTooLarge, InvalidRequest, StoreContention,
          UniqueKeyHeld, ConcurrencyLimitReached)
def _core_error(error: JobNotFound | IdempotencyConflict | NotReplayable | PayloadTooLarge | InvalidRequest
                | StoreContention | UniqueKeyHeld | ConcurrencyLimitReached) -> Response[str]:
    return problem_of(error).response()


@app.not_found
def _route_not_found(error: Exception) -> Response[str]:
    allowed = _methods_allowed(app.current_event.path)
    if allowed:
        return Problem(405, "Method not allowed", f"{app.current_event.http_method} is not allowed here; "
                       f"allowed: {', '.join(allowed)}", headers={"Allow": ", ".join(allowed)}).response()
    return Problem(404, "Not found", "no such route", slug="route-not-found").response()


def _methods_allowed(path: str) -> list[str]:
    """The methods of the routes that match this path (for a 405's Allow header)."""
    routes = [*app._static_routes, *app._dynamic_routes]  # the resolver's own table: no second copy
    return sorted({route.method for route in routes if route.rule.match(path)})


@_handles(Exception)
def _unexpected(error: Exception) -> Response[str]:
    logger.exception("unhandled error", extra={"route": app.current_event.path})
    # What ApiUnhandledErrorsAlarm reads, and with it the gradual deployment's rollback: an answered 500 is no
    # invocation error, so the function's Errors metric never sees a route that fails on every request.
    metrics.add_metric(name="ApiUnhandledErrors", unit=MetricUnit.Count, value=1)
    return Problem(500, "Internal error", "the request failed; it is safe to retry with the same "
                   "Idempotency-Key").response()


# Lambda runs one invocation per execution environment at a time, and Powertools relies on it: the resolver
# keeps the current event on a class attribute (BaseRouter.current_event) and the logger keeps the
# correlation id, both shared by every thread. A threaded server in one process (the local gateway) would
# otherwise answer one request with another's headers, body or credential.
_one_invocation_at_a_time = threading.Lock()


@exports_after_invocation  # trace context (issue 38): OpenTelemetry's spans and metrics, when OTLP is on
@discard_unflushed(metrics)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)  # responses hold tenant data: keep them out of traces
@logger.inject_lambda_context(log_event=False, correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def _invoke(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with _one_invocation_at_a_time:
        response: dict[str, Any] = _invoke(event, context)  # app.resolve's answer (Powertools' decorators: Any)
        return response


def openapi_document(job_types: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The OpenAPI document the resolver generates from this app's routes (onward.api.openapi.document), with
    `job_types` as the examples of a job's type."""
    return document(app, job_types)


__all__ = ["app", "handler", "logger", "openapi_document"]

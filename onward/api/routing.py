"""The HTTP API's routing: Powertools' resolver for API Gateway's HTTP API, validating each request against its
route's typed signature, with each route matched WHOLE, and the routers of its areas (onward/api/routes/), which
the resolver includes.

Powertools compiles a route to `^/schedules/(?P<name>[...]+)$` and calls `.match(path)`; Python's `$` also
matches before a final newline, so `/schedules/keep-me%0A` (decoded to end in "\\n") was routed as
`/schedules/keep-me` with `name` "keep-me": the DELETE deleted keep-me. `\\Z` matches at the very end only, so
such a path matches no route (404), as onward.domain.text_patterns matches every identifier.

Who may call a route comes before what the request holds: a route's dependencies (`Depends`: the caller, its
role, the tenant it acts for) are resolved before Powertools validates the request's parameters and body, so a
request without a credential is answered 401 before anything tells it about the shape the route expects. Then a
write is refused 503 while this Region adopts a failover's jobs (onward.api.failover_gate), before its shape is
read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import _DEPENDS_CACHE_KEY, Route
from aws_lambda_powertools.event_handler.depends import (
    DependencyResolutionError,
    DependencyTree,
    build_dependency_tree,
    solve_dependencies,
)
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from aws_lambda_powertools.event_handler.types import EventHandlerInstance

from onward.api.bodies import json_body
from onward.api.failover_gate import refuse_writes_while_adopting
from onward.bootstrap import ApiDeployment

WHOLE_PATH = r"^{}\Z"  # Powertools' route template (its own is "^{}$")


@cache
def _dependencies(handler: Callable[..., Any]) -> DependencyTree:
    return build_dependency_tree(handler)


class AccessThenValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, after the route's dependencies (who may call it, for which tenant), and
    reading a body as the API reads every body (onward.api.bodies: 415, 413, 400 before the model's 422)."""

    def handler(self, app: EventHandlerInstance, next_middleware: NextMiddleware) -> Response[Any]:
        route: Route = app.context["_route"]
        # Resolved into the request's dependency cache, where the route's own resolution finds them.
        cached = app.context.setdefault(_DEPENDS_CACHE_KEY, {})
        try:
            solve_dependencies(dependant=_dependencies(route.func), request=app.request,
                               dependency_overrides=app.dependency_overrides or None, dependency_cache=cached)
        except DependencyResolutionError as error:
            raise _refusal(error) from None
        refuse_writes_while_adopting(app.current_event.http_method, ApiDeployment.from_environment())  # issue 39
        answer: Response[Any] = super().handler(app, next_middleware)
        return answer

    def _get_body(self, app: EventHandlerInstance) -> Any:
        return json_body(app.current_event)


def _refusal(error: BaseException) -> BaseException:
    """What a dependency raised (Powertools wraps it once per level of dependencies)."""
    while isinstance(error, DependencyResolutionError) and error.__cause__ is not None:
        error = error.__cause__
    return error


class WholePathResolver(APIGatewayHttpResolver):
    """APIGatewayHttpResolver whose routes match a whole path (as Powertools' REST resolver overrides the same
    method for trailing slashes) and whose requests are validated after their access (AccessThenValidation); its
answers are not validated again."""

    def __init__(self) -> None:
        super().__init__(debug=False, enable_validation=True)
        validation: Callable[[], AccessThenValidation] = AccessThenValidation  # Powertools' __init__: unannotated
        self._request_validation_middleware = validation()
        # Every answer is built from a contract model (onward.api.answers.json_answer) and leaves its route as
        # text: Powertools' response validation would only check that the text is a str.
        del self._response_validation_middleware

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = WHOLE_PATH) -> re.Pattern[str]:
        compiled: re.Pattern[str] = APIGatewayHttpResolver._compile_regex(rule, base_regex)
        return compiled


def new_router() -> APIGatewayHttpRouter:
    """A router for one area's routes; `app.include_router` compiles them again with the resolver's own
    `_compile_regex`, so they too match whole paths. (A constructor typed here: Powertools leaves
    Router.__init__ unannotated.)"""
    make: Callable[[], APIGatewayHttpRouter] = APIGatewayHttpRouter
    return make()

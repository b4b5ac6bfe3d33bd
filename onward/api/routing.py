"""The HTTP API's routing: Powertools' resolver for API Gateway's HTTP API, with each route matched WHOLE, and
the routers of its areas (onward/api/routes/), which the resolver includes.

Powertools compiles a route to `^/schedules/(?P<name>[...]+)$` and calls `.match(path)`; Python's `$` also
matches before a final newline, so `/schedules/keep-me%0A` (decoded to end in "\\n") was routed as
`/schedules/keep-me` with `name` "keep-me": the DELETE deleted keep-me. `\\Z` matches at the very end only, so
such a path matches no route (404), as onward.domain.text_patterns matches every identifier.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

WHOLE_PATH = r"^{}\Z"  # Powertools' route template (its own is "^{}$")


class WholePathResolver(APIGatewayHttpResolver):
    """APIGatewayHttpResolver whose routes match a whole path (as Powertools' REST resolver overrides the same
    method for trailing slashes)."""

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

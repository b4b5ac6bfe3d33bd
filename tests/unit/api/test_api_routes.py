"""Which route answers a request, through the resolver's own matching (Powertools: a static route before every
dynamic one, the dynamic ones in the order the app includes its routers), pinned for the paths where the areas'
routes overlap: /jobs/batch and /jobs/counts beside /jobs/<job_id>, a job id that names a route's last segment,
the page's / beside every other route, a path ending in a newline.

How it breaks: were the job routes registered so that a dynamic route came first for a path a static one also
matches (e.g. by an override of the resolver's matching, or a router included with a prefix), POST /jobs/batch
would be a job id's or GET /jobs/counts a job's read; were a route left out of the app's routers, its path
would answer 404 or 405 here. The table is the matching of the API before its routes were split by area."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Route

from onward.api import app as api
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext

JOBS, OPS, SCHEDULES, PAGE, ABOUT = (f"onward.api.routes.{area}" for area in
                                     ("jobs", "ops", "schedules", "page", "about"))
WEBHOOKS = "onward.api.routes.webhooks"
RATE_LIMITS = "onward.api.routes.rate_limits"
PAUSES = "onward.api.routes.pauses"  # issue 37: pause
# (method, path) -> the route's function ("module:name"), or the status and Allow header of no route's answer
MATCHES: dict[tuple[str, str], str | tuple[int, str | None]] = {
    ("POST", "/jobs/batch"): f"{JOBS}:create_jobs",
    ("GET", "/jobs/batch"): f"{JOBS}:get_job",  # a job id like any other, answered 404 by its read
    ("DELETE", "/jobs/batch"): (405, "GET, POST"),
    ("GET", "/jobs/counts"): f"{JOBS}:count_jobs",
    ("POST", "/jobs/counts"): (405, "GET"),
    ("GET", "/jobs/counts/runs"): f"{JOBS}:job_runs",
    ("POST", "/jobs/batch/cancel"): f"{JOBS}:cancel_job",
    ("POST", "/jobs/counts/replay"): f"{JOBS}:replay_job",
    ("GET", "/jobs/batch/explain"): f"{JOBS}:explain_job",
    ("GET", "/jobs/abc/params"): f"{JOBS}:job_params",
    ("GET", "/jobs"): f"{JOBS}:list_jobs",
    ("POST", "/jobs"): f"{JOBS}:create_job",
    ("GET", "/jobs/"): (404, None),
    ("GET", "/jobs/a/b"): (404, None),
    ("GET", "/jobs/batch\n"): (404, None),
    ("GET", "/"): f"{PAGE}:status_page",
    ("POST", "/"): f"{PAGE}:status_page_form",
    ("DELETE", "/"): (405, "GET, POST"),
    ("GET", "/web/app.js"): f"{PAGE}:status_page_asset",
    ("GET", "/web/"): (404, None),
    ("GET", "/health"): f"{ABOUT}:health",
    ("GET", "/openapi.json"): f"{ABOUT}:openapi",
    ("GET", "/whoami"): f"{ABOUT}:whoami",
    ("GET", "/view"): f"{ABOUT}:view_health",
    ("POST", "/view"): (405, "GET"),
    ("POST", "/ops/replay"): f"{OPS}:replay_jobs",
    ("POST", "/ops/bulk/replay"): f"{OPS}:bulk_replay",
    ("POST", "/ops/bulk/cancel"): f"{OPS}:bulk_cancel",
    ("GET", "/ops/replayable"): f"{OPS}:replayable_jobs",
    ("GET", "/ops/tenants"): f"{OPS}:tenant_loads",
    ("GET", "/ops/lag"): f"{OPS}:pipeline_lag",
    ("GET", "/ops/parked"): f"{OPS}:parked_records",
    ("GET", "/ops/conflicts"): f"{OPS}:projection_conflicts",
    ("GET", "/ops/bulk/replay"): (405, "POST"),
    ("POST", "/schedules"): f"{SCHEDULES}:create_schedule",
    ("GET", "/schedules"): f"{SCHEDULES}:list_schedules",
    ("DELETE", "/schedules/nightly"): f"{SCHEDULES}:delete_schedule",
    ("DELETE", "/schedules/keep-me\n"): (404, None),
    ("GET", "/schedules/nightly"): (405, "DELETE"),
    # completion webhooks (issue 38)
    ("POST", "/webhooks"): f"{WEBHOOKS}:create_webhook",
    ("GET", "/webhooks"): f"{WEBHOOKS}:list_webhooks",
    ("GET", f"/webhooks/wh_{'a' * 24}"): f"{WEBHOOKS}:get_webhook",
    ("DELETE", f"/webhooks/wh_{'a' * 24}"): f"{WEBHOOKS}:delete_webhook",
    ("GET", f"/webhooks/wh_{'a' * 24}/deliveries"): f"{WEBHOOKS}:list_deliveries",
    ("POST", f"/webhooks/wh_{'a' * 24}/deliveries/{'b' * 32}/redeliver"): f"{WEBHOOKS}:redeliver_webhook",
    ("PUT", f"/webhooks/wh_{'a' * 24}"): (405, "DELETE, GET"),
    # rate limits (issue 37)
    ("PUT", "/rate-limits/type:demo.echo"): f"{RATE_LIMITS}:put_rate_limit",
    ("GET", "/rate-limits/customer-42"): f"{RATE_LIMITS}:get_rate_limit",
    ("GET", "/rate-limits"): f"{RATE_LIMITS}:list_rate_limits",
    ("DELETE", "/rate-limits/tenant"): f"{RATE_LIMITS}:delete_rate_limit",
    # retry policies per job type (issue 37)
    ("GET", "/job-types"): "onward.api.routes.job_types:list_job_types",
    ("POST", "/job-types"): (405, "GET"),
    # pause, resume and the drain switch (issue 37): /ops/pause is no /ops/<something> of another area
    ("POST", "/ops/pause"): f"{PAUSES}:operator_pause",
    ("POST", "/ops/resume"): f"{PAUSES}:operator_resume",
    ("GET", "/ops/pauses"): f"{PAUSES}:operator_pauses",
    ("POST", "/ops/drain"): f"{PAUSES}:drain_switch",
    ("POST", "/pause"): f"{PAUSES}:tenant_pause",
    ("POST", "/resume"): f"{PAUSES}:tenant_resume",
    ("GET", "/pauses"): f"{PAUSES}:tenant_pauses",
    ("GET", "/ops/drain"): (405, "POST"),
}


@pytest.fixture
def answered_by(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The function of each of the API's routes the resolver calls, which then answers 204 without running (the
    resolver's own route for no match runs as it does)."""
    called: list[str] = []
    call = Route.__call__

    def record(route: Route, **arguments: Any) -> Any:
        if not route.func.__module__.startswith("onward."):
            return call(route, **arguments)
        called.append(f"{route.func.__module__}:{route.func.__name__}")
        return Response(204, None, None)

    monkeypatch.setattr(Route, "__call__", record)
    return called


@pytest.mark.parametrize(("method", "path"), list(MATCHES))
def test_each_request_is_answered_by_the_route_it_was_answered_by_before_the_split(
        method: str, path: str, answered_by: list[str]) -> None:
    event = build_event(method, "/", [], b"")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    reply = api.handler(event, LocalLambdaContext("onward-api"))
    expected = MATCHES[method, path]
    if isinstance(expected, str):
        assert (reply["statusCode"], answered_by) == (204, [expected])
    else:
        assert answered_by == []
        assert (reply["statusCode"], reply["headers"].get("Allow")) == expected


def test_every_route_of_the_app_is_pinned_by_a_request_above() -> None:
    routes = {f"{route.func.__module__}:{route.func.__name__}"
              for route in [*api.app._static_routes, *api.app._dynamic_routes]}
    assert routes == {expected for expected in MATCHES.values() if isinstance(expected, str)}

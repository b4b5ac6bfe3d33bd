"""The HTTP API's guards: stage throttling from parameters, an access log of JSON lines with what an operator
needs for a failed request, reserved concurrency on the API function, and AWS clients that give up within
API Gateway's 29 s in the API's deployment only (workers, stream consumers and operators keep patient ones)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from onward import bootstrap
from onward.bootstrap import ApiDeployment, Deployment
from onward.settings import Settings
from onward_infra.template import load_template
from tests.samtemplate import translate

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PARAMETERS: dict[str, Any] = TEMPLATE["Parameters"]
PACKAGE = Path(bootstrap.__file__).parent
API_GATEWAY_LIMIT_S = 29


@pytest.fixture(scope="module")
def stage() -> dict[str, Any]:
    """The HTTP API's stage as CloudFormation gets it from the SAM transform."""
    (found,) = [r["Properties"] for r in translate()["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    stage: dict[str, Any] = found
    return stage


def test_the_stage_throttles_from_the_parameters(stage: dict[str, Any]) -> None:
    """Without stage throttling any client can drive the function (and DynamoDB) as hard as it likes; above
    the limits API Gateway answers 429 itself."""
    assert stage["DefaultRouteSettings"] == {"ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
                                             "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"}}
    assert PARAMETERS["ApiThrottlingBurstLimit"]["Default"] >= PARAMETERS["ApiThrottlingRateLimit"]["Default"]


def test_the_access_log_is_one_json_object_per_request_with_what_a_failure_needs(stage: dict[str, Any]) -> None:
    """The function's own log never sees the requests API Gateway answers itself (401, 404, 413, 429, a
    timeout's 503/504): the access log is the only record of them, so it must carry the request id, the
    route, the status, the latency and why the integration failed. JSON, so Logs Insights reads fields."""
    settings = stage["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    fields = json.loads(settings["Format"])
    wanted = {"requestId": "$context.requestId", "routeKey": "$context.routeKey", "status": "$context.status",
              "responseLatency": "$context.responseLatency", "integrationError": "$context.integrationErrorMessage",
              "errorMessage": "$context.error.message", "authorizerError": "$context.authorizer.error"}
    assert wanted.items() <= fields.items()
    assert all(value.startswith("$context.") for value in fields.values())
    group = RESOURCES["ApiAccessLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_the_api_function_reserves_its_concurrency_from_a_parameter() -> None:
    """Reserved concurrency is also a cap: a burst of API requests cannot take the concurrency the relay and
    projector (one invocation per shard) and the workers need. 0 leaves it unreserved (accounts whose quota
    is too small to reserve any), rather than Lambda's meaning of 0, a function that never runs."""
    reserved = RESOURCES["ApiFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert reserved == {"Fn::If": ["ReserveApiConcurrency", {"Ref": "ApiReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    assert TEMPLATE["Conditions"]["ReserveApiConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ApiReservedConcurrency"}, 0]}]}
    assert PARAMETERS["ApiReservedConcurrency"]["Default"] > 0


# --- clients -----------------------------------------------------------------------------------------------

def client_config(deployment: Deployment) -> Any:
    return deployment.client("dynamodb").meta.config


def worst_case_call_s(config: Any) -> float:
    """The longest one SDK call can take: every attempt stalls to its timeouts, with standard mode's largest
    backoff (up to 2^(n-1) s before attempt n+1) between them."""
    attempts: int = config.retries["total_max_attempts"]
    per_attempt: float = config.connect_timeout + config.read_timeout
    backoff: int = sum(2 ** n for n in range(attempts - 1))
    return attempts * per_attempt + backoff


def test_the_api_deployment_gives_up_within_api_gateways_time() -> None:
    """With the patient clients (9 attempts of up to 5 s + 30 s) one stalled DynamoDB call outlasts API
    Gateway's 29 s: the client gets the gateway's bare 503 instead of the handler's problem. The API's clients
    make 3 attempts of at most 1 s + 3 s, about 15 s in all."""
    config = client_config(ApiDeployment(Settings(region="us-east-1")))
    assert (config.connect_timeout, config.read_timeout) == (1, 3)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert worst_case_call_s(config) == 15 < API_GATEWAY_LIMIT_S  # one stalled call leaves the handler 14 s


def test_workers_and_stream_consumers_keep_their_patient_clients() -> None:
    """A worker's or consumer's call given up is work redone later (a batch retried, a lease lost), so they
    wait: the API's short timeouts must not leak into the Deployment every other entry point uses."""
    config = client_config(Deployment(Settings(region="us-east-1")))
    assert (config.connect_timeout, config.read_timeout) == (5, 30)
    assert config.retries == {"mode": "standard", "total_max_attempts": 9}
    assert worst_case_call_s(config) > API_GATEWAY_LIMIT_S


def test_the_api_and_the_rest_of_one_environment_get_separate_deployments(monkeypatch: pytest.MonkeyPatch) -> None:
    """`from_environment` keys its cache by class: were the two the same object, whichever entry point asked
    first in a process (the local platform runs all of them) would fix the clients of the other."""
    monkeypatch.setenv("JOBS_TABLE", "jobs-of-test-api-hardening")
    api, other = ApiDeployment.from_environment(), Deployment.from_environment()
    assert api is not other and type(other) is Deployment
    assert api is ApiDeployment.from_environment() and other is Deployment.from_environment()


def deployments_used(module: Path) -> set[str]:
    """The classes whose `from_environment()` a handler module calls."""
    tree = ast.parse(module.read_text())
    return {node.func.value.id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "from_environment" and isinstance(node.func.value, ast.Name)}


def test_only_the_api_handler_uses_the_api_deployment() -> None:
    """A route reaching for Deployment.from_environment() would run with the patient clients again: no module of
    the API (the handler, every route module of onward/api/routes/, what they share) asks for another
    Deployment than the ApiDeployment."""
    used = {module.relative_to(PACKAGE).as_posix(): {name for name in deployments_used(module)
                                                     if name.endswith("Deployment")}
            for module in sorted((PACKAGE / "api").rglob("*.py"))}
    assert set().union(*used.values()) == {"ApiDeployment"}, used
    assert {"api/routes/jobs.py", "api/routes/ops.py", "api/routes/schedules.py", "api/request.py"} <= {
        name for name, deployments in used.items() if deployments}
    for name in ("relay.py", "projector.py", "reaper.py", "worker.py", "scheduler.py"):
        assert deployments_used(PACKAGE / "entrypoints" / name) == {"Deployment"}, name

"""template.yaml's safety net for upgrades (docs/upgrades.md): the API, the relay and the projector published
as versions behind an alias that the HTTP API and the event source mappings invoke, shifted gradually and
rolled back by their alarms; the worker image taken by digest only; the runtime (and its boto3) changing only
at a deploy, or pinned."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.samtemplate import translate
from tests.unit.project.test_template import RESOURCES, TEMPLATE

GRADUAL = ("ApiFunction", "RelayFunction", "ProjectorFunction")
ROLLBACK_ALARMS = {
    "ApiFunction": {"ApiFunctionErrorsAlarm", "ApiUnhandledErrorsAlarm"},
    "RelayFunction": {"RelayFunctionErrorsAlarm"},
    "ProjectorFunction": {"ProjectorFunctionErrorsAlarm"},
    "ArchiverFunction": {"ArchiverFunctionErrorsAlarm"},
}


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate()


@pytest.mark.parametrize("function", GRADUAL)
def test_the_function_is_deployed_gradually_and_rolled_back_by_its_alarms(function: str) -> None:
    """Without the alias and the preference, a deploy replaced the code every invocation runs at once, and a
    broken release stayed until someone noticed."""
    properties = RESOURCES[function]["Properties"]
    assert properties["AutoPublishAlias"] == "live"
    preference = properties["DeploymentPreference"]
    assert preference["Type"] == "Canary10Percent5Minutes"
    assert preference["Role"] == {"Fn::GetAtt": ["DeployRole", "Arn"]}  # not SAM's, with its managed policy
    alarms = {alarm["Ref"] for alarm in preference["Alarms"]}
    assert alarms == ROLLBACK_ALARMS[function]
    for alarm in alarms:
        watched = RESOURCES[alarm]["Properties"]
        assert "Condition" not in RESOURCES[alarm]
        dimensions = {d["Name"]: d["Value"] for d in watched["Dimensions"]}
        assert dimensions in ({"FunctionName": {"Ref": function}}, {"service": "api"})
    statements = RESOURCES["DeployRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    assert {alarm["Fn::GetAtt"][0] for alarm in statements[1]["Resource"]} == set().union(*ROLLBACK_ALARMS.values())


def test_the_mappings_and_the_http_api_invoke_the_alias(translated: dict[str, Any]) -> None:
    """An event source mapping or an integration left on the function's unqualified ARN runs $LATEST: the
    canary and its rollback would never see that traffic."""
    resources = translated["Resources"]
    mappings = {name: r for name, r in resources.items() if r["Type"] == "AWS::Lambda::EventSourceMapping"}
    for function in ("RelayFunction", "ProjectorFunction"):
        [mapping] = [m for m in mappings.values() if function in str(m["Properties"]["FunctionName"])]
        assert mapping["Properties"]["FunctionName"] == {"Ref": f"{function}Aliaslive"}
    body = resources["HttpApi"]["Properties"]["Body"]
    uris = {str(operation["x-amazon-apigateway-integration"]["uri"])
            for path in body["paths"].values() for operation in path.values()
            if isinstance(operation, dict) and "x-amazon-apigateway-integration" in operation}
    assert uris and all("ApiFunctionAliaslive" in uri for uri in uris)


@pytest.mark.parametrize(("image", "accepted"), [
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/onward-worker@sha256:" + "a" * 64, True),
    ("", True),  # WorkerRuntime=lambda or none: no image
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/onward-worker:1", False),
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/onward-worker:latest", False),
    ("onward-worker@sha256:" + "a" * 63, False),
    ("onward-worker:1@sha256:" + "A" * 64, False),
])
def test_the_worker_image_is_taken_by_digest_only(image: str, accepted: bool) -> None:
    """A tag can be pushed over: the next scale-out would start other code than the deploy named."""
    pattern = TEMPLATE["Parameters"]["WorkerImage"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, image)) is accepted


def test_the_runtime_changes_only_at_a_deploy_or_is_pinned(translated: dict[str, Any]) -> None:
    """boto3 comes with the runtime: with Auto (the default mode), Lambda changed it under a running version,
    outside the canary and with no way back."""
    functions = [r for r in translated["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert functions
    for function in functions:
        config = function["Properties"]["RuntimeManagementConfig"]
        assert config["UpdateRuntimeOn"] == {"Fn::If": ["PinsRuntimeVersion", "Manual", "FunctionUpdate"]}
    pattern = TEMPLATE["Parameters"]["LambdaRuntimeVersionArn"]["AllowedPattern"]
    assert re.fullmatch(pattern, "arn:aws:lambda:eu-west-1::runtime:" + "0" * 64)
    assert not re.fullmatch(pattern, "python3.12")

"""template.yaml as AWS would see it, offline: the SAM transform applied by aws-sam-translator (the library
`sam deploy`'s transform runs), and cfn-lint's findings on both forms.

The translator needs a region (AWS_DEFAULT_REGION), a managed-policy loader (it maps managed policy names
to ARNs by calling IAM; the stub answers from a fixed table, and the template uses no managed policy), and
code already uploaded: local CodeUri values become s3:// addresses first, as `sam package` would make them.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint_file
from samtranslator.translator.transform import transform

from onward_infra.template import TEMPLATE_PATH, load_template

REGION = "us-east-1"
PLACEHOLDER_CODE = "s3://onward-artifacts/onward.zip"
# Parameters without a default, as a deployer would answer them (`sam deploy --guided`).
DEPLOY_PARAMETERS = {"JwtIssuer": "https://issuer.example.com/", "JwtAudience": "onward"}


class _PolicyLoader:
    """Managed policy name -> ARN, without calling IAM."""

    def load(self) -> dict[str, str]:
        names = ("AWSLambdaBasicExecutionRole", "AWSXrayWriteOnlyAccess", "AWSXRayDaemonWriteAccess")
        return {name: f"arn:aws:iam::aws:policy/{name}" for name in names}


@contextmanager
def _region() -> Iterator[None]:
    previous = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = REGION
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = previous


def with_uploaded_code(template: dict[str, Any]) -> dict[str, Any]:
    """A copy whose local CodeUri values (Globals and functions) are s3:// addresses."""
    template = copy.deepcopy(template)
    function_globals = template.get("Globals", {}).get("Function", {})
    if "CodeUri" in function_globals:
        function_globals["CodeUri"] = PLACEHOLDER_CODE
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function" and "CodeUri" in resource.get("Properties", {}):
            resource["Properties"]["CodeUri"] = PLACEHOLDER_CODE
    return template


def translate(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain CloudFormation: what the SAM transform turns template.yaml into."""
    source = with_uploaded_code(template if template is not None else load_template())
    with _region():
        return transform(source, dict(DEPLOY_PARAMETERS), _PolicyLoader())


def cfn_lint(path: Path) -> list[str]:
    """cfn-lint's findings (errors, warnings, informational) on one template file, one line each."""
    with _region():
        matches = lint_file(path, config=ManualArgs(regions=[REGION]))
    return [f"{m.rule.id} {m.linenumber}:{m.columnnumber} {m.message}" for m in matches]


def write_json(template: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(template, indent=1))
    return path


_SUB_NAME = re.compile(r"\$\{([^}!]+)\}")


def dashboard_body(template: dict[str, Any], conditions: dict[str, bool] | None = None,
                   resource: str = "Dashboard") -> dict[str, Any]:
    """A dashboard's body as JSON, its Fn::Sub rendered as far as offline can: each variable of the Sub's map
    (an Fn::If takes the branch `conditions` names, false when unnamed; a Join of literals and parameter
    defaults is joined) and each parameter (its default) is put in; what only AWS knows (resources, their
    attributes, pseudo parameters) stays `${Name}`, always inside a JSON string."""
    body, variables = template["Resources"][resource]["Properties"]["DashboardBody"]["Fn::Sub"]
    parameters = template.get("Parameters", {})
    chosen = conditions or {}

    def render(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::If" in value:
            condition, when_true, when_false = value["Fn::If"]
            return render(when_true if chosen.get(condition, False) else when_false)
        if "Fn::Sub" in value:
            return render(value["Fn::Sub"])
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(render(part) for part in parts)
        if "Ref" in value and value["Ref"] in parameters:
            return str(parameters[value["Ref"]]["Default"])
        if "Ref" in value and value["Ref"] in template["Resources"]:  # what only AWS knows, as in the body
            return "${" + value["Ref"] + "}"
        raise ValueError(f"cannot render {value!r} offline")

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return render(variables[name])
        if name in parameters:
            return str(parameters[name]["Default"])
        return match.group(0)

    rendered: dict[str, Any] = json.loads(_SUB_NAME.sub(substitute, body))
    return rendered


__all__ = ["DEPLOY_PARAMETERS", "REGION", "TEMPLATE_PATH", "cfn_lint", "dashboard_body", "translate",
           "with_uploaded_code", "write_json"]

"""Read `template.yaml` (the single source of truth for every table and stream) and deploy its data
resources into an endpoint's CloudFormation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

TEMPLATE_PATH = Path(__file__).resolve().parent.parent / "template.yaml"

# Resource types the embedded endpoint can host; functions, APIs and alarms only exist on AWS.
DATA_RESOURCE_TYPES = frozenset(
    {"AWS::DynamoDB::Table", "AWS::Kinesis::Stream", "AWS::SQS::Queue"}
)


class _CloudFormationLoader(yaml.SafeLoader):
    """YAML loader that turns short-form intrinsics (`!Ref X`, `!If [...]`) into their long form."""


def _construct_intrinsic(loader: yaml.Loader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """The template as a plain dict, intrinsics in long form."""
    return yaml.load(path.read_text(), Loader=_CloudFormationLoader)  # noqa: S506 - safe loader subclass


def data_resources_template(template: dict[str, Any]) -> dict[str, Any]:
    """The part of the template an emulator can deploy: its data resources with the parameters and
    conditions they use, without the SAM transform."""
    resources = {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] in DATA_RESOURCE_TYPES
    }
    subset: dict[str, Any] = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}
    for section in ("Parameters", "Conditions"):
        if section in template:
            subset[section] = template[section]
    return subset


def environment_variable_for(logical_id: str) -> str:
    """`JobsTable` -> `JOBS_TABLE`: the variable through which code reads a resource's name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", logical_id).upper()


def data_resource_environment(physical_ids: dict[str, str]) -> dict[str, str]:
    """Environment variables naming each deployed data resource."""
    return {environment_variable_for(logical): physical for logical, physical in physical_ids.items()}


def as_json(template: dict[str, Any]) -> str:
    return json.dumps(template)

"""Read `template.yaml` (the single source of truth for every table and stream) and deploy its data
resources into an endpoint's CloudFormation."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from onward_infra.region_roles import for_region_role

# The template the product ships (onward/template.yaml, in a checkout a link to the repository's template.yaml).
TEMPLATE_PATH = Path(str(resources.files("onward").joinpath("template.yaml"))).resolve()

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
        assert isinstance(node, yaml.MappingNode)  # YAML's third kind of node
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_template(path: Path = TEMPLATE_PATH, role: str | None = "single") -> dict[str, Any]:
    """The template as a plain dict, intrinsics in long form: as a stack with RegionRole=`role` deploys it
    (regional recovery's conditions decided: onward_infra.region_roles), or as written when `role` is None."""
    template: dict[str, Any] = yaml.load(path.read_text(), Loader=_CloudFormationLoader)
    return template if role is None else for_region_role(template, role)


def data_resources_template(template: dict[str, Any]) -> dict[str, Any]:
    """The part of the template an emulator can deploy: its data resources with the parameters, mappings and
    conditions they use (only those: the others, such as the JWT issuer, need no answer here), without
    the SAM transform. Works on template.yaml as on its SAM translation."""
    resources = {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] in DATA_RESOURCE_TYPES
    }
    conditions = template.get("Conditions", {})
    used_conditions: set[str] = set()
    todo = _conditions_used(resources)
    while todo:  # conditions may name other conditions
        name = todo.pop()
        if name not in used_conditions and name in conditions:
            used_conditions.add(name)
            todo |= _conditions_used(conditions[name])
    kept_conditions = {name: conditions[name] for name in conditions if name in used_conditions}
    used_names = referenced_names((resources, kept_conditions))
    parameters = {name: p for name, p in template.get("Parameters", {}).items() if name in used_names}
    used_maps = _maps_used(resources)
    mappings = {name: m for name, m in template.get("Mappings", {}).items() if name in used_maps}
    subset: dict[str, Any] = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}
    if parameters:
        subset["Parameters"] = parameters
    if mappings:
        subset["Mappings"] = mappings
    if kept_conditions:
        subset["Conditions"] = kept_conditions
    return subset


def _walk(node: Any) -> Any:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list | tuple) else ()
    for child in children:
        yield from _walk(child)


def referenced_names(node: Any) -> set[str]:
    """Names used by `Ref` and `${Name}` in Fn::Sub (parameters, resources, pseudo parameters)."""
    names: set[str] = set()
    for item in _walk(node):
        if isinstance(item, dict):
            if isinstance(item.get("Ref"), str):
                names.add(item["Ref"])
            sub = item.get("Fn::Sub")
            text = sub[0] if isinstance(sub, list) else sub
            if isinstance(text, str):
                names |= {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
    return names


def _maps_used(node: Any) -> set[str]:
    """Mappings named by `Fn::FindInMap` (the events stream's shards come from one)."""
    return {item["Fn::FindInMap"][0] for item in _walk(node)
            if isinstance(item, dict) and isinstance(item.get("Fn::FindInMap"), list)
            and isinstance(item["Fn::FindInMap"][0], str)}


def _conditions_used(node: Any) -> set[str]:
    """Conditions named by `Condition:` keys, `Fn::If` and `{"Condition": name}` inside conditions."""
    names: set[str] = set()
    for item in _walk(node):
        if isinstance(item, dict):
            if isinstance(item.get("Condition"), str):
                names.add(item["Condition"])
            if isinstance(item.get("Fn::If"), list) and item["Fn::If"]:
                names.add(item["Fn::If"][0])
    return names


def environment_variable_for(logical_id: str) -> str:
    """`JobsTable` -> `JOBS_TABLE`: the variable through which code reads a resource's name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", logical_id).upper()


def data_resource_environment(physical_ids: dict[str, str]) -> dict[str, str]:
    """Environment variables naming each deployed data resource."""
    return {environment_variable_for(logical): physical for logical, physical in physical_ids.items()}


def as_json(template: dict[str, Any]) -> str:
    return json.dumps(template)


def stream_error_handling(function: str, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error handling properties of `function`'s one stream event source (Kinesis or DynamoDB), with a
    parameter's default for a `Ref`: MaximumRetryAttempts and MaximumRecordAgeInSeconds (-1 when unset, as on
    Lambda) and BisectBatchOnFunctionError (False when unset). The local pollers take them from here."""
    template = template or load_template()
    events = template["Resources"][function]["Properties"]["Events"].values()
    (source,) = [event["Properties"] for event in events if event["Type"] in ("Kinesis", "DynamoDB")]

    def value(name: str, default: Any) -> Any:
        given = source.get(name, default)
        if isinstance(given, dict) and "Ref" in given:
            return template["Parameters"][given["Ref"]]["Default"]
        return given

    return {"maximum_retry_attempts": int(value("MaximumRetryAttempts", -1)),
            "bisect_batch_on_function_error": bool(value("BisectBatchOnFunctionError", False)),
            "maximum_record_age_s": int(value("MaximumRecordAgeInSeconds", -1))}

"""template.yaml's data resources as a CloudFormation stack on any endpoint (the embedded one, another
emulator, AWS itself), and the environment naming them. Needs only boto3: `onward up --aws` and
`--endpoint-url` use it without loading the embedded endpoint (moto)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onward_infra.template import as_json, data_resource_environment, data_resources_template, load_template

STACK_NAME = "onward"
# A stack made here serves one machine, far below 500 jobs/s: a small tier of the events stream (2 shards, so
# that more than one shard is always exercised), not template.yaml's default sized for AWS at 10,000 jobs/s (40
# shards a local projector would poll for nothing).
LOCAL_PARAMETERS = {"TargetJobsPerSecond": "500"}
# The fence reconciler (issue 39) reads the jobs table's stream with both images (docs/regional-recovery.md, "How it
# is fenced"); a stack deployed for the two-Region drill has it whatever template.yaml says.
JOBS_STREAM = {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def with_jobs_stream(template: dict[str, Any]) -> dict[str, Any]:
    """`template` (data resources) with the jobs table's stream on, NEW_AND_OLD_IMAGES, unless it has one."""
    template["Resources"]["JobsTable"]["Properties"].setdefault("StreamSpecification", dict(JOBS_STREAM))
    return template


def deploy_data_resources(cloudformation: Any, stack_name: str = STACK_NAME,
                          parameters: Mapping[str, str] = LOCAL_PARAMETERS, *, jobs_stream: bool = False) -> None:
    """Create template.yaml's data resources (tables, stream) as a CloudFormation stack, through any
    endpoint's CloudFormation (this one, another emulator), with `parameters` (the rest at their defaults);
    `jobs_stream`: the jobs table's stream on (with_jobs_stream)."""
    template = data_resources_template(load_template())
    if jobs_stream:
        template = with_jobs_stream(template)
    cloudformation.create_stack(StackName=stack_name, TemplateBody=as_json(template),
                                Parameters=[{"ParameterKey": key, "ParameterValue": value}
                                            for key, value in parameters.items()])
    cloudformation.get_waiter("stack_create_complete").wait(
        StackName=stack_name, WaiterConfig={"Delay": 1, "MaxAttempts": 600})


def stack_environment(cloudformation: Any, stack_name: str = STACK_NAME) -> dict[str, str]:
    """The variables naming a deployed stack's data resources (`JOBS_TABLE=...`), read from CloudFormation:
    works for the stack `sam deploy` made on AWS as for one made by deploy_data_resources."""
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    if not stack["StackStatus"].endswith("_COMPLETE") or "ROLLBACK" in stack["StackStatus"]:
        raise RuntimeError(f"stack {stack_name} is {stack['StackStatus']}")
    wanted = set(data_resources_template(load_template())["Resources"])
    physical: dict[str, str] = {}
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        physical.update({r["LogicalResourceId"]: r["PhysicalResourceId"]
                         for r in page["StackResourceSummaries"] if r["LogicalResourceId"] in wanted})
    return data_resource_environment(physical)


def export_lines(environment: dict[str, str]) -> list[str]:
    """Shell `export` lines a person can paste to point any tool at the endpoint."""
    return [f"export {name}={value}" for name, value in sorted(environment.items())]

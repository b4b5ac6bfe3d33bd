"""template.yaml's data resources (tables, the events stream, the on-failure queues, the user pool, the archive
bucket) cannot be lost
by a stack update: each has a fixed name under the stack's, is retained when deleted or replaced, is refused
replacement and deletion by stack-policy.json, and keeps the properties whose change would replace it as
recorded in replacement_properties.json. The tables nothing rebuilds have point-in-time recovery.

docs/deploy.md#data-that-a-stack-update-cannot-lose says why and what to do instead of a replacing change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from onward_infra.region_roles import ROLES, for_region_role
from onward_infra.template import TEMPLATE_PATH, load_template

# As written: the data resources of every RegionRole (regional recovery's global tables and reconciler queue too).
TEMPLATE = load_template(role=None)
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
STACK_POLICY_PATH = TEMPLATE_PATH.parent / "stack-policy.json"
RECORD_PATH = Path(__file__).with_name("replacement_properties.json")

# What each data resource type is named by, and the properties whose change replaces it. The types'
# create-only properties in CloudFormation's schemas are among them (test_the_record_covers_every_create_only_
# property); a table also by its key (KeySchema, the key attributes' types: a new key is a new table), and a
# user pool by what AWS documents as "Update requires: Replacement" (its schema has no create-only list).
NAME_PROPERTY = {"AWS::DynamoDB::Table": "TableName", "AWS::DynamoDB::GlobalTable": "TableName",
                 "AWS::Kinesis::Stream": "Name",
                 "AWS::SQS::Queue": "QueueName", "AWS::Cognito::UserPool": "UserPoolName",
                 "AWS::S3::Bucket": "BucketName"}
REPLACED_BY = {
    "AWS::DynamoDB::Table": ("TableName", "ImportSourceSpecification", "KeySchema", "LocalSecondaryIndexes"),
    # regional recovery (issue 39): its schema's create-only property is TableName; its key, as a table's
    "AWS::DynamoDB::GlobalTable": ("TableName", "KeySchema", "LocalSecondaryIndexes"),
    "AWS::Kinesis::Stream": ("Name",),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::Cognito::UserPool": ("UserPoolName", "AliasAttributes", "UsernameAttributes", "Schema"),
    "AWS::S3::Bucket": ("BucketName", "BucketNamePrefix", "BucketNamespace"),
}
DATA_RESOURCES = sorted(name for name, resource in RESOURCES.items() if resource["Type"] in REPLACED_BY)

# Tables without point-in-time recovery, and what rebuilds them instead (the template's comment says the same).
REBUILT_TABLES = {
    "StatusTable": "the view: `onward replay` / `reconcile --repair` re-project it from the outbox",
    "CheckpointTable": "watermarks the next pipeline heartbeat rewrites; Lambda keeps its mappings' positions",
}

MIGRATE = ("A change to a data resource's replacing properties would replace it: CloudFormation (fixed name) and "
           "stack-policy.json refuse it, and were they bypassed every function would point at a new, empty "
           "resource. Do not edit {record} to match: migrate (docs/deploy.md#changing-a-data-resources-key): "
           "a new resource beside the old one, its data copied, the code switched, the old one removed later.")


def replacing_properties(resource: dict[str, Any]) -> dict[str, Any]:
    """The values of the properties whose change replaces `resource` (None where unset); for a table also the
    types of its key attributes (of the table and of its local secondary indexes)."""
    properties = resource.get("Properties", {})
    found: dict[str, Any] = {name: properties.get(name) for name in REPLACED_BY[resource["Type"]]}
    if resource["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
        local_indexes = properties.get("LocalSecondaryIndexes", [])
        schemas = [properties["KeySchema"], *(index["KeySchema"] for index in local_indexes)]
        keys = {key["AttributeName"] for schema in schemas for key in schema}
        found["KeyAttributeDefinitions"] = sorted(
            (definition for definition in properties["AttributeDefinitions"] if definition["AttributeName"] in keys),
            key=lambda definition: definition["AttributeName"])
    return found


def fixed_name(resource: dict[str, Any]) -> str:
    """The `!Sub` text naming a data resource (a generated name is not one: the test fails on it)."""
    name = resource["Properties"].get(NAME_PROPERTY[resource["Type"]])
    assert isinstance(name, dict) and isinstance(name.get("Fn::Sub"), str), f"{resource['Type']} named {name!r}"
    text: str = name["Fn::Sub"]
    return text


def recorded() -> dict[str, Any]:
    record: dict[str, Any] = json.loads(RECORD_PATH.read_text())
    return record


def denied_resources(statements: list[dict[str, Any]]) -> set[str]:
    return {resource.removeprefix("LogicalResourceId/") for statement in statements if statement["Effect"] == "Deny"
            for resource in statement["Resource"]}


@pytest.mark.parametrize("name", DATA_RESOURCES)
def test_a_data_resource_keeps_the_properties_whose_change_replaces_it(name: str) -> None:
    """Fails on a template change that would replace a table, the stream, a queue or the user pool (a new key,
    a new name, a FIFO switch...), and on a data resource added without its entry in the record."""
    now = replacing_properties(RESOURCES[name])
    record = recorded()
    assert name in record, (f"{name} is a data resource without an entry in {RECORD_PATH.name}: add it as "
                            f"{json.dumps({name: now}, indent=2)}, and add it to stack-policy.json")
    changed = sorted(key for key in {*now, *record[name]} if now.get(key) != record[name].get(key))
    assert not changed, f"{name}: {', '.join(changed)} changed. " + MIGRATE.format(record=RECORD_PATH.name)


def test_the_record_names_only_data_resources_of_the_template() -> None:
    """A data resource removed from the template is deleted by the update (Update:Delete, refused by the
    policy): its entry stays until the migration that moved its data away removes both."""
    assert sorted(recorded()) == DATA_RESOURCES


def test_the_record_covers_every_create_only_property() -> None:
    """CloudFormation's own schema of each type (as cfn-lint ships it) lists the properties a change to which
    replaces the resource: each is recorded."""
    for resource_type, replacing in REPLACED_BY.items():
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
        create_only = {path.removeprefix("/properties/") for path in schema.get("createOnlyProperties", [])}
        assert create_only <= set(replacing), resource_type


def test_the_stack_policy_refuses_replacing_or_deleting_exactly_the_data_resources() -> None:
    """stack-policy.json allows every other update and denies Update:Replace and Update:Delete on each data
    resource: a data resource added to the template without it, or a name left there after a rename, fails."""
    policy = json.loads(STACK_POLICY_PATH.read_text())
    statements = policy["Statement"]
    assert {"Effect": "Allow", "Principal": "*", "Action": "Update:*", "Resource": "*"} in statements
    denials = [statement for statement in statements if statement["Effect"] == "Deny"]
    assert all(statement["Principal"] == "*" and sorted(statement["Action"]) == ["Update:Delete", "Update:Replace"]
               and "Condition" not in statement for statement in denials)
    assert sorted(denied_resources(statements)) == DATA_RESOURCES
    assert len(statements) == 1 + len(denials)


@pytest.mark.parametrize("name", DATA_RESOURCES)
def test_a_data_resource_has_a_fixed_name_under_the_stacks_and_is_retained(name: str) -> None:
    """A fixed name makes CloudFormation fail a replacing update (a custom-named resource cannot be replaced)
    instead of creating a new empty resource (not the pool's: Cognito allows two pools of one name); under the
    stack's name two stacks of one account never collide. Retain keeps it when the stack is deleted or an update
    replaces it anyway."""
    resource = RESOURCES[name]
    assert resource.get("DeletionPolicy") == "Retain", name
    assert resource.get("UpdateReplacePolicy") == "Retain", name
    assert fixed_name(resource).startswith("${AWS::StackName}-"), name


@pytest.mark.parametrize("role", ROLES)
def test_data_resource_names_differ_within_a_stack(role: str) -> None:
    """Per RegionRole: JobsTable (single) and JobsGlobalTable (home/standby) share a name, never a stack."""
    resources = for_region_role(TEMPLATE, role)["Resources"]
    names = [fixed_name(resources[name]) for name in DATA_RESOURCES if name in resources]
    assert len(set(names)) == len(names), names


def test_the_user_pool_cannot_be_deleted_with_its_users() -> None:
    """Its users and their tenants exist nowhere else: Cognito refuses to delete it (DeletionProtection) and
    CloudFormation keeps it when the stack goes or CreateUserPool is turned off."""
    pool = RESOURCES["UserPool"]
    assert pool["Properties"]["DeletionProtection"] == "ACTIVE"
    assert (pool["DeletionPolicy"], pool["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_every_table_nothing_rebuilds_has_point_in_time_recovery_and_deletion_protection() -> None:
    """A job's history (jobs, outbox) and an operator's evidence (conflicts, parked) can be restored to any second
    of the last 35 days and are protected from DeleteTable with DeletionProtection; a table without it is named
    in REBUILT_TABLES with what rebuilds it, so a new table must take a side."""
    tables = {name: RESOURCES[name]["Properties"] for name in DATA_RESOURCES
              if RESOURCES[name]["Type"] == "AWS::DynamoDB::Table"}
    recovered = {name for name, properties in tables.items()
                 if properties.get("PointInTimeRecoverySpecification") == {"PointInTimeRecoveryEnabled": True}}
    assert recovered == {"JobsTable", "OutboxTable", "ConflictsTable", "ParkedTable"}
    assert recovered | set(REBUILT_TABLES) == set(tables) and not recovered & set(REBUILT_TABLES)
    for name in recovered:
        assert tables[name]["DeletionProtectionEnabled"] == {"Fn::If": ["ProtectTables", True, False]}, name

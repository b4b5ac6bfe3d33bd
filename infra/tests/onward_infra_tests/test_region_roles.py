"""onward_infra.region_roles: a template specialised for one RegionRole decides regional recovery's conditions
only, as CloudFormation would, and leaves every other condition as written."""

from __future__ import annotations

from typing import Any

import pytest

from onward_infra.region_roles import for_region_role

NO_VALUE = {"Ref": "AWS::NoValue"}


def template() -> dict[str, Any]:
    return {
        "Parameters": {"RegionRole": {"Type": "String", "Default": "single"},
                       "Lease": {"Type": "Number", "Default": 30},
                       "Runtime": {"Type": "String", "Default": "ecs"}},
        "Conditions": {
            "SingleRegion": {"Fn::Equals": [{"Ref": "RegionRole"}, "single"]},
            "ReplicatedRegions": {"Fn::Not": [{"Condition": "SingleRegion"}]},
            "OnEcs": {"Fn::Equals": [{"Ref": "Runtime"}, "ecs"]},
        },
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table", "Condition": "SingleRegion", "Properties": {}},
            "Reconciler": {"Type": "AWS::SQS::Queue", "Condition": "ReplicatedRegions", "Properties": {}},
            "Task": {"Type": "AWS::ECS::TaskDefinition", "Condition": "OnEcs", "Properties": {
                "Environment": [{"Name": "A", "Value": "1"},
                                {"Fn::If": ["SingleRegion", NO_VALUE, {"Name": "LEASE", "Value": {"Ref": "Lease"}}]}],
                "Cpu": {"Fn::If": ["OnEcs", NO_VALUE, 256]}}},
        },
        "Outputs": {"Role": {"Condition": "ReplicatedRegions", "Value": {"Ref": "RegionRole"}}},
    }


def test_a_decided_condition_drops_its_resources_and_outputs_and_the_novalue_it_leaves() -> None:
    """As CloudFormation: a resource or output whose condition is false is not there, a true one loses the key,
    an Fn::If on a decided condition becomes its branch and a NoValue branch disappears from its list."""
    single = for_region_role(template(), "single")
    assert set(single["Resources"]) == {"Table", "Task"} and "Condition" not in single["Resources"]["Table"]
    assert single["Outputs"] == {}
    assert single["Resources"]["Task"]["Properties"]["Environment"] == [{"Name": "A", "Value": "1"}]
    assert "Lease" not in single["Parameters"]  # used only by the branch a single-Region stack drops
    home = for_region_role(template(), "home")
    assert set(home["Resources"]) == {"Reconciler", "Task"}
    assert home["Resources"]["Task"]["Properties"]["Environment"][1] == {"Name": "LEASE", "Value": {"Ref": "Lease"}}
    assert home["Outputs"] == {"Role": {"Value": {"Ref": "RegionRole"}}}


def test_other_conditions_stay_as_written() -> None:
    """OnEcs is not regional recovery's: its Condition key and its Fn::If (NoValue branch included) are kept,
    so the checks of those conditions see the template they saw before."""
    task = for_region_role(template(), "home")["Resources"]["Task"]
    assert task["Condition"] == "OnEcs"
    assert task["Properties"]["Cpu"] == {"Fn::If": ["OnEcs", NO_VALUE, 256]}


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="RegionRole"):
        for_region_role(template(), "primary")

"""template.yaml as one Region's stack sees it: RegionRole (single, home, standby) and the parameters of regional
recovery decided, the conditions they drive evaluated, each `Fn::If` on them resolved to its branch, and the
resources and outputs they leave out dropped (docs/regional-recovery.md, docs/deploy.md#a-standby-region).

Only these conditions are decided here: the others (WorkerOnLambda, FullMonitoring, ...) stay in the template as
written, so a check of them sees what it saw before regional recovery existed. RegionRole=single is the stack
of a deployment that never had a second Region: nothing of regional recovery is left in it.
"""

from __future__ import annotations

from typing import Any

ROLES = ("single", "home", "standby")
# The conditions regional recovery adds (template.yaml's Conditions, "regional recovery (issue 39)").
REGIONAL_CONDITIONS = frozenset(
    {"SingleRegion", "ReplicatedRegions", "StandbyRegion", "OwnsGlobalTables", "DefaultWitnessName",
     "ChecksHomeApi", "JobsStreamLabelGiven", "OutboxStreamLabelGiven", "ReconcilerPolls"}
)
_NO_VALUE = object()


def _evaluate(condition: Any, template: dict[str, Any], parameters: dict[str, Any]) -> bool:
    if isinstance(condition, dict) and set(condition) == {"Condition"}:
        return _evaluate(template["Conditions"][condition["Condition"]], template, parameters)
    (function, arguments), = condition.items()
    if function == "Fn::Equals":
        left, right = (_value(argument, template, parameters) for argument in arguments)
        return bool(str(left) == str(right))
    if function == "Fn::Not":
        return not _evaluate(arguments[0], template, parameters)
    if function == "Fn::And":
        return all(_evaluate(argument, template, parameters) for argument in arguments)
    if function == "Fn::Or":
        return any(_evaluate(argument, template, parameters) for argument in arguments)
    raise ValueError(f"cannot evaluate {condition!r} offline")


def _value(node: Any, template: dict[str, Any], parameters: dict[str, Any]) -> Any:
    if isinstance(node, dict) and "Ref" in node:
        name = node["Ref"]
        return parameters[name] if name in parameters else template["Parameters"][name].get("Default", "")
    return node


def decided_conditions(template: dict[str, Any], parameters: dict[str, Any]) -> dict[str, bool]:
    """Each regional-recovery condition's value for these parameters (the others' defaults)."""
    return {name: _evaluate(template["Conditions"][name], template, parameters)
            for name in REGIONAL_CONDITIONS if name in template.get("Conditions", {})}


def _resolve(node: Any, decided: dict[str, bool]) -> Any:
    if isinstance(node, dict):
        branches = node.get("Fn::If")
        if len(node) == 1 and isinstance(branches, list) and branches and branches[0] in decided:
            chosen = branches[1] if decided[branches[0]] else branches[2]
            return _NO_VALUE if chosen == {"Ref": "AWS::NoValue"} else _resolve(chosen, decided)
        resolved = {key: _resolve(value, decided) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not _NO_VALUE}
    if isinstance(node, list):
        items = [_resolve(item, decided) for item in node]
        return [item for item in items if item is not _NO_VALUE]
    return node


def for_region_role(template: dict[str, Any], role: str = "single", **parameters: Any) -> dict[str, Any]:
    """The template a stack with RegionRole=`role` (and these other parameters) deploys, as far as regional
    recovery decides it. A NoValue that a decided Fn::If leaves is removed, as CloudFormation does."""
    if role not in ROLES:
        raise ValueError(f"RegionRole is one of {ROLES}, not {role!r}")
    decided = decided_conditions(template, {**parameters, "RegionRole": role})
    specialised: dict[str, Any] = {}
    for section, content in template.items():
        if section in ("Resources", "Outputs"):
            kept = {}
            for name, entry in content.items():
                condition = entry.get("Condition")
                if condition in decided and not decided[condition]:
                    continue
                kept_entry = ({key: value for key, value in entry.items() if key != "Condition"}
                              if condition in decided else entry)
                kept[name] = _resolve(kept_entry, decided)
            specialised[section] = kept
        elif section == "Globals":
            specialised[section] = _resolve(content, decided)
        elif section == "Conditions":  # the decided ones are used nowhere any more
            specialised[section] = {name: value for name, value in content.items() if name not in decided}
        else:
            specialised[section] = content
    # A parameter only the decided branches used (AuthorityLeaseSeconds in a single-Region stack) is dropped, as
    # its value no longer matters; the template as written uses every parameter (cfn-lint checks it).
    used = _referenced({key: value for key, value in specialised.items() if key != "Parameters"})
    specialised["Parameters"] = {name: value for name, value in specialised.get("Parameters", {}).items()
                                 if name in used}
    if "Mappings" in specialised:  # likewise a mapping only the standby's alarms read (HeartbeatLostMinutes)
        maps = _maps_used({key: value for key, value in specialised.items() if key != "Mappings"})
        specialised["Mappings"] = {name: value for name, value in specialised["Mappings"].items() if name in maps}
    return specialised


def _maps_used(node: Any) -> set[str]:
    names: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found = item.get("Fn::FindInMap")
            if isinstance(found, list) and found and isinstance(found[0], str):
                names.add(found[0])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


def _referenced(node: Any) -> set[str]:
    """Every name a `Ref`, a `${Name}` of an Fn::Sub or a condition's `Ref` uses (parameters among them)."""
    from onward_infra.template import referenced_names  # (template imports this module at its top)

    return referenced_names(node)


__all__ = ["REGIONAL_CONDITIONS", "ROLES", "decided_conditions", "for_region_role"]

"""Least privilege, checked against the code: each function's IAM role in template.yaml grants exactly the
AWS actions its code calls, on exactly the resources its code names, and nothing on "*" but the few actions
IAM cannot scope (X-Ray, dynamodb:ListStreams).

How it works: tests/codescan.py follows the CALL PATHS from each function's Handler module (ast only,
nothing is run: from the handler, the functions and methods it can call, over a conservative call graph of
the project's modules) and collects the SDK calls made on them (`.put_item(`, `.transact_write_items(`
with the `Put`/`Update`/`ConditionCheck` items built for it, `get_paginator("query")`, ...), each with the
table, index or stream its request names: tests/codescan_targets.py follows TableName and IndexName back
through the AST (`self._table` to the constructor's argument, `settings.require("<resource>")`; a module
constant, an imported one, an f-string of them; a request dict built in a helper), so every grant is
compared per (action, table / index / stream), and a name it cannot follow fails the reading. Each role has
three inline policies: "code" (compared with that reading), "event-source" (what Lambda's poller needs for the
function's stream event, compared with a fixed table) and "telemetry" (its own log group, X-Ray). The
operator commands (onward/cli: every subcommand but the local ones and `worker`) get the managed policy
OperatorPolicy, exported as the output OperatorPolicyArn and compared with the reading of their code the
same way: what only they call (Scan of the jobs, the outbox and the view, reads of the outbox) is theirs,
not the functions'.

How it breaks, on purpose: add `self._db.delete_item(...)` to a method on the relay's path (Relay.relay)
and test_code_policy_grants_exactly_the_actions_the_code_calls fails with "missing dynamodb:DeleteItem";
remove `dynamodb:Scan` from the API's role and it fails with "missing" (GET /ops/conflicts scans the
conflicts table); grant `dynamodb:BatchWriteItem` nobody calls and it fails with "granted but never called";
make code on a function's path read `settings.require("parked_table")` without granting ParkedTable (or
grant a table the code never names) and the resources test fails; query a
new index without granting `<table>/index/<name>` and the index test fails; put "*" on a data action and the
wildcard test fails. Call paths, not modules: make the reaper's handler call `store.all_jobs()` (a module it
already imports) and its role fails with "missing dynamodb:Scan"; put `dynamodb:Scan` back on the worker's
role and it fails with "granted but never called", although onward.store.dynamo.recorder, which the worker loads,
scans in `all_jobs`; drop `dynamodb:Scan` from OperatorPolicy and the operator test fails with "missing"
(`onward reconcile` scans the jobs).

Per table: put dynamodb:Query back on the relay's or the projector's CheckpointTable or ParkedTable statement
(they only write there) and test_code_policy_grants_each_action_only_on_the_tables_the_code_calls_it_on fails
with "granted but never called"; grant the `active` index to the API or the scheduler (neither claims) and the
index test fails; drop the `overlaps` index from OperatorPolicy (IndexName=OVERLAPS_INDEX, a constant) and the
operator test fails with "missing dynamodb:Query on JobsTable/index/overlaps".

What it cannot see: the call graph resolves a method by its name among the classes in reach, so a function can
be granted a call that shares a name with one it makes (over-approximation; never the reverse:
tests/unit/project/test_codescan_call_paths.py and test_codescan_targets.py on each rule,
tests/integration/project/test_codescan_soundness.py against traced runs).
"""

from __future__ import annotations

import argparse
import re
from functools import cache
from typing import Any

import pytest

from onward_infra.template import environment_variable_for, load_template
from tests.codescan import CodeReading, read_code
from tests.samtemplate import translate

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = sorted(name for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function")

# The only actions allowed on "*": IAM offers no resource to scope them to, and they touch no data.
UNSCOPABLE = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}
# What Lambda's event-source mapping needs, per event type (AWS Lambda developer guide, execution role).
STREAM_READ = {
    "DynamoDB": {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"},
    "Kinesis": {"kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:GetRecords",
                "kinesis:GetShardIterator", "kinesis:ListShards"},
}
# What Lambda's SQS event source mapping calls with the function's role (AWS Lambda's SQS event source docs).
QUEUE_READ = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
ARCHIVE_USERS = {"ArchiverFunction", "ApiFunction"}  # who writes / reads the run-history archive
STREAM_ACTIONS = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}

Grant = tuple[str, tuple[str, str] | str]  # (action, (logical id, part) or "*")


def resource_ref(value: Any) -> tuple[str, str] | str:
    """A policy Resource as (logical id, part): part is "arn", "stream" or "index/<name>"; "*" stays."""
    if value == "*":
        return "*"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return logical, {"Arn": "arn", "StreamArn": "stream"}[attribute]
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        match = re.fullmatch(r"\$\{(\w+)\.Arn\}/index/(\w+)", value["Fn::Sub"])
        if match:
            return match.group(1), f"index/{match.group(2)}"
    raise AssertionError(f"policy resource {value!r} is not a template resource's ARN (nor an index of one)")


def role_of(function: str) -> dict[str, Any]:
    role = RESOURCES[function]["Properties"]["Role"]["Fn::GetAtt"]
    assert role[1] == "Arn"
    return RESOURCES[role[0]]


def grants(function: str, policy_name: str) -> set[Grant]:
    policies = {p["PolicyName"]: p["PolicyDocument"] for p in role_of(function)["Properties"]["Policies"]}
    return document_grants(policies.get(policy_name, {}))


def document_grants(document: dict[str, Any]) -> set[Grant]:
    """(action, resource) pairs a policy document allows (Allow only, no conditions, no NotAction)."""
    found: set[Grant] = set()
    for statement in document.get("Statement", []):
        assert statement["Effect"] == "Allow" and "Condition" not in statement and "NotAction" not in statement
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        found |= {(action, resource_ref(target)) for action in actions for target in targets}
    return found


def handler_roots(function: str) -> list[str]:
    """The modules Lambda loads for the function: its Handler's, and a job-handler module it imports by name."""
    properties = RESOURCES[function]["Properties"]
    roots = [properties["Handler"].rpartition(".")[0]]
    module = properties.get("Environment", {}).get("Variables", {}).get("ONWARD_WORKER_MODULE")
    if module is not None:
        roots.append(TEMPLATE["Parameters"][module["Ref"]]["Default"])
    return roots


@cache
def reading(function: str) -> CodeReading:
    """The reading of the function's code (kept: each test of this module asks for it)."""
    return read_code(handler_roots(function))


def logical_id_of(resource: str) -> str:
    """`jobs_table` (settings.require) -> `JobsTable` (template)."""
    matches = [name for name in RESOURCES if environment_variable_for(name) == resource.upper()]
    assert len(matches) == 1, f"{resource}: template resources {matches}"
    return matches[0]


def index_owner() -> dict[str, str]:
    owners: dict[str, str] = {}
    for name, resource in RESOURCES.items():
        for index in resource.get("Properties", {}).get("GlobalSecondaryIndexes", []):
            assert index["IndexName"] not in owners, "index names must be unique across tables"
            owners[index["IndexName"]] = name
    return owners


def used_grants(code: CodeReading) -> dict[Grant, str]:
    """What the code calls, as grants: each action on the table, index or stream it names (codescan's
    accesses, "jobs_table" -> JobsTable), with the first call ("module:line") doing it."""
    owners = index_owner()
    used: dict[Grant, str] = {}
    for (action, resource, part), where in code.accesses.items():
        logical = logical_id_of(resource)
        if part.startswith("index/"):
            assert owners.get(part.removeprefix("index/")) == logical, f"{where}: {logical} has no {part}"
        used.setdefault((action, (logical, part)), where)
    return used


def assert_each_grant_is_used(holder: str, granted: set[Grant], code: CodeReading) -> None:
    """Each (action, table / index / stream) granted is one the code calls, and each one it calls is granted."""
    used = used_grants(code)
    missing = {f"{action} on {target_text(target)} ({used[(action, target)]})"
               for action, target in set(used) - granted}
    assert not missing, f"{holder}: missing {sorted(missing)} (the code calls them there)"
    unused = {f"{action} on {target_text(target)}" for action, target in granted - set(used)}
    assert not unused, f"{holder}: {sorted(unused)} granted but never called"


def target_text(target: tuple[str, str] | str) -> str:
    """("JobsTable", "arn") -> JobsTable, ("JobsTable", "index/ready") -> JobsTable/index/ready."""
    if isinstance(target, str):
        return target
    return target[0] if target[1] == "arn" else "/".join(target)


# --- the reading is not vacuous ----------------------------------------------------------------------------

def test_the_code_reading_finds_the_calls_each_component_is_known_to_make() -> None:
    """If the scanner stopped seeing calls, every comparison below would pass on an empty policy."""
    relay, projector, api = reading("RelayFunction"), reading("ProjectorFunction"), reading("ApiFunction")
    assert {"kinesis:PutRecords", "kinesis:ListShards", "dynamodb:UpdateItem"} <= relay.actions()
    assert "dynamodb:PutItem" in projector.actions() and "kinesis:PutRecords" not in projector.actions()
    # TransactWriteItems is no IAM action: its items' Put / Update / ConditionCheck are.
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"} <= api.actions()
    assert not any("Transact" in action for action in api.actions())
    assert {"ready", "by_listing"} <= api.index_names
    assert "events_stream" in relay.required_resources
    # each call's table is known: the relay's checkpoint write and the API's watermark Query land on theirs
    assert ("dynamodb:UpdateItem", "checkpoint_table", "arn") in relay.accesses
    assert ("dynamodb:Query", "checkpoint_table", "arn") in api.accesses


def test_the_reading_resolves_constants_to_the_index_a_call_names() -> None:
    """`onward overlaps` queries IndexName=OVERLAPS_INDEX, a module constant: a reading of literals only missed
    it, and OperatorPolicy went without the grant (AccessDenied on AWS)."""
    operators = read_code(operator_roots())
    assert ("dynamodb:Query", "jobs_table", "index/overlaps") in operators.accesses


# --- per function ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("function", FUNCTIONS)
def test_code_policy_grants_exactly_the_actions_the_code_calls(function: str) -> None:
    """Add `self._db.delete_item(...)` on the relay's path and this fails with "missing dynamodb:DeleteItem";
    grant an action no call path makes and it fails with "granted but never called"."""
    granted = {action for action, _ in grants(function, "code")}
    used = reading(function).actions()
    assert not used - granted, f"{function}: missing {sorted(used - granted)} (the code calls them)"
    assert not granted - used, f"{function}: {sorted(granted - used)} granted but never called"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_code_policy_grants_each_action_only_on_the_tables_the_code_calls_it_on(function: str) -> None:
    """Per table, index and stream: put dynamodb:Query back on the relay's CheckpointTable statement (the relay
    queries nothing) and this fails with "granted but never called"; drop the API's Query on CheckpointTable
    (the page's freshness reads the watermarks) and it fails with "missing"."""
    assert_each_grant_is_used(function, grants(function, "code"), reading(function))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_code_policy_names_exactly_the_tables_and_streams_the_code_requires(function: str) -> None:
    """Make code on the function's path read `settings.require("parked_table")` without granting ParkedTable
    (or grant a table the code never names) and this fails."""
    code = reading(function)
    granted = {target[0] for _, target in grants(function, "code") if target != "*"}
    required = {logical_id_of(resource) for resource in code.required_resources}
    assert granted == required, f"{function}: granted {sorted(granted)}, code requires {sorted(required)}"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_code_policy_grants_exactly_the_indexes_the_code_queries(function: str) -> None:
    """Query a new index (by a literal or a constant) without granting `<table>/index/<name>` and this fails;
    grant the `active` index to a function that never claims (the API) and it fails too."""
    owners = index_owner()
    granted = {target for _, target in grants(function, "code") if target != "*" and target[1].startswith("index/")}
    used = {(owners[name], f"index/{name}") for name in reading(function).index_names}
    assert granted == used, f"{function}: {sorted(granted - used)} never queried, missing {sorted(used - granted)}"
    queried_on_index = {action for action, target in grants(function, "code")
                        if target != "*" and target[1].startswith("index/")}
    assert queried_on_index <= {"dynamodb:Query"}  # an index is only ever queried


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_wildcard_resource_but_for_unscopable_actions(function: str) -> None:
    """Put "*" as the Resource of a data action (dynamodb:GetItem) and this fails: every table would be open."""
    for policy in ("code", "event-source", "telemetry"):
        wild = {action for action, target in grants(function, policy) if target == "*"}
        assert wild <= UNSCOPABLE, f"{function}/{policy}: {sorted(wild - UNSCOPABLE)} on *"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_action_targets_a_resource_of_its_kind(function: str) -> None:
    """Table actions on tables and indexes, stream reads on the table's stream, Kinesis on the stream."""
    for action, target in grants(function, "code") | grants(function, "event-source"):
        if target == "*":
            continue
        logical, part = target
        kind = RESOURCES[logical]["Type"]
        if action in STREAM_ACTIONS:
            assert (kind, part) == ("AWS::DynamoDB::Table", "stream"), (action, target)
        elif action.startswith("dynamodb:"):
            assert kind == "AWS::DynamoDB::Table" and part != "stream", (action, target)
        elif action.startswith("kinesis:"):
            assert kind == "AWS::Kinesis::Stream", (action, target)
        elif action.startswith("sqs:"):
            assert kind == "AWS::SQS::Queue", (action, target)
        else:
            raise AssertionError(f"{function}: unexpected {action} on {target}")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_event_source_policy_is_what_the_stream_event_needs(function: str) -> None:
    """Drop kinesis:GetRecords from the projector's event-source policy (its mapping could not read the stream),
    or add a read of another stream, and this fails."""
    expected: set[Grant] = set()
    for event in RESOURCES[function]["Properties"].get("Events", {}).values():
        if event["Type"] == "SQS":  # a queue's mapping (the webhook deliverer) receives and deletes for it
            expected |= {(action, resource_ref(event["Properties"]["Queue"])) for action in QUEUE_READ}
            continue
        if event["Type"] not in STREAM_READ:
            continue
        source = resource_ref(event["Properties"]["Stream"])
        expected |= {(action, source) for action in STREAM_READ[event["Type"]]}
        if event["Type"] == "DynamoDB":
            expected.add(("dynamodb:ListStreams", "*"))
        destination = event["Properties"].get("DestinationConfig", {}).get("OnFailure")
        if destination is not None:  # the worker's wake-ups have none (test_template_lambda_worker.py)
            assert destination["Type"] == "SQS"
            expected.add(("sqs:SendMessage", resource_ref(destination["Destination"])))
    assert grants(function, "event-source") == expected


@pytest.mark.parametrize("function", FUNCTIONS)
def test_telemetry_policy_is_its_own_log_group_and_xray(function: str) -> None:
    """Point a role's log statement at another function's log group (or drop X-Ray) and this fails."""
    log_group = RESOURCES[function]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    assert RESOURCES[log_group]["Type"] == "AWS::Logs::LogGroup"
    assert grants(function, "telemetry") == {
        ("logs:CreateLogStream", (log_group, "arn")), ("logs:PutLogEvents", (log_group, "arn")),
        ("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_role_has_only_these_policies_and_trusts_only_lambda(function: str) -> None:
    """Attach a managed policy (AWSLambdaDynamoDBExecutionRole reads every stream) or trust another principal and
    this fails."""
    properties = role_of(function)["Properties"]
    assert set(properties) == {"AssumeRolePolicyDocument", "Policies"}  # no managed policies
    # `archive`: the archive's Firehose or Athena grants (tests/unit/project/test_template_archive.py)
    allowed = {"code", "event-source", "telemetry"} | ({"archive"} if function in ARCHIVE_USERS else set())
    assert {p["PolicyName"] for p in properties["Policies"]} <= allowed
    assert properties["AssumeRolePolicyDocument"]["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    assert RESOURCES[function].get("Condition") == role_of(function).get("Condition")


def test_the_sam_transform_adds_no_role_and_no_managed_policy() -> None:
    """With `Role` set, SAM must not make its own role (it would attach AWSLambdaDynamoDBExecutionRole and
    AWSLambdaKinesisExecutionRole, which read every stream in the account)."""
    translated = translate()["Resources"]
    roles = {name for name, r in translated.items() if r["Type"] == "AWS::IAM::Role"}
    # DeployRole: CodeDeploy's for the gradual deployments, in place of SAM's (AWSCodeDeployRoleForLambda)
    # ArchiveDeliveryRole: Firehose's, to write the archive (test_template_archive.py checks what it grants)
    assert roles == {f"{function.removesuffix('Function')}Role" for function in FUNCTIONS} | ECS_WORKER_ROLES | {
        "DeployRole", "ArchiveDeliveryRole"}
    assert not any("ManagedPolicyArns" in translated[role]["Properties"] for role in roles)
    assert not any(r["Type"] == "AWS::IAM::Policy" for r in translated.values())
    # the one managed policy is the operators' own, attached to no role of the stack
    assert {name for name, r in translated.items() if r["Type"] == "AWS::IAM::ManagedPolicy"} == {
        "OperatorPolicy", "ArchiveReadPolicy"}  # the operators' (ArchiveReadPolicy: test_template_archive.py)
    assert not {"Roles", "Users", "Groups"} & set(translated["OperatorPolicy"]["Properties"])


# --- the operator commands ----------------------------------------------------------------------------------

# Commands that are not operations on a deployed stack: the local emulation, and the worker runtime (which has
# its own role).
# otlp-receiver: local, calls no AWS; regions: the local stack's two Regions (onward_infra.replication.command)
NOT_OPERATOR_COMMANDS = {"endpoint", "up", "worker", "otlp-receiver", "regions"}


def operator_roots() -> list[str]:
    """"module:function" of every `onward` subcommand's `run` (set_defaults(run=...)) but NOT_OPERATOR_COMMANDS:
    a new command joins the operator policy's reading by itself."""
    from onward.cli.main import build_parser

    roots: set[str] = set()
    todo: list[tuple[str, argparse.ArgumentParser]] = [("", build_parser())]
    while todo:
        path, parser = todo.pop()
        run = parser.get_default("run")
        if run is not None and path.split()[0] not in NOT_OPERATOR_COMMANDS:
            roots.add(f"{run.__module__}:{run.__qualname__}")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend((f"{path} {name}".strip(), sub) for name, sub in action.choices.items())
    return sorted(roots)


def operator_grants() -> set[Grant]:
    policy = RESOURCES["OperatorPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    return document_grants(policy["Properties"]["PolicyDocument"])


def assert_grants_are_the_reading(holder: str, granted: set[Grant], code: CodeReading) -> None:
    """`granted` (a role's or a managed policy's) is exactly what `code` calls: the actions, the tables it
    names, the indexes it queries, and nothing on "*"."""
    assert_each_grant_is_used(holder, granted, code)
    actions = {action for action, _ in granted}
    assert not code.actions() - actions, f"{holder}: missing {sorted(code.actions() - actions)}"
    assert not actions - code.actions(), f"{holder}: {sorted(actions - code.actions())} never called"
    tables = {target[0] for _, target in granted if target != "*"}
    assert tables == {logical_id_of(resource) for resource in code.required_resources}
    owners = index_owner()
    indexes = {target for _, target in granted if target != "*" and target[1].startswith("index/")}
    queried = {(owners[name], f"index/{name}") for name in code.index_names}
    assert indexes == queried, f"{holder}: {sorted(indexes - queried)} unused, missing {sorted(queried - indexes)}"
    assert not {action for action, target in granted if target == "*"}


def test_operator_policy_grants_exactly_what_the_operator_commands_call() -> None:
    """Drop dynamodb:Scan from OperatorPolicy and this fails with "missing" (`onward reconcile` scans every job);
    drop the `overlaps` index and it fails with "missing dynamodb:Query on JobsTable/index/overlaps"."""
    roots = operator_roots()
    assert {"onward.cli.main:cmd_replay", "onward.cli.main:cmd_reconcile", "onward.cli.bulk:cmd_bulk"} <= set(roots)
    assert_grants_are_the_reading("OperatorPolicy", operator_grants(), read_code(roots))


def test_operator_policy_is_a_stack_output() -> None:
    """Drop the output and operators have no ARN to attach (docs/deploy.md's `attach-role-policy`)."""
    assert TEMPLATE["Outputs"]["OperatorPolicyArn"]["Value"] == {"Ref": "OperatorPolicy"}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_only_the_operators_scan_or_read_the_outbox(function: str) -> None:
    """What only the operator commands call stays theirs: no function's role scans the jobs, the outbox or the
    view, nor reads the outbox (it is written in transitions' transactions and read from its stream by the relay's
    event source; the archiver alone reads a finished job's events by its key).
    Put dynamodb:Scan back on the worker's JobsTable statement, or dynamodb:Query on the reaper's
    OutboxTable one, and this fails (as does the per-table comparison: this names the reason)."""
    operator_only = {("dynamodb:Scan", ("JobsTable", "arn")), ("dynamodb:Scan", ("OutboxTable", "arn")),
                     ("dynamodb:Scan", ("StatusTable", "arn")), ("dynamodb:Query", ("OutboxTable", "arn")),
                     ("dynamodb:GetItem", ("OutboxTable", "arn"))}
    assert operator_only - {("dynamodb:GetItem", ("OutboxTable", "arn"))} <= operator_grants()
    # The archiver reads each finished job's events by its key (one Query), never a window or a scan.
    allowed = {("dynamodb:Query", ("OutboxTable", "arn"))} if function == "ArchiverFunction" else set()
    assert not grants(function, "code") & operator_only - allowed, function
    assert "dynamodb:Scan" not in reading(function).actions() or function == "ApiFunction"  # /ops/conflicts


# --- the ECS worker task (WorkerRuntime=ecs) ----------------------------------------------------------------

ECS_TASK_ROLE = "EcsWorkerTaskRole"
ECS_WORKER_ROLES = {ECS_TASK_ROLE, "EcsWorkerExecutionRole"}  # the code's; ECS's own (test_template_ecs.py)


def ecs_worker_roots() -> list[str]:
    """What a worker task runs: `onward worker` (onward/cli/main.py's cmd_worker: the Deployment's job store,
    a WorkerPool) over the handlers of the module the task names (WorkerModule's default here). The task
    publishes no metric (the backlog is the reaper's: onward.maintenance.backlog)."""
    return ["onward.cli.main:cmd_worker", TEMPLATE["Parameters"]["WorkerModule"]["Default"]]


def ecs_task_grants(policy_name: str) -> set[Grant]:
    policies = {p["PolicyName"]: p["PolicyDocument"] for p in RESOURCES[ECS_TASK_ROLE]["Properties"]["Policies"]}
    return document_grants(policies.get(policy_name, {}))


def test_the_ecs_task_role_grants_exactly_what_onward_worker_calls() -> None:
    """Grant dynamodb:Scan on the task role (the module onward.store.dynamo.recorder, which the worker loads, scans
    in all_jobs) and this fails with "never called"; drop dynamodb:ConditionCheckItem (claims check the
    tenant's counters in their transaction) and it fails with "missing"."""
    code = read_code(ecs_worker_roots())
    assert {"dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"} <= code.actions()  # the reading is not vacuous
    granted = ecs_task_grants("code")
    assert_grants_are_the_reading(ECS_TASK_ROLE, granted, code)
    assert {action for action, target in granted if target != "*" and target[1].startswith("index/")} == \
        {"dynamodb:Query"}
    policies = {p["PolicyName"]: p["PolicyDocument"] for p in RESOURCES[ECS_TASK_ROLE]["Properties"]["Policies"]}
    assert set(policies) == {"code", "task-protection"}
    # The ECS agent's task protection endpoint (no SDK call to read): this cluster's tasks, these two actions.
    assert policies["task-protection"]["Statement"] == [{
        "Effect": "Allow", "Action": ["ecs:UpdateTaskProtection", "ecs:GetTaskProtection"],
        "Resource": {"Fn::Sub": "arn:${AWS::Partition}:ecs:${AWS::Region}:${AWS::AccountId}:task/"
                                "${EcsWorkerCluster}/*"}}]


def test_the_ecs_task_runs_the_same_code_as_the_lambda_worker() -> None:
    """Both runtimes run the same worker over the same store: a difference means one of the two readings (or
    roles) misses something the other one sees."""
    ecs, function = read_code(ecs_worker_roots()), reading("WorkerFunction")
    assert (ecs.actions(), ecs.index_names, ecs.required_resources) == \
        (function.actions(), function.index_names, function.required_resources)

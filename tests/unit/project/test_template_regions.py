"""template.yaml's regional recovery (issue 39; docs/regional-recovery.md, docs/deploy.md#a-standby-region): one
template, RegionRole single (default), home or standby.

- single is today's stack: nothing of regional recovery is left in it, the jobs and outbox tables keep their
  logical ids, type and replacing properties, so changing nothing but the template never replaces them;
- home declares the global tables (both replicas, the jobs table's stream NEW_AND_OLD_IMAGES) unless told the other
  stack does; standby declares no table and reads its replicas' streams by label;
- standby turns off everything that acts on jobs (schedules, the worker's wake-ups, ECS, the archiver's, the
  webhook matcher's and deliverer's mappings) and keeps the relay and projector on;
- the fence reconciler's role is least privilege; the witness is read by the writers and written by operators only;
- HomeRegionLost and ReplicatedHeartbeatAge exist in the standby only.

Checked on the template as each role's stack sees it (onward_infra.region_roles) and on its SAM translation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from onward_infra.region_roles import REGIONAL_CONDITIONS, ROLES, for_region_role
from onward_infra.template import load_template, referenced_names
from tests.codescan import read_code
from tests.samtemplate import cfn_lint, translate, write_json

RAW = load_template(role=None)
REGIONAL_PARAMETERS = {"RegionRole", "ReplicaRegion", "ReplicatedTables", "JobsStreamLabel", "OutboxStreamLabel",
                       "WitnessRegion", "WitnessParameterName", "AuthorityLeaseSeconds", "AuthorityCheckSeconds",
                       "HomeApiHost", "ReconcilerEnabled"}
REGIONAL_RESOURCES = {"JobsGlobalTable", "OutboxGlobalTable", "ReconcilerFailuresQueue", "ReconcilerLogGroup",
                      "ReconcilerRole", "ReconcilerFunction", "WitnessReadPolicy", "ReplicatedHeartbeatAgeAlarm",
                      "HomeRegionLostAlarm", "HomeApiHealthCheck", "ReplicationLagHighAlarm"}
AUTHORITY_VARIABLES = {"ONWARD_WITNESS", "ONWARD_HOME_REGION", "ONWARD_AUTHORITY_LEASE_S", "ONWARD_AUTHORITY_CHECK_S"}
JOBS_ARN = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${AWS::StackName}-jobs"
OUTBOX_ARN = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${AWS::StackName}-outbox"
WITNESS_ARN = "arn:${AWS::Partition}:ssm:${WitnessRegion}:${AWS::AccountId}:parameter/onward/${AWS::StackName}/home"


def stack(role: str, **parameters: Any) -> dict[str, Any]:
    return for_region_role(RAW, role, **parameters)


def resources(role: str, **parameters: Any) -> dict[str, Any]:
    found: dict[str, Any] = stack(role, **parameters)["Resources"]
    return found


def walk(node: Any) -> Any:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from walk(child)


def conditions_named(node: Any) -> set[str]:
    names = set()
    for item in walk(node):
        if isinstance(item, dict):
            if isinstance(item.get("Condition"), str):
                names.add(item["Condition"])
            if isinstance(item.get("Fn::If"), list):
                names.add(item["Fn::If"][0])
    return names


def test_a_single_region_stack_keeps_no_trace_of_regional_recovery() -> None:
    """RegionRole=single (the default, what every existing stack deploys): no resource of regional recovery, no
    resource, global or output naming one of its parameters or conditions. Without the `!If [SingleRegion, ...]`
    around each table reference (or with a regional resource left unconditioned), an existing stack would change
    on its next deploy, its tables' references first."""
    single = stack("single")
    assert not REGIONAL_RESOURCES & set(single["Resources"])
    everything = (single["Resources"], single["Globals"], single["Outputs"])
    assert not referenced_names(everything) & (REGIONAL_PARAMETERS - {"RegionRole"})
    assert not conditions_named(everything) & REGIONAL_CONDITIONS
    assert set(single["Resources"]) == {name for name, resource in RAW["Resources"].items()
                                        if resource.get("Condition") not in REGIONAL_CONDITIONS - {"SingleRegion"}}


def test_a_single_region_stack_keeps_its_tables_as_they_are() -> None:
    """The jobs and outbox tables stay AWS::DynamoDB::Table under their logical ids, with today's name, key, no
    jobs stream (NEW_AND_OLD_IMAGES comes with the global table) and the outbox's NEW_IMAGE stream: a type change
    or a new logical id would delete and recreate the table holding the data."""
    single = resources("single")
    for name, suffix in (("JobsTable", "jobs"), ("OutboxTable", "outbox")):
        table = single[name]
        assert table["Type"] == "AWS::DynamoDB::Table" and "Condition" not in table
        assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
        assert table["Properties"]["TableName"] == {"Fn::Sub": f"${{AWS::StackName}}-{suffix}"}
    assert "StreamSpecification" not in single["JobsTable"]["Properties"]
    assert single["OutboxTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    # every reference to the tables is still the resource's own (an implicit dependency, as before)
    api = single["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api["JOBS_TABLE"] == {"Ref": "JobsTable"} and api["OUTBOX_TABLE"] == {"Ref": "OutboxTable"}


@pytest.mark.parametrize("role", ["home", "standby"])
def test_the_jobs_and_outbox_tables_are_global_tables_declared_by_one_stack(role: str) -> None:
    """The stack that owns the global tables (home by default) declares both replicas; the other declares none
    (AWS: define all replicas of a global table in one Region's stack, or replica updates fail on drift), so a
    standby never tries to create a table its Region already has."""
    owned = resources(role, ReplicatedTables="owned")
    assert not {"JobsTable", "OutboxTable"} & set(owned)
    for name in ("JobsGlobalTable", "OutboxGlobalTable"):
        table = owned[name]
        assert table["Type"] == "AWS::DynamoDB::GlobalTable"
        assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
        assert [replica["Region"] for replica in table["Properties"]["Replicas"]] == [
            {"Ref": "AWS::Region"}, {"Ref": "ReplicaRegion"}]
        assert all(replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
                   for replica in table["Properties"]["Replicas"])
    assert owned["JobsGlobalTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert owned["OutboxGlobalTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    replica = resources(role, ReplicatedTables="replica")
    assert not {"JobsTable", "OutboxTable", "JobsGlobalTable", "OutboxGlobalTable"} & set(replica)


def test_the_defaults_make_home_own_the_tables_and_standby_read_its_replicas() -> None:
    assert "JobsGlobalTable" in resources("home") and "JobsGlobalTable" not in resources("standby")
    relay_stream = resources("standby")["RelayFunction"]["Properties"]["Events"]["Outbox"]["Properties"]["Stream"]
    assert relay_stream == {"Fn::Sub": OUTBOX_ARN + "/stream/${OutboxStreamLabel}"}
    assert resources("home")["RelayFunction"]["Properties"]["Events"]["Outbox"]["Properties"]["Stream"] == {
        "Fn::GetAtt": ["OutboxGlobalTable", "StreamArn"]}


@pytest.mark.parametrize(("table", "global_table"), [("JobsTable", "JobsGlobalTable"),
                                                     ("OutboxTable", "OutboxGlobalTable")])
def test_a_global_table_is_the_table_it_continues(table: str, global_table: str) -> None:
    """Name, billing, key, attributes, indexes and TTL as the single-Region table's: a resource import of the
    converted table (docs/deploy.md#turning-a-single-region-stack-into-a-home) must describe it as it is, and
    the code reads the same indexes in both."""
    before = resources("single")[table]["Properties"]
    after = resources("home")[global_table]["Properties"]
    for name in ("TableName", "BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes",
                 "TimeToLiveSpecification"):
        assert after[name] == before[name], name


def test_a_detached_home_declares_no_table_and_still_names_them() -> None:
    """The migration's middle step (ReplicatedTables=detached): the tables are out of the stack (retained), and
    every function still reads the same table names, so the platform keeps running while they are converted."""
    detached = resources("home", ReplicatedTables="detached")
    assert not {"JobsTable", "OutboxTable", "JobsGlobalTable", "OutboxGlobalTable"} & set(detached)
    variables = detached["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["JOBS_TABLE"] == {"Fn::Sub": "${AWS::StackName}-jobs"}
    assert variables["OUTBOX_TABLE"] == {"Fn::Sub": "${AWS::StackName}-outbox"}


def test_the_stack_policy_refuses_replacing_or_deleting_both_forms_of_the_tables() -> None:
    """Changing RegionRole single -> home on an existing stack removes JobsTable and adds JobsGlobalTable: the
    policy's Update:Delete on JobsTable stops that update before anything happens (the documented path is the
    import), and once imported the global tables are protected as the tables were."""
    policy = (Path(__file__).parents[3] / "stack-policy.json").read_text()
    for name in ("JobsTable", "OutboxTable", "JobsGlobalTable", "OutboxGlobalTable", "ReconcilerFailuresQueue"):
        assert f'"LogicalResourceId/{name}"' in policy


def translated(role: str, **parameters: Any) -> dict[str, Any]:
    result: dict[str, Any] = translate(stack(role, **parameters))["Resources"]
    return result


def by_type(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    return {name: resource for name, resource in template.items() if resource["Type"] == resource_type}


def test_a_standby_runs_nothing_that_acts_on_jobs() -> None:
    """Each schedule that claims, reaps or creates jobs is DISABLED; each mapping that acts on jobs (the worker's
    wake-ups, the archiver, the webhook matcher and deliverer) is Enabled false; ECS starts with 0 tasks and its
    scaling is held at 0. Without it the standby would claim the replicated queue beside the home."""
    standby = translated("standby")
    rules = by_type(standby, "AWS::Events::Rule")
    for name in ("ReaperFunctionSchedule", "SchedulerFunctionSchedule", "WorkerFunctionSchedule"):
        assert rules[name]["Properties"]["State"] == "DISABLED", name
    mappings = by_type(standby, "AWS::Lambda::EventSourceMapping")
    for name in ("WorkerFunctionWake", "ArchiverFunctionEvents", "WebhookMatcherFunctionEvents",
                 "WebhookDelivererFunctionDeliveries"):
        assert mappings[name]["Properties"]["Enabled"] is False, name
    assert standby["EcsWorkerService"]["Properties"]["DesiredCount"] == 0
    scaling = standby["EcsWorkerScalableTarget"]["Properties"]
    assert (scaling["MinCapacity"], scaling["MaxCapacity"]) == (0, 0)


def test_a_standby_keeps_its_pipeline_warm() -> None:
    """The relay and projector carry the home's replicated heartbeats into the standby's view. Disabling them
    would leave the standby's view cold."""
    mappings = by_type(translated("standby"), "AWS::Lambda::EventSourceMapping")
    for name in ("RelayFunctionOutbox", "ProjectorFunctionEvents"):
        assert mappings[name]["Properties"].get("Enabled", True) is True, name


@pytest.mark.parametrize("role", ["home", "standby"])
def test_the_reconcilers_mapping_polls_only_where_a_failover_made_the_region_home(role: str) -> None:
    """Issue 39's gaps, the reconciler's idle cost: before a failover every batch of the jobs table's stream was an
    invocation (and a GetItem of the epoch item) that skipped every record, and no filter could drop them (an old
    home's late write at epoch 0 carries no stamp; tests/lambda_filters.py: a filter on the stamp drops it). So
    the mapping is created disabled in both roles, still reading from the trim horizon once enabled, and
    ReconcilerEnabled=true (the runbook's redeploy of a new home) keeps it on."""
    mapping = by_type(translated(role), "AWS::Lambda::EventSourceMapping")["ReconcilerFunctionJobs"]["Properties"]
    assert mapping["Enabled"] is False and mapping["StartingPosition"] == "TRIM_HORIZON"
    assert "FilterCriteria" not in mapping or "region_epoch" not in str(mapping["FilterCriteria"])
    enabled = by_type(translated(role, ReconcilerEnabled="true"), "AWS::Lambda::EventSourceMapping")
    assert enabled["ReconcilerFunctionJobs"]["Properties"]["Enabled"] is True


def test_operators_may_enable_the_reconcilers_mapping_and_nothing_else_of_lambda() -> None:
    """`onward failover --reconciler-mapping <ReconcilerMappingId>` enables it (onward.operator.reconciler_switch):
    without the grant it is AccessDenied and the runbook's command must be run by hand; with a wider one an
    operator could repoint any mapping of the account."""
    home = stack("home")
    statements = [statement for statement in walk(home["Resources"]["OperatorPolicy"]["Properties"])
                  if isinstance(statement, dict) and "lambda:" in str(statement.get("Action", ""))]
    assert statements == [{"Effect": "Allow", "Action": ["lambda:UpdateEventSourceMapping"], "Resource": {
        "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:event-source-mapping:"
                   "${ReconcilerFunctionJobs}"}}]
    assert home["Outputs"]["ReconcilerMappingId"]["Value"] == {"Ref": "ReconcilerFunctionJobs"}
    assert "lambda:" not in str(stack("single")["Resources"]["OperatorPolicy"])
    assert "ReconcilerFunctionJobs" in translate(home)["Resources"]  # the name the policy and output refer to


@pytest.mark.parametrize("role", ["single", "home"])
def test_a_home_or_single_stack_runs_everything(role: str) -> None:
    """No schedule disabled, no mapping off, the ECS count the scaling's: what the standby turns off is on."""
    stack_resources = translated(role)
    assert all("State" not in rule["Properties"] for name, rule in by_type(stack_resources, "AWS::Events::Rule").items()
               if name.endswith("Schedule"))
    assert all("Enabled" not in mapping["Properties"]
               for name, mapping in by_type(stack_resources, "AWS::Lambda::EventSourceMapping").items()
               if name != "ReconcilerFunctionJobs")  # (off until a failover: the test above)
    assert "DesiredCount" not in stack_resources["EcsWorkerService"]["Properties"]
    assert stack_resources["EcsWorkerScalableTarget"]["Properties"]["MinCapacity"] == {"Ref": "WorkerMinTasks"}


@pytest.mark.parametrize("role", ROLES)
def test_every_function_and_the_worker_task_get_the_authority_variables_in_home_and_standby(role: str) -> None:
    """ONWARD_WITNESS, ONWARD_HOME_REGION and the lease's two periods on every function and the ECS container in
    home and standby (a process without them would never fence itself); none in a single-Region stack."""
    template = translated(role)
    functions = by_type(template, "AWS::Lambda::Function")
    assert functions
    for name, function in functions.items():
        variables = set(function["Properties"].get("Environment", {}).get("Variables", {}))
        assert (variables >= AUTHORITY_VARIABLES) if role != "single" else not (AUTHORITY_VARIABLES & variables), name
    container = template["EcsWorkerTaskDefinition"]["Properties"]["ContainerDefinitions"][0]
    names = {variable["Name"] for variable in container["Environment"]}
    assert (names >= AUTHORITY_VARIABLES) if role != "single" else not (AUTHORITY_VARIABLES & names)
    if role == "standby":
        api = functions["ApiFunction"]["Properties"]["Environment"]["Variables"]
        assert api["ONWARD_HOME_REGION"] == {"Ref": "ReplicaRegion"}
        assert api["ONWARD_WITNESS"] == {"Fn::Sub": "ssm:${WitnessRegion}:/onward/${AWS::StackName}/home"}


def policy_statements(role: dict[str, Any], policy_name: str) -> list[dict[str, Any]]:
    (policy,) = [p for p in role["Properties"]["Policies"] if p["PolicyName"] == policy_name]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


@pytest.mark.parametrize("tables", ["owned", "replica"])
def test_the_reconciler_may_only_read_its_stream_and_read_and_write_single_jobs(tables: str) -> None:
    """Least privilege: on the tables exactly the actions the code scan (tests/codescan.py) reads from the
    handler's call paths (reconciler/app.py: single jobs items and its job's partition, a transaction's items
    authorised as their actions, an adoption's outbox event); no Scan, index or other table; its stream and
    nothing else to read; its own on-failure queue. Drop Query (the reconciler reads a job's partition) and this
    fails as "granted != called"; a grant of Scan or of the status table fails the same way."""
    home = resources("home", ReplicatedTables=tables)
    role = home["ReconcilerRole"]
    code = {(action, str(statement["Resource"])) for statement in policy_statements(role, "code")
            for action in statement["Action"]}
    arns = {"jobs_table": JOBS_ARN, "outbox_table": OUTBOX_ARN}
    accesses = read_code(["reconciler.app"]).accesses
    assert {part for _, _, part in accesses} == {"arn"}  # no index, no stream read by the code itself
    called = {(action, str({"Fn::Sub": arns[table]})) for action, table, _ in accesses}
    assert code == called, f"granted != called: {sorted(code ^ called)}"
    source = policy_statements(role, "event-source")
    stream = home["ReconcilerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]["Stream"]
    assert source[0] == {"Effect": "Allow", "Action": ["dynamodb:DescribeStream", "dynamodb:GetRecords",
                                                       "dynamodb:GetShardIterator"], "Resource": stream}
    assert stream == ({"Fn::GetAtt": ["JobsGlobalTable", "StreamArn"]} if tables == "owned"
                      else {"Fn::Sub": JOBS_ARN + "/stream/${JobsStreamLabel}"})
    assert source[1:] == [{"Effect": "Allow", "Action": ["dynamodb:ListStreams"], "Resource": "*"},
                          {"Effect": "Allow", "Action": ["sqs:SendMessage"],
                           "Resource": {"Fn::GetAtt": ["ReconcilerFailuresQueue", "Arn"]}}]
    mapping = home["ReconcilerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    queue = {"Fn::GetAtt": ["ReconcilerFailuresQueue", "Arn"]}
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == queue
    assert mapping["BisectBatchOnFunctionError"] is True and mapping["FunctionResponseTypes"] == [
        "ReportBatchItemFailures"]
    assert home["ReconcilerFunction"]["Properties"]["Handler"] == "reconciler.app.handler"


def test_the_witness_is_read_by_the_writers_and_written_by_operators_only() -> None:
    """ssm:GetParameter on the one witness parameter for every role that writes the jobs or outbox table, nothing
    else of SSM; ssm:PutParameter only in OperatorPolicy (`onward failover`), only when there is a witness."""
    home = resources("home")
    policy = home["WitnessReadPolicy"]["Properties"]
    assert policy["PolicyDocument"]["Statement"] == [{
        "Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": {"Fn::Sub": WITNESS_ARN}}]
    named = resources("home", WitnessParameterName="/ops/onward-home")["WitnessReadPolicy"]["Properties"]
    assert named["PolicyDocument"]["Statement"][0]["Resource"] == {
        "Fn::Sub": "arn:${AWS::Partition}:ssm:${WitnessRegion}:${AWS::AccountId}:parameter${WitnessParameterName}"}
    roles = {role["Ref"] if "Ref" in role else role["Fn::If"][1]["Ref"] for role in policy["Roles"]}
    assert roles == {"ApiRole", "RelayRole", "ReaperRole", "SchedulerRole", "WebhookMatcherRole",
                     "WebhookDelivererRole", "ReconcilerRole", "WorkerRole", "EcsWorkerTaskRole"}
    iam = ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy")
    writers = [name for name, resource in home.items()
               if resource["Type"] in iam and "ssm:PutParameter" in str(resource)]
    assert writers == ["OperatorPolicy"]
    assert "ssm:" not in str(resources("single")["OperatorPolicy"])


def test_the_failover_alarms_exist_in_the_standby_only() -> None:
    """HomeRegionLost and ReplicatedHeartbeatAge watch the home from outside it: in the standby only (an alarm in
    the Region it watches is lost with it). ReplicationLagHigh watches a Region's outgoing replication: in both
    replicated roles, so whichever writes watches its RPO; none in a single-Region stack."""
    single, home, standby = (set(resources(role)) for role in ROLES)
    failover = {"HomeRegionLostAlarm", "ReplicatedHeartbeatAgeAlarm"}
    assert failover <= standby and not failover & home and not failover & single
    assert "ReplicationLagHighAlarm" in home & standby and "ReplicationLagHighAlarm" not in single


def test_home_region_lost_pages_when_no_fresh_heartbeat_reaches_the_standby() -> None:
    """Age above 2 heartbeat intervals, or no age at all (missing data breaches: a lost home sends nothing), for
    every minute of a window of 3 (default 60 s heartbeats; up to 5 minutes for 240 s ones, so a healthy home's
    beats land in each window); ReplicatedHeartbeatAge is the same measure when heartbeats still arrive, late."""
    standby = resources("standby")
    lost = standby["HomeRegionLostAlarm"]["Properties"]
    age = standby["ReplicatedHeartbeatAgeAlarm"]["Properties"]
    for alarm in (lost, age):
        metric = alarm["Metrics"][0]["MetricStat"]
        assert metric["Metric"] == {"Namespace": "Onward", "MetricName": "ReplicatedHeartbeatAgeSeconds",
                                    "Dimensions": [{"Name": "service", "Value": "projector"}]}
        assert (metric["Period"], metric["Stat"]) == (60, "Maximum")
        assert alarm["Metrics"][1]["Expression"] == {"Fn::Sub": "age / ${HeartbeatIntervalSeconds}"}
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (2, "GreaterThanThreshold")
    assert lost["TreatMissingData"] == "breaching" and age["TreatMissingData"] == "notBreaching"
    minutes = {key: row["Minutes"] for key, row in RAW["Mappings"]["HeartbeatLostMinutes"].items()}
    assert minutes["60"] == 3
    allowed = RAW["Parameters"]["HeartbeatIntervalSeconds"]
    assert all(int(key) + 60 <= 60 * value or int(key) == 60 for key, value in minutes.items())
    assert {int(key) for key in minutes} == set(range(allowed["MinValue"], allowed["MaxValue"] + 1, 60))


def test_replication_lag_high_is_the_jobs_tables_outgoing_latency_above_5_s_for_3_minutes() -> None:
    lag = resources("standby")["ReplicationLagHighAlarm"]["Properties"]
    assert (lag["Namespace"], lag["MetricName"], lag["Statistic"]) == ("AWS/DynamoDB", "ReplicationLatency", "Maximum")
    assert lag["Dimensions"] == [{"Name": "TableName", "Value": {"Fn::Sub": "${AWS::StackName}-jobs"}},
                                 {"Name": "ReceivingRegion", "Value": {"Ref": "ReplicaRegion"}}]
    assert (lag["Threshold"], lag["Period"], lag["EvaluationPeriods"], lag["DatapointsToAlarm"]) == (5000, 60, 3, 3)


def test_the_route_53_health_check_of_the_home_api_is_the_standbys_when_given_a_host() -> None:
    check = resources("standby", HomeApiHost="api.example.com")["HomeApiHealthCheck"]["Properties"]
    assert check["HealthCheckConfig"] == {"Type": "HTTPS", "FullyQualifiedDomainName": {"Ref": "HomeApiHost"},
                                          "ResourcePath": "/health", "RequestInterval": 30, "FailureThreshold": 3}
    assert "HomeApiHealthCheck" not in resources("standby") and "HomeApiHealthCheck" not in resources(
        "home", HomeApiHost="api.example.com")


def test_cfn_lint_finds_nothing_in_the_translation_of_every_role(tmp_path: Path) -> None:
    """The template as written (every role's conditions) through the SAM transform: what CloudFormation deploys."""
    assert cfn_lint(write_json(translate(RAW), tmp_path / "translated.json")) == []


def test_an_imported_home_given_the_labels_keeps_its_mappings_sources() -> None:
    """The import's change set may only add the imported tables: with the stream labels given, the mappings and
    roles of an owning home name the streams as the detached stack did, so the import changes nothing else. A
    fresh home (no label) names its own global tables' streams."""
    labels = {"JobsStreamLabel": "2026-12-04T14:15:03.123", "OutboxStreamLabel": "2026-11-01T09:00:00.000"}
    detached = resources("home", ReplicatedTables="detached", **labels)
    imported = resources("home", ReplicatedTables="owned", **labels)
    assert set(imported) - set(detached) == {"JobsGlobalTable", "OutboxGlobalTable"}
    assert {name: imported[name] for name in detached} == detached


def test_the_standby_bill_counts_the_standby_templates_own_alarms() -> None:
    """bench.standby_cost prices the standby as the template deploys it (RegionRole=standby): its alarm line is
    the standby's alarm metrics, HomeRegionLost, ReplicatedHeartbeatAge and ReplicationLagHigh among them. A
    constant in the bench instead would drift from the template the first time an alarm is added."""
    from bench.idle_cost import PROFILES, Deployment, alarm_metrics
    from bench.standby_cost import standby_bill

    for profile in PROFILES.values():
        deployment = Deployment(profile)
        (line,) = [line for line in standby_bill(deployment) if line.resource_types == "AWS::CloudWatch::Alarm"]
        standby = Deployment({**deployment.parameters, "RegionRole": "standby"}, RAW)
        alarms = standby.of_type("AWS::CloudWatch::Alarm")
        assert {"HomeRegionLostAlarm", "ReplicatedHeartbeatAgeAlarm", "ReplicationLagHighAlarm"} <= set(alarms)
        assert line.quantity == sum(alarm_metrics(alarm) for alarm in alarms.values())


def test_no_filter_on_the_stamp_could_replace_the_disabled_mapping() -> None:
    """Why the mapping is disabled rather than filtered (Lambda's DynamoDB event filtering, the `exists`
    operator): records are stamped `region_epoch` only at epoch > 0, so a filter passing records whose new or old
    image carries the stamp would drop a job the old home created at epoch 0 during a partition, arriving
    after the failover: exactly a record the reconciler must adopt. (Were a stamp on every write at epoch 0
    added instead, every write would pay its bytes.)"""
    from moto.events.models import EventPattern

    from onward.domain.fence_reconciliation import Action, decide
    from onward.pipeline.fence_reconciler.reconciler import plain

    stamped = [{"Pattern": json.dumps({"dynamodb": {image: {"region_epoch": {"N": [{"exists": True}]}}}})}
               for image in ("NewImage", "OldImage")]
    late_create = {"pk": {"S": "JOB#" + "a" * 32}, "sk": {"S": "JOB"}, "state": {"S": "queued"},
                   "attempt": {"N": "0"}, "version": {"N": "1"}}  # the old home's, epoch 0: no stamp
    assert decide(None, plain(late_create), 1).action is Action.ADOPT
    record = {"eventName": "INSERT", "dynamodb": {"NewImage": late_create, "SequenceNumber": "1"}}
    assert not any(EventPattern.load(f["Pattern"]).matches_event(record) for f in stamped)
    adopted = {**late_create, "region_epoch": {"N": "1"}}  # the filter does pass a stamped image
    assert EventPattern.load(stamped[0]["Pattern"]).matches_event({"dynamodb": {"NewImage": adopted}})

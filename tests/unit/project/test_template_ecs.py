"""The container workers of template.yaml (WorkerRuntime=ecs, the default): `onward worker` on Fargate with
its own roles and log group, stopped gracefully, and scaled on the reaper's backlog counts from WorkerMinTasks
(0 allowed) to WorkerMaxTasks. Checked offline: the template's resources under each runtime, the container's
command read back by the real command-line parser, and the scaling policy evaluated as Application Auto
Scaling applies it. The task role's actions against the code are tests/unit/project/test_template_policies.py's (as
the functions' roles); the lint of the template and of its SAM translation is tests/unit/project/test_template.py's,
and the reaper's metrics as the alarm reads them tests/integration/maintenance/test_backlog_metric.py's."""

from __future__ import annotations

import inspect
import itertools
import math
import re
from typing import Any

import pytest

from onward.cli.main import DEFAULT_STOP_TIMEOUT_S, build_parser
from onward.runtime.execution import KILL_GRACE_S
from onward.runtime.pool import RELEASE_WAIT_S, WorkerPool
from onward_infra.template import load_template
from tests.codescan import read_code
from tests.samtemplate import translate
from tests.unit.project.test_template_policies import ecs_worker_roots

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PARAMETERS: dict[str, Any] = TEMPLATE["Parameters"]
ECS_RESOURCES = {"EcsWorkerCluster", "EcsWorkerLogGroup", "EcsWorkerSecurityGroup", "EcsWorkerExecutionRole",
                 "EcsWorkerTaskRole", "EcsWorkerTaskDefinition", "EcsWorkerService", "EcsWorkerScalableTarget",
                 "EcsWorkerScalingPolicy", "EcsWorkerDemandAlarm", "EcsWorkerStoppedTasksLogGroup",
                 "EcsWorkerStoppedTasksLogPolicy", "EcsWorkerStoppedTasksRule", "EcsWorkerTasksStoppedAlarm"}
PSEUDO = {"AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::StackName", "AWS::URLSuffix", "AWS::NoValue",
          "AWS::StackId"}
FARGATE_MAX_STOP_TIMEOUT_S = 120
STOP_GRACE_S = 5.0  # WorkerPool's default stop_grace_s, which `onward worker` uses


def container() -> dict[str, Any]:
    definitions: list[dict[str, Any]] = RESOURCES["EcsWorkerTaskDefinition"]["Properties"]["ContainerDefinitions"]
    (definition,) = definitions
    return definition


def container_environment() -> dict[str, Any]:
    return {variable["Name"]: variable["Value"] for variable in container()["Environment"]}


def default(value: Any) -> str:
    """A literal, or a Ref to a parameter as its default."""
    if isinstance(value, dict) and "Ref" in value:
        return str(PARAMETERS[value["Ref"]]["Default"])
    assert isinstance(value, str | int), value
    return str(value)


# --- which resources each runtime gets ----------------------------------------------------------------------

def condition_holds(name: str, parameters: dict[str, Any]) -> bool:
    def evaluate(node: Any) -> Any:
        if isinstance(node, dict):
            ((function, argument),) = node.items()
            if function == "Ref":
                return parameters.get(argument, PARAMETERS.get(argument, {}).get("Default"))
            if function == "Condition":
                return condition_holds(argument, parameters)
            values = [evaluate(item) for item in argument]
            return {"Fn::Equals": lambda: str(values[0]) == str(values[1]), "Fn::Not": lambda: not values[0],
                    "Fn::And": lambda: all(values), "Fn::Or": lambda: any(values)}[function]()
        return node

    return bool(evaluate(TEMPLATE["Conditions"][name]))


def created(parameters: dict[str, Any]) -> set[str]:
    return {name for name, resource in RESOURCES.items()
            if "Condition" not in resource or condition_holds(resource["Condition"], parameters)}


def references(node: Any, parameters: dict[str, Any]) -> set[str]:
    """Resources and parameters a node names (Ref, Fn::GetAtt, ${...} in Fn::Sub), Fn::If resolved."""
    if isinstance(node, list):
        return set().union(*(references(item, parameters) for item in node))
    if not isinstance(node, dict):
        return set()
    if "Fn::If" in node:
        condition, if_true, if_false = node["Fn::If"]
        return references(if_true if condition_holds(condition, parameters) else if_false, parameters)
    if isinstance(node.get("Ref"), str):
        return {node["Ref"]}
    if "Fn::GetAtt" in node:
        return {node["Fn::GetAtt"][0]}
    found: set[str] = set()
    if "Fn::Sub" in node:
        text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
        found |= {name.split(".")[0] for name in re.findall(r"\$\{([^!}][^}]*)\}", text)} - set(variables)
        return found | references(list(variables.values()), parameters)
    return set().union(*(references(value, parameters) for value in node.values()))


@pytest.mark.parametrize("runtime", ["ecs", "lambda", "none"])
def test_the_ecs_resources_exist_only_with_the_ecs_runtime(runtime: str) -> None:
    """An ECS resource without the condition would be created (and fail, with no image) under lambda or none;
    a resource of another runtime naming one would fail the deploy there."""
    parameters = {"WorkerRuntime": runtime}
    made = created(parameters)
    assert made & ECS_RESOURCES == (ECS_RESOURCES if runtime == "ecs" else set())
    assert {name for name, r in RESOURCES.items()
            if r["Type"].startswith(("AWS::ECS::", "AWS::ApplicationAutoScaling::"))} <= ECS_RESOURCES
    for name in made:
        named = references(RESOURCES[name], parameters) - set(PARAMETERS) - PSEUDO
        assert named <= made, f"{name} names {sorted(named - made)}, not created with WorkerRuntime={runtime}"
    for name, output in TEMPLATE.get("Outputs", {}).items():
        if "Condition" in output and not condition_holds(output["Condition"], parameters):
            continue
        assert references(output, parameters) - set(PARAMETERS) - PSEUDO <= made, name


def test_the_default_runtime_is_ecs_and_its_condition_says_so() -> None:
    assert PARAMETERS["WorkerRuntime"]["Default"] == "ecs"
    assert TEMPLATE["Conditions"]["WorkerOnEcs"] == {"Fn::Equals": [{"Ref": "WorkerRuntime"}, "ecs"]}


def test_a_deploy_with_ecs_but_no_image_or_network_is_refused_up_front() -> None:
    """The image and network parameters default to empty (the other runtimes need none): without the rule, an
    ecs deploy with them empty would fail half-way, at the task definition or the service."""
    rule = TEMPLATE["Rules"]["EcsWorkersNeedAnImageAndANetwork"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "WorkerRuntime"}, "ecs"]}
    asserted = [assertion["Assert"] for assertion in rule["Assertions"]]
    assert {"Fn::Not": [{"Fn::Equals": [{"Ref": "WorkerImage"}, ""]}]} in asserted
    assert {"Fn::Not": [{"Fn::Equals": [{"Ref": "WorkerVpcId"}, ""]}]} in asserted
    assert {"Fn::Not": [{"Fn::Contains": [{"Ref": "WorkerSubnets"}, ""]}]} in asserted
    assert "Rules" in translate()  # the SAM transform keeps them


# --- the task: what it runs, with what, where its logs go -------------------------------------------------

def test_the_container_runs_onward_worker_with_the_modules_handlers() -> None:
    """The command is read back by `onward`'s own parser: a flag it lacks, or a module other than WorkerModule,
    fails here instead of in a crash-looping task."""
    command = [*container()["EntryPoint"], *container()["Command"]]
    assert command[:2] == ["onward", "worker"]
    assert container()["Image"] == {"Ref": "WorkerImage"}
    args = build_parser().parse_args([default(part) for part in command[1:]])
    assert args.run.__name__ == "cmd_worker"
    assert args.module == PARAMETERS["WorkerModule"]["Default"]
    assert container()["Command"][container()["Command"].index("--module") + 1] == {"Ref": "WorkerModule"}
    assert container()["Command"][container()["Command"].index("--concurrency") + 1] == \
        {"Ref": "WorkerTaskConcurrency"}
    assert args.concurrency == PARAMETERS["WorkerTaskConcurrency"]["Default"]
    assert args.lease_s == PARAMETERS["WorkerLeaseSeconds"]["Default"]
    # an init as PID 1 forwards ECS's SIGTERM and reaps what handlers leave
    assert container()["LinuxParameters"] == {"InitProcessEnabled": True}


def test_the_container_gets_the_lambda_workers_variables_and_its_stop_timeout() -> None:
    """Both runtimes run the same worker on the same tables: each variable the Lambda worker gets, the task
    gets with the same value (but the per-invocation concurrency, a flag here), plus the stop timeout."""
    function = {**TEMPLATE["Globals"]["Function"]["Environment"]["Variables"],
                **RESOURCES["WorkerFunction"]["Properties"]["Environment"]["Variables"]}
    function.pop("ONWARD_WORKER_CONCURRENCY")
    environment = container_environment()
    assert {name: environment.get(name) for name in function} == function
    assert environment["ONWARD_WORKER_STOP_TIMEOUT_S"] == {"Ref": "WorkerStopTimeoutSeconds"}


def test_every_variable_the_worker_code_reads_is_set_for_the_task_or_unset_on_purpose() -> None:
    unset_on_purpose = {
        "AWS_REGION": "set by ECS (AWS_DEFAULT_REGION is set by the task too)",
        "AWS_ENDPOINT_URL": "points boto3 at the embedded endpoint on one machine; unset on AWS",
        "ONWARD_STALE_AFTER_S": "read by Settings everywhere, used only by the API",
        "ONWARD_HEARTBEAT_INTERVAL_S": "as ONWARD_STALE_AFTER_S",
        "ONWARD_UNSIGNED_REQUESTS": "set by the embedded endpoint's exports only; AWS refuses unsigned requests",
        "ONWARD_CLIENT_WRAPPER": "set by the embedded endpoint's exports only (the local stack's lean client)",
        "ONWARD_BEAT_SLACK_MS": "set by the embedded endpoint's exports only (0: its commit stamps are "
                                "milliseconds of this host's clock); on AWS the default, AWS_BEAT_SLACK_MS",
        "ONWARD_PARAMETER_VALIDATION": "turned off by `onward up`, the benches and the long soak for their own "
                                       "embedded endpoint; on AWS botocore validates each request (the default)",
        "ECS_AGENT_URI": "set by the ECS agent in every container: its task protection endpoint",
        "ONWARD_WORKER_BREATHER_S": "the default (60 s) on ECS; drills and tests shorten it",
        # trace context (issue 38)
        "OTEL_SDK_DISABLED": "OpenTelemetry's standard switch, for an operator to set; unset: OtlpEndpoint decides",
        "OTEL_SERVICE_NAME": "OpenTelemetry's standard variable, for an operator to set; unset: service.name onward",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "OpenTelemetry's per-signal endpoint; the template sets the common one",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        # traces (issue 38, the rest)
        "ONWARD_TRACE_URL": "read by Settings everywhere, used only by the API (TraceUrl sets it there)",
        "ONWARD_OTLP_EXIT_FLUSH_S": "the default (1 s: a handler's child waits that long at most for its export)",
        # the authority lease (issue 39): set by the standby template (its part); unset: one Region, always home
        "ONWARD_WITNESS": "the witness record; unset: one Region",
        "ONWARD_HOME_REGION": "the home while the witness was never written; read only with ONWARD_WITNESS",
        "ONWARD_AUTHORITY_LEASE_S": "the authority lease; read only with ONWARD_WITNESS (default 30)",
        "ONWARD_AUTHORITY_CHECK_S": "the witness's check interval; read only with ONWARD_WITNESS (default 10)",
        "ONWARD_WITNESS_ENDPOINT_URL": "the witness's own endpoint in the local two-Region drill; unset on AWS",
    }
    read = read_code(ecs_worker_roots()).environment
    assert read - set(container_environment()) <= set(unset_on_purpose)
    assert "JOBS_TABLE" in read and "ONWARD_ACTIVE_SHARDS" in read  # the reading is not vacuous


def test_the_worker_reads_its_stop_timeout_from_the_variable_the_task_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable as the flag's default, every task would drain for the built-in 90 s, whatever
    WorkerStopTimeoutSeconds says."""
    monkeypatch.setenv("ONWARD_WORKER_STOP_TIMEOUT_S", "42")
    assert build_parser().parse_args(["worker", "--module", "onward.runtime.demo_jobs"]).stop_timeout == 42.0
    monkeypatch.delenv("ONWARD_WORKER_STOP_TIMEOUT_S")
    arguments = build_parser().parse_args(["worker", "--module", "onward.runtime.demo_jobs"])
    assert arguments.stop_timeout == DEFAULT_STOP_TIMEOUT_S


def test_the_container_stop_timeout_exceeds_the_workers_whole_graceful_stop() -> None:
    """ECS kills the container StopTimeout after SIGTERM: were it shorter than the stop timeout plus the time
    to end a deaf handler and commit its release, a job would be killed mid-release and lose an attempt to
    the reaper instead of being handed back uncharged."""
    stop_timeout = container()["StopTimeout"]
    assert stop_timeout <= FARGATE_MAX_STOP_TIMEOUT_S
    assert inspect.signature(WorkerPool).parameters["stop_grace_s"].default == STOP_GRACE_S
    after_the_stop_timeout = STOP_GRACE_S + KILL_GRACE_S + RELEASE_WAIT_S
    longest = PARAMETERS["WorkerStopTimeoutSeconds"]["MaxValue"]
    assert stop_timeout > longest + after_the_stop_timeout
    assert stop_timeout > DEFAULT_STOP_TIMEOUT_S + after_the_stop_timeout
    assert PARAMETERS["WorkerStopTimeoutSeconds"]["Default"] <= longest


def test_the_task_is_fargate_arm64_with_its_sizes_from_the_parameters() -> None:
    properties = RESOURCES["EcsWorkerTaskDefinition"]["Properties"]
    assert properties["RequiresCompatibilities"] == ["FARGATE"] and properties["NetworkMode"] == "awsvpc"
    assert properties["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert (properties["Cpu"], properties["Memory"]) == ({"Ref": "WorkerTaskCpu"}, {"Ref": "WorkerTaskMemory"})
    assert properties["TaskRoleArn"] == {"Fn::GetAtt": ["EcsWorkerTaskRole", "Arn"]}
    assert properties["ExecutionRoleArn"] == {"Fn::GetAtt": ["EcsWorkerExecutionRole", "Arn"]}


def test_the_logs_go_to_the_stacks_log_group_kept_as_long_as_the_functions() -> None:
    logging = container()["LogConfiguration"]
    assert logging["LogDriver"] == "awslogs"
    assert logging["Options"]["awslogs-group"] == {"Ref": "EcsWorkerLogGroup"}
    assert logging["Options"]["awslogs-region"] == {"Ref": "AWS::Region"}
    assert logging["Options"]["mode"] == "non-blocking"
    group = RESOURCES["EcsWorkerLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert group["LogGroupName"] == {"Fn::Sub": "/onward/${AWS::StackName}/ecs-worker"}


def test_the_execution_role_pulls_images_and_writes_only_its_log_group() -> None:
    """ECS's own role: the image pull (GetAuthorizationToken cannot be scoped) and this group's log streams,
    nothing of the data."""
    role = RESOURCES["EcsWorkerExecutionRole"]["Properties"]
    (policy,) = role["Policies"]
    statements = policy["PolicyDocument"]["Statement"]
    on_everything = [s for s in statements if s["Resource"] == "*"]
    assert [s["Action"] for s in on_everything] == [["ecr:GetAuthorizationToken"]]
    logs = [s for s in statements if any(a.startswith("logs:") for a in s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in logs] == [
        (["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": ["EcsWorkerLogGroup", "Arn"]})]
    assert all(a.startswith(("ecr:", "logs:")) for s in statements for a in s["Action"])
    assert "ManagedPolicyArns" not in role


@pytest.mark.parametrize("role", ["EcsWorkerTaskRole", "EcsWorkerExecutionRole"])
def test_the_roles_trust_only_ecs_tasks_of_this_account(role: str) -> None:
    (statement,) = RESOURCES[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_the_tasks_accept_no_inbound_traffic() -> None:
    group = RESOURCES["EcsWorkerSecurityGroup"]["Properties"]
    assert "SecurityGroupIngress" not in group
    assert group["VpcId"] == {"Ref": "WorkerVpcId"}
    network = RESOURCES["EcsWorkerService"]["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["SecurityGroups"] == [{"Ref": "EcsWorkerSecurityGroup"}]
    assert network["Subnets"] == {"Ref": "WorkerSubnets"}


# --- the service and its scaling ----------------------------------------------------------------------------

def test_the_service_leaves_its_count_to_the_scaling_and_rolls_back_a_failing_deployment() -> None:
    """A DesiredCount in the template would be set again on every stack update, undoing the scaling."""
    service = RESOURCES["EcsWorkerService"]["Properties"]
    assert "DesiredCount" not in service
    assert service["LaunchType"] == "FARGATE"
    breaker = service["DeploymentConfiguration"]["DeploymentCircuitBreaker"]
    assert breaker == {"Enable": True, "Rollback": True}


def test_the_scaling_bounds_come_from_the_parameters_and_may_reach_zero() -> None:
    target = RESOURCES["EcsWorkerScalableTarget"]["Properties"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == ({"Ref": "WorkerMinTasks"}, {"Ref": "WorkerMaxTasks"})
    assert target["ScalableDimension"] == "ecs:service:DesiredCount" and target["ServiceNamespace"] == "ecs"
    assert target["ResourceId"] == {"Fn::Sub": "service/${EcsWorkerCluster}/${EcsWorkerService.Name}"}
    assert PARAMETERS["WorkerMinTasks"]["MinValue"] == 0 and PARAMETERS["WorkerMinTasks"]["Default"] == 0


def tasks_set(due: int, running: int, current: int, *, concurrency: int | None = None,
              minimum: int | None = None, maximum: int | None = None) -> int:
    """The task count Application Auto Scaling sets after one evaluation of EcsWorkerDemandAlarm, from the
    template's alarm and policy: the alarm's expression, its threshold, the step whose interval (relative to
    the threshold, lower bound inclusive) holds the value, ExactCapacity clamped to the target's bounds; no
    action unless the alarm is in ALARM."""
    alarm = RESOURCES["EcsWorkerDemandAlarm"]["Properties"]
    policy = RESOURCES["EcsWorkerScalingPolicy"]["Properties"]["StepScalingPolicyConfiguration"]
    concurrency = concurrency or PARAMETERS["WorkerTaskConcurrency"]["Default"]
    minimum = PARAMETERS["WorkerMinTasks"]["Default"] if minimum is None else minimum
    maximum = maximum or PARAMETERS["WorkerMaxTasks"]["Default"]
    (expression,) = [m["Expression"]["Fn::Sub"] for m in alarm["Metrics"] if "Expression" in m]
    assert expression == "CEIL((due + running) / ${WorkerTaskConcurrency})"
    value = math.ceil((due + running) / concurrency)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    if value < alarm["Threshold"]:
        return current
    breach = value - alarm["Threshold"]
    (step,) = [s for s in policy["StepAdjustments"]
               if s.get("MetricIntervalLowerBound", -math.inf) <= breach < s.get("MetricIntervalUpperBound", math.inf)]
    adjustment = step["ScalingAdjustment"]
    exact = maximum if adjustment == {"Ref": "WorkerMaxTasks"} else adjustment
    return max(minimum, min(maximum, exact))


def test_the_tasks_follow_the_backlog_from_zero_and_back_to_zero() -> None:
    """Target tracking on jobs per task (the metric over the task count) never leaves 0 tasks; these steps do.
    Running jobs count too: without them, a task busy with a long job would be scaled in (its job released
    and run again) as soon as nothing waits."""
    assert tasks_set(due=0, running=0, current=0) == 0
    assert tasks_set(due=1, running=0, current=0) == 1  # from zero
    assert tasks_set(due=9, running=0, current=1) == 3  # ceil(9 / 4 jobs per task)
    assert tasks_set(due=0, running=3, current=3) == 1  # the running jobs keep a task (4 jobs per task)
    assert tasks_set(due=0, running=0, current=3) == 0  # back to zero
    assert tasks_set(due=10_000, running=40, current=2) == PARAMETERS["WorkerMaxTasks"]["Default"]
    assert tasks_set(due=0, running=0, current=5, minimum=2) == 2


@pytest.mark.parametrize("maximum", [1, 7, 12, 13, 30, 60, 500])
def test_the_tasks_set_are_never_fewer_than_needed_and_exact_up_to_twelve(maximum: int) -> None:
    """Application Auto Scaling allows 20 steps, so past 12 tasks a step covers a range: it sets the range's
    largest count (never fewer than needed, at most a third more), and WorkerMaxTasks from 60 needed. A gap
    or an overlap between steps, or a step that sets fewer than its range needs, fails here."""
    for needed in range(120):
        tasks = tasks_set(due=needed * 4, running=0, current=0, concurrency=4, maximum=maximum)
        assert tasks >= min(needed, maximum), (needed, tasks)
        if needed <= 12:
            assert tasks == min(needed, maximum), (needed, tasks)
        elif needed < 60:
            assert tasks <= min(maximum, math.ceil(needed * 4 / 3)), (needed, tasks)
        else:
            assert tasks == maximum, (needed, tasks)


def test_the_steps_tile_the_line_from_the_threshold_without_gaps() -> None:
    configuration = RESOURCES["EcsWorkerScalingPolicy"]["Properties"]["StepScalingPolicyConfiguration"]
    steps = configuration["StepAdjustments"]
    assert configuration["AdjustmentType"] == "ExactCapacity" and len(steps) <= 20
    assert steps[0]["MetricIntervalLowerBound"] == 0 and "MetricIntervalUpperBound" not in steps[-1]
    for before, after in itertools.pairwise(steps):
        assert before["MetricIntervalUpperBound"] == after["MetricIntervalLowerBound"]
    assert RESOURCES["EcsWorkerScalingPolicy"]["Properties"]["ScalingTargetId"] == {"Ref": "EcsWorkerScalableTarget"}


def test_the_alarm_drives_the_policy_reads_the_reapers_counts_and_does_nothing_without_them() -> None:
    """Missing data must leave the count alone (INSUFFICIENT_DATA: no action); treated as breaching or as 0,
    a reaper that stopped publishing would scale the workers away while jobs wait."""
    alarm = RESOURCES["EcsWorkerDemandAlarm"]["Properties"]
    assert alarm["AlarmActions"] == [{"Ref": "EcsWorkerScalingPolicy"}]
    assert alarm["TreatMissingData"] == "missing"
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 1)
    read = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert {query: (stat["Metric"]["Namespace"], stat["Metric"]["MetricName"], stat["Metric"]["Dimensions"],
                    stat["Period"]) for query, stat in read.items()} == {
        "due": ("Onward", "BacklogDue", [{"Name": "service", "Value": "reaper"}], 60),
        "running": ("Onward", "JobsRunning", [{"Name": "service", "Value": "reaper"}], 60)}
    assert "FILL" not in str(alarm["Metrics"])


def test_a_task_that_fails_to_start_or_exits_on_its_own_alarms() -> None:
    """ECS has no metric for a stopped task, only its Task State Change event: the rule matches this cluster's
    tasks stopped for failing to start or for their container exiting (not the scheduler's scale-in and
    deployment stops), keeps each in a log group EventBridge may write, and the alarm reads the rule's
    Invocations (sent only when non-zero, so missing data is no failure)."""
    pattern = RESOURCES["EcsWorkerStoppedTasksRule"]["Properties"]["EventPattern"]
    assert pattern == {"source": ["aws.ecs"], "detail-type": ["ECS Task State Change"],
                       "detail": {"clusterArn": [{"Fn::GetAtt": ["EcsWorkerCluster", "Arn"]}],
                                  "lastStatus": ["STOPPED"],
                                  "stopCode": ["TaskFailedToStart", "EssentialContainerExited"]}}
    (target,) = RESOURCES["EcsWorkerStoppedTasksRule"]["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["EcsWorkerStoppedTasksLogGroup", "Arn"]}
    log_group = RESOURCES["EcsWorkerStoppedTasksLogGroup"]["Properties"]
    assert log_group["LogGroupName"]["Fn::Sub"].startswith("/aws/events/")  # EventBridge writes only there
    policy = RESOURCES["EcsWorkerStoppedTasksLogPolicy"]["Properties"]["PolicyDocument"]["Fn::Sub"]
    assert '"events.amazonaws.com"' in policy and "${EcsWorkerStoppedTasksLogGroup.Arn}" in policy
    alarm = RESOURCES["EcsWorkerTasksStoppedAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Events", "Invocations", "Sum")
    assert alarm["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": "EcsWorkerStoppedTasksRule"}}]
    assert (alarm["Threshold"], alarm["TreatMissingData"]) == (0, "notBreaching")

"""template.yaml's alarms reach a person and cover what fails: the topic they notify (the stack's, encrypted with
a key CloudWatch may use, or AlarmTopicArn's), OK actions on every alarm, an Errors and a Throttles alarm for
every function under the function's own condition, the API's 5xx, DynamoDB throttling on every table and the
indexes the hot paths use, the pipeline heartbeat going missing, projection lag and backlog age over their
parameters, and a dashboard that lists every alarm.

That the metrics named here are really published by the code, with these names and dimensions, is
tests/integration/entrypoints/test_alarm_metrics.py."""

from __future__ import annotations

from typing import Any

import pytest

from onward_infra.template import load_template
from tests.samtemplate import dashboard_body

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PARAMETERS: dict[str, Any] = TEMPLATE["Parameters"]
SCALING_POLICIES = {name for name, r in RESOURCES.items() if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"}
# Alarms that page a person: every alarm but those whose action is a scaling policy (they drive the workers'
# autoscaling and sit in ALARM whenever there is demand: nobody is to be told).
ALARMS = {name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"
          and not {action.get("Ref") for action in r["Properties"].get("AlarmActions", [])} & SCALING_POLICIES}
FUNCTIONS = {name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"}
TOPIC = {"Fn::If": ["UseExistingAlarmTopic", {"Ref": "AlarmTopicArn"}, {"Ref": "AlarmTopic"}]}


def watched(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, metric, dimensions) of every metric the alarm reads."""
    properties = alarm["Properties"]
    if "MetricName" in properties:
        return [(properties["Namespace"], properties["MetricName"],
                 {d["Name"]: d["Value"] for d in properties.get("Dimensions", [])})]
    return [(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"],
             {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"].get("Dimensions", [])})
            for m in properties["Metrics"] if "MetricStat" in m]


def alarms_on(namespace: str, metric: str, **dimensions: Any) -> dict[str, dict[str, Any]]:
    return {name: alarm for name, alarm in ALARMS.items()
            if any(ns == namespace and m == metric and all(d.get(k) == v for k, v in dimensions.items())
                   for ns, m, d in watched(alarm))}


# --- where alarms go ---------------------------------------------------------------------------------------

def test_every_alarm_notifies_the_topic_when_it_fires_and_when_it_recovers() -> None:
    """Without OK actions a person paged by an alarm never hears that it is over; without alarm actions (as
    before, with AlarmTopicArn empty by default) the alarms notified nobody."""
    assert len(ALARMS) >= 20
    for name, alarm in ALARMS.items():
        properties = alarm["Properties"]
        assert properties["AlarmActions"] == [TOPIC], name
        assert properties["OKActions"] == [TOPIC], name


def test_every_alarm_says_what_it_means_and_what_to_do() -> None:
    """A page that only names a metric sends the person reading it to the code first."""
    for name, alarm in ALARMS.items():
        description = alarm["Properties"]["AlarmDescription"]
        assert len(description) > 120, name


def test_the_stack_creates_the_topic_unless_an_existing_one_is_named() -> None:
    """AlarmTopicArn set: alarms go there and the stack creates no topic and no key of its own (their
    owners manage them); empty (the default): the stack's AlarmTopic."""
    conditions = TEMPLATE["Conditions"]
    assert conditions["UseExistingAlarmTopic"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}
    assert conditions["CreateAlarmTopic"] == {"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}
    assert PARAMETERS["AlarmTopicArn"]["Default"] == ""
    for name in ("AlarmTopic", "AlarmTopicPolicy"):
        assert RESOURCES[name]["Condition"] == "CreateAlarmTopic", name
    assert RESOURCES["AlarmTopicKey"]["Condition"] == "EncryptAlarmTopic"
    assert conditions["EncryptAlarmTopic"] == {"Fn::And": [{"Condition": "CreateAlarmTopic"},
                                                           {"Condition": "FullMonitoring"}]}


def test_the_topic_is_encrypted_with_a_key_cloudwatch_may_use() -> None:
    """The AWS managed key alias/aws/sns would encrypt the topic too, but its policy cannot let CloudWatch use
    it: every alarm action would fail ("not authorized to access the SNS topic's encryption key"). The
    stack's key lets cloudwatch.amazonaws.com of this account generate data keys and decrypt. With
    Monitoring=essential the topic has no key of its own ($1 a month; docs/costs.md)."""
    topic = RESOURCES["AlarmTopic"]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Fn::If": ["EncryptAlarmTopic", {"Ref": "AlarmTopicKey"},
                                                  {"Ref": "AWS::NoValue"}]}
    key = RESOURCES["AlarmTopicKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    for_cloudwatch = [s for s in key["KeyPolicy"]["Statement"]
                      if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert len(for_cloudwatch) == 1
    assert set(for_cloudwatch[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert for_cloudwatch[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_the_topic_policy_lets_this_accounts_alarms_publish_and_nobody_else() -> None:
    policy = RESOURCES["AlarmTopicPolicy"]["Properties"]
    assert policy["Topics"] == [{"Ref": "AlarmTopic"}]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert statement["Action"] == "sns:Publish" and statement["Resource"] == {"Ref": "AlarmTopic"}
    source = statement["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    assert source == "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*"


def test_the_email_parameter_subscribes_only_when_set() -> None:
    """Empty (the default) creates no subscription; an address subscribes to whichever topic the alarms use."""
    assert PARAMETERS["AlarmEmail"]["Default"] == ""
    assert TEMPLATE["Conditions"]["HasAlarmEmail"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}
    subscription = RESOURCES["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"] == {"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}, "TopicArn": TOPIC}


# --- what is watched ---------------------------------------------------------------------------------------

ALWAYS_ERRORS_ALARMED = {"SchedulerFunction", "ApiFunction", "RelayFunction", "ProjectorFunction", "ArchiverFunction"}


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_has_an_errors_and_a_throttles_alarm_under_its_condition(function: str, metric: str) -> None:
    """A function added without its alarms fails here. An alarm on a conditional function must share the
    condition: otherwise the stack fails to deploy when the function is left out (its Ref resolves to
    nothing), or alarms forever on a function that does not exist. Monitoring=essential leaves out all but
    the scheduler's Errors alarm (nothing else tells that schedules stop firing) and the Errors alarms that roll
    a gradual deployment back (the API's, the relay's, the projector's, the archiver's: their DeploymentPreference
    names them)."""
    found = alarms_on("AWS/Lambda", metric, FunctionName={"Ref": function})
    assert len(found) == 1, f"{function}: {sorted(found)}"
    (alarm,) = found.values()
    kept = metric == "Errors" and function in ALWAYS_ERRORS_ALARMED
    expected = {(None, True): None, (None, False): "FullMonitoring",
                ("WorkerOnLambda", False): "WorkerOnLambdaFullMonitoring"}[
        (FUNCTIONS[function].get("Condition"), kept)]
    assert alarm.get("Condition") == expected
    properties = alarm["Properties"]
    assert (properties["Statistic"], properties["Threshold"], properties["ComparisonOperator"]) == (
        "Sum", 0, "GreaterThanThreshold")
    assert properties["TreatMissingData"] == "notBreaching"  # no invocations: nothing failed


def test_the_api_alarms_on_its_5xx_answers() -> None:
    """HTTP APIs publish 5xx per ApiId and Stage ($default, SAM's stage); the alarm fires on more than 1% of
    the requests (and at least 5), so one failed request in a quiet minute does not page anyone."""
    (alarm,) = alarms_on("AWS/ApiGateway", "5xx", ApiId={"Ref": "HttpApi"}, Stage="$default").values()
    metrics = alarm["Properties"]["Metrics"]
    expression = next(m["Expression"] for m in metrics if m.get("ReturnData", True))
    assert expression == "IF(errors >= 5 AND errors > 0.01 * requests, errors, 0)"
    assert {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in metrics if "MetricStat" in m} == {
        "errors": "5xx", "requests": "Count"}


# Each table, and each index written or read by a hot path (the claim, the create, the reaper, listings,
# replays); `overlaps` is written only by rare overlapping attempts.
THROTTLE_WATCH: dict[str, dict[str | None, str]] = {
    "JobsTable": {None: "RW", "ready": "RW", "leases": "RW", "active": "RW", "parked": "W"},
    "OutboxTable": {None: "RW", "by_time": "RW"},
    "StatusTable": {None: "RW", "by_listing": "RW"},
    "CheckpointTable": {None: "RW"},
}


@pytest.mark.parametrize("table", sorted(THROTTLE_WATCH))
def test_dynamodb_throttling_on_each_table_and_its_hot_indexes_alarms(table: str) -> None:
    """On-demand tables throttle too (a hot partition, the account's table quota): a hot tenant's claims or
    the view's writes would slow with no alarm. One alarm per table sums its throttle events and its
    indexes' (CloudWatch records an index's separately, with GlobalSecondaryIndexName)."""
    found = {name: alarm for name, alarm in ALARMS.items()
             if any(ns == "AWS/DynamoDB" and d.get("TableName") == {"Ref": table} for ns, _, d in watched(alarm))}
    assert len(found) == 1, sorted(found)
    (alarm,) = found.values()
    read = {(d.get("GlobalSecondaryIndexName"), metric) for _, metric, d in watched(alarm)}
    wanted = {(index, f"{'Read' if kind == 'R' else 'Write'}ThrottleEvents")
              for index, kinds in THROTTLE_WATCH[table].items() for kind in kinds}
    assert read == wanted
    indexes = {i["IndexName"] for i in RESOURCES[table]["Properties"].get("GlobalSecondaryIndexes", [])}
    assert {index for index, _ in read if index} <= indexes
    metrics = alarm["Properties"]["Metrics"]
    expression = next(m["Expression"] for m in metrics if m.get("ReturnData", True))
    assert expression == " + ".join(f"FILL({m['Id']}, 0)" for m in metrics if "MetricStat" in m)
    assert alarm["Properties"]["Threshold"] == 0


def test_the_heartbeat_alarm_fires_on_absence() -> None:
    """The reaper commits a heartbeat each minute and the projector counts each one it applies: a stopped
    reaper, relay or projector publishes NOTHING, so only TreatMissingData: breaching turns silence into an
    alarm (notBreaching, the other alarms' setting, would read the stall as all clear)."""
    (name, alarm), = alarms_on("Onward", "PipelineHeartbeats", service="projector").items()
    properties = alarm["Properties"]
    assert properties["TreatMissingData"] == "breaching"
    assert (properties["Statistic"], properties["Threshold"], properties["ComparisonOperator"]) == (
        "Sum", 1, "LessThanThreshold")
    window_s = properties["Period"] * properties["EvaluationPeriods"]
    assert properties["DatapointsToAlarm"] == properties["EvaluationPeriods"]
    # A beat every HeartbeatIntervalSeconds at most: the window must hold at least one in every case.
    assert PARAMETERS["HeartbeatIntervalSeconds"]["MaxValue"] < window_s, name


def test_projection_lag_alarms_above_the_freshness_objective() -> None:
    """ProjectionLag is commit -> view (the projector's clock minus the event's commit time), the age a user
    sees; the IteratorAge alarms each measure one stream's wait only. Milliseconds, so the alarm divides."""
    (alarm,) = alarms_on("Onward", "ProjectionLag", service="projector").values()
    properties = alarm["Properties"]
    assert properties["Threshold"] == {"Ref": "FreshnessObjectiveSeconds"}
    assert [m["Expression"] for m in properties["Metrics"] if "Expression" in m] == ["lag_ms / 1000"]
    (stat,) = [m["MetricStat"] for m in properties["Metrics"] if "MetricStat" in m]
    assert stat["Stat"] == "Maximum"


def test_backlog_age_alarms_above_its_parameter() -> None:
    (alarm,) = alarms_on("Onward", "OldestDueAgeSeconds", service="reaper").values()
    properties = alarm["Properties"]
    assert properties["Threshold"] == {"Ref": "BacklogAgeAlarmSeconds"}
    assert (properties["Statistic"], properties["ComparisonOperator"]) == ("Maximum", "GreaterThanThreshold")


def test_every_threshold_that_has_a_parameter_uses_it() -> None:
    """The freshness objective is one number: the page's "updates delayed" and the lag alarms must move
    together when a deployer changes it."""
    lag_alarms = {**alarms_on("AWS/Lambda", "IteratorAge"), **alarms_on("Onward", "ProjectionLag")}
    assert len(lag_alarms) == 4
    for name, alarm in lag_alarms.items():
        # the archive's lag is bounded by the job retention, not by the view's freshness objective
        wanted = "ArchiverLagAlarmSeconds" if name == "ArchiverIteratorAgeAlarm" else "FreshnessObjectiveSeconds"
        assert alarm["Properties"]["Threshold"] == {"Ref": wanted}, name


def test_essential_monitoring_keeps_the_alarms_that_say_jobs_or_statuses_are_affected() -> None:
    """Monitoring=essential (docs/costs.md's starter) drops the diagnostic alarms, the dashboard and the
    topic's key; what is left still pages for every way a person's jobs or statuses go wrong."""
    assert PARAMETERS["Monitoring"]["Default"] == "full"
    assert TEMPLATE["Conditions"]["FullMonitoring"] == {"Fn::Equals": [{"Ref": "Monitoring"}, "full"]}
    essential = {name for name, alarm in ALARMS.items() if alarm.get("Condition") in (None, "WorkerOnEcs")}
    assert essential == {"PipelineHeartbeatMissingAlarm", "BacklogAgeAlarm", "Api5xxAlarm", "ParkedRecordsAlarm",
                         "SchedulerFunctionErrorsAlarm", "EventsStreamWriteThrottleAlarm",
                         "EcsWorkerTasksStoppedAlarm",
                         # what rolls a gradual deployment back (tests/unit/project/test_template_upgrades.py)
                         "ApiUnhandledErrorsAlarm", "ApiFunctionErrorsAlarm", "RelayFunctionErrorsAlarm",
                         "ProjectorFunctionErrorsAlarm", "ArchiverFunctionErrorsAlarm"}
    assert {alarm["Condition"] for name, alarm in ALARMS.items() if name not in essential} == {
        "FullMonitoring", "WorkerOnLambdaFullMonitoring"}
    assert RESOURCES["Dashboard"]["Condition"] == "FullMonitoring"
    assert TEMPLATE["Outputs"]["DashboardUrl"]["Condition"] == "FullMonitoring"


# --- the dashboard --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime", ["ecs", "lambda", "none"])
def test_the_dashboard_lists_every_alarm_of_the_deployment(runtime: str) -> None:
    """Each alarm the stack creates appears in the dashboard's alarm widget, and no alarm it does not create
    (the Lambda worker's exist only with WorkerRuntime=lambda, the ECS workers' only with ecs: naming them
    otherwise fails the deploy). Scaling alarms are left out: they are in ALARM whenever work waits."""
    conditions = {"WorkerOnLambda": runtime == "lambda", "WorkerOnEcs": runtime == "ecs", "FullMonitoring": True,
                  "WorkerOnLambdaFullMonitoring": runtime == "lambda"}
    widgets = dashboard_body(TEMPLATE, conditions)["widgets"]
    listed = [arn for w in widgets if w["type"] == "alarm" for arn in w["properties"]["alarms"]]
    created = {name for name, alarm in ALARMS.items()
               if "Condition" not in alarm or conditions.get(alarm["Condition"], False)}
    assert sorted(listed) == sorted(f"${{{name}.Arn}}" for name in created)


def test_the_dashboard_graphs_the_new_signals() -> None:
    widgets = dashboard_body(TEMPLATE)["widgets"]
    shown = {tuple(m[:2]) for w in widgets for m in w["properties"].get("metrics", [])}
    assert {("Onward", "PipelineHeartbeats"), ("Onward", "OldestDueAgeSeconds"), ("AWS/ApiGateway", "5xx"),
            ("AWS/Lambda", "Throttles"), ("AWS/DynamoDB", "WriteThrottleEvents")} <= shown

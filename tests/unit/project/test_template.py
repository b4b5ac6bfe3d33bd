"""template.yaml checked offline: what cfn-lint finds in it and in its SAM translation (cfn-lint alone does
not look inside AWS::Serverless::Function: a bad Runtime passes), handlers that resolve, environment
variables the code reads, the API's routes, the stream event sources, and the alarms.

The least-privilege check of the roles is tests/unit/project/test_template_policies.py; the deployment of the
translated data resources and the handlers fed with real event shapes are integration tests
(test_template_deploy.py, test_lambda_events.py); `sam build` is test_sam_build.py.
"""

from __future__ import annotations

import importlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from onward.pipeline.poison import PARK_AFTER_FAILURES
from onward_infra.region_roles import ROLES
from onward_infra.template import (
    TEMPLATE_PATH,
    environment_variable_for,
    load_template,
    referenced_names,
    stream_error_handling,
)
from tests.codescan import read_code
from tests.samtemplate import cfn_lint, dashboard_body, translate, write_json

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = sorted(name for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function")
# The environment tests read every role's template (issue 39's gaps): the home's and standby's have functions the
# single-Region stack lacks (ReconcilerFunction) and variables it never sets (the authority lease's).
ROLE_TEMPLATES = {role: load_template(role=role) for role in ROLES}
ROLE_FUNCTIONS = [pytest.param(role, name, id=f"{role}-{name}") for role, template in ROLE_TEMPLATES.items()
                  for name, resource in sorted(template["Resources"].items())
                  if resource["Type"] == "AWS::Serverless::Function"]

# Variables the code may read that the template leaves unset on purpose, and why.
UNSET_ON_PURPOSE = {
    "AWS_REGION": "set by the Lambda runtime",
    "AWS_DEFAULT_REGION": "set by the Lambda runtime",
    "AWS_LAMBDA_FUNCTION_NAME": "set by the Lambda runtime (onward.observability.otlp flushes per invocation there)",
    "AWS_ENDPOINT_URL": "points boto3 at the embedded endpoint on one machine; unset on AWS",
    "ONWARD_TOKENS": "local bearer tokens; on AWS ONWARD_AUTH=jwt and API Gateway verifies JWTs",
    "ONWARD_OPERATOR_TOKEN": "local operator token; on AWS the operator role is a JWT scope or group",
    "ONWARD_ARCHIVE_DIR": "the local stack's archive directory (Parquet, DuckDB); on AWS the archive is written "
                          "through Firehose (ARCHIVE_DELIVERY_STREAM), read through Athena (ARCHIVE_TABLE)",
    "ONWARD_WEB_ROOT": "defaults to web/ beside handlers/, where the Makefile's build target puts it",
    "ONWARD_OUTBOX_RETENTION_DAYS": "read by Settings everywhere, used only where JobStore writes events "
                                    "(test_outbox_writers_get_the_retention_parameter)",
    "ONWARD_STALE_AFTER_S": "read by Settings everywhere, used only by the API's freshness answers "
                            "(test_the_api_gets_the_freshness_parameters)",
    "ONWARD_HEARTBEAT_INTERVAL_S": "as ONWARD_STALE_AFTER_S",
    "ONWARD_UNSIGNED_REQUESTS": "set by the embedded endpoint's exports only; AWS refuses unsigned requests",
    "ONWARD_CLIENT_WRAPPER": "set by the embedded endpoint's exports only (the local stack's lean client)",
    "ONWARD_BEAT_SLACK_MS": "set by the embedded endpoint's exports only (0: its commit stamps are "
                            "milliseconds of this host's clock); on AWS the default, AWS_BEAT_SLACK_MS",
    "ONWARD_PARAMETER_VALIDATION": "turned off by `onward up`, the benches and the long soak for their own "
                                   "embedded endpoint; on AWS botocore validates each request (the default)",
    # trace context (issue 38)
    "OTEL_SDK_DISABLED": "OpenTelemetry's standard switch, for an operator to set; unset: OtlpEndpoint decides",
    "OTEL_SERVICE_NAME": "OpenTelemetry's standard variable, for an operator to set; unset: service.name onward",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "OpenTelemetry's per-signal endpoint; the template sets the common one",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    # the authority lease (issue 39): the standby template sets these (the template part, merged beside this);
    # unset, there is no witness: one Region, always home. Drop them from here once template.yaml sets them.
    "ONWARD_WITNESS": "the witness record; unset: one Region",
    "ONWARD_HOME_REGION": "the home while the witness was never written; read only with ONWARD_WITNESS",
    "ONWARD_AUTHORITY_LEASE_S": "the authority lease; read only with ONWARD_WITNESS (default 30)",
    "ONWARD_AUTHORITY_CHECK_S": "the witness's check interval; read only with ONWARD_WITNESS (default 10)",
    "ONWARD_WITNESS_ENDPOINT_URL": "the witness's own endpoint in the local two-Region drill; unset on AWS",
    # completion webhooks (docs/webhooks.md)
    "ONWARD_WEBHOOK_ALLOWED_NETWORKS": "unset on AWS: webhooks reach only global addresses; `onward up` allows "
                                       "127.0.0.1",
    "ONWARD_WEBHOOK_FIRST_RETRY_S": "the retry schedule's defaults on AWS (10 s doubling); tests shorten it",
    "ONWARD_WEBHOOK_MAX_RETRY_S": "as ONWARD_WEBHOOK_FIRST_RETRY_S (1 h)",
    "ONWARD_WEBHOOK_SLOTS_PER_ENDPOINT": "the default (4 sends per endpoint per deliverer process)",
    "ONWARD_WEBHOOK_TIMEOUT_S": "the default (5 s) where nothing is sent (matcher, API); the deliverer sets it",
    "ONWARD_WEBHOOK_ENDPOINT_CACHE_S": "the default (5 s: how long the matcher keeps a tenant's endpoints)",
    # traces (issue 38, the rest)
    "ONWARD_TRACE_URL": "read by Settings everywhere, used only by the API (TraceUrl sets it there)",
    "ONWARD_OTLP_EXIT_FLUSH_S": "the default (1 s: a handler's child waits that long at most for its export)",
}


def function_environment(function: str, role: str = "single") -> dict[str, Any]:
    template = ROLE_TEMPLATES[role]
    globals_ = template["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    own = template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {})
    return {**globals_, **own}


def code_of(function: str, role: str = "single"):
    template = ROLE_TEMPLATES[role]
    properties = template["Resources"][function]["Properties"]
    roots = [properties["Handler"].rpartition(".")[0]]
    module = properties.get("Environment", {}).get("Variables", {}).get("ONWARD_WORKER_MODULE")
    if module is not None:
        roots.append(template["Parameters"][module["Ref"]]["Default"])
    return _read_code(tuple(roots))


@cache
def _read_code(roots: tuple[str, ...]):  # (one reading per function's code, whichever roles ask for it)
    return read_code(list(roots))


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate()


# --- lint -----------------------------------------------------------------------------------------------------

def test_cfn_lint_finds_nothing_in_template_yaml() -> None:
    assert cfn_lint(TEMPLATE_PATH) == []


def test_cfn_lint_finds_nothing_in_the_sam_translation(translated: dict[str, Any], tmp_path: Path) -> None:
    """The translation is what CloudFormation deploys; errors inside serverless functions show only here.
    One finding is expected and checked instead of ignored: the transform writes the value of a parameter
    used in an HTTP API's CorsConfiguration into the API's OpenAPI body, so the translation no longer
    references that parameter (W2001 "not used")."""
    inlined = referenced_names(TEMPLATE["Resources"]) - referenced_names(translated["Resources"]) - set(RESOURCES)
    assert inlined == {"CorsAllowedOrigin"}
    cors = cors_when_allowed(translated)
    assert cors["allowOrigins"] == [TEMPLATE["Parameters"]["CorsAllowedOrigin"]["Default"]]
    findings = cfn_lint(write_json(translated, tmp_path / "translated.json"))
    expected = {f"Parameter {name} not used." for name in inlined}
    assert [f for f in findings if not (f.startswith("W2001 ") and f.split(" ", 2)[2] in expected)] == []


def test_lint_of_the_translation_catches_what_lint_of_the_sam_form_misses(tmp_path: Path) -> None:
    """The reason for linting both (LOCAL-AWS.md): a bad Runtime is only caught after translation."""
    broken = load_template()
    broken["Globals"]["Function"]["Runtime"] = "python3.99"
    findings = cfn_lint(write_json(translate(broken), tmp_path / "broken.json"))
    assert any("python3.99" in finding for finding in findings), findings


# --- functions ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("function", FUNCTIONS)
def test_handler_resolves_to_an_importable_callable(function: str) -> None:
    module, _, name = RESOURCES[function]["Properties"]["Handler"].rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))


def test_functions_run_python312_on_arm64_with_tracing_and_the_powertools_layer(translated: dict[str, Any]) -> None:
    functions = {n: r["Properties"] for n, r in translated["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}
    assert set(functions) == set(FUNCTIONS)
    for name, properties in functions.items():
        assert properties["Runtime"] == "python3.12", name
        assert properties["Architectures"] == ["arm64"], name
        assert properties["TracingConfig"] == {"Mode": "Active"}, name
        assert properties["Layers"] == [{"Ref": "PowertoolsLayerArn"}], name  # test_powertools_version.py
        assert properties["Code"] == {"S3Bucket": "onward-artifacts", "S3Key": "onward.zip"}, name


@pytest.mark.parametrize(("role", "function"), ROLE_FUNCTIONS)
def test_every_variable_the_code_reads_is_set_for_the_function(role: str, function: str) -> None:
    """In every role's template (the reconciler exists in home and standby only): drop JOBS_TABLE from
    ReconcilerFunction's variables and home-ReconcilerFunction fails."""
    read = code_of(function, role).environment
    missing = read - set(function_environment(function, role)) - set(UNSET_ON_PURPOSE)
    assert not missing, f"{role} {function} reads {sorted(missing)} but the template does not set them"


# Set on every function by Globals in home and standby though not every function's code reads them (the relay,
# projector, archiver and webhook functions act under no lease: docs/regional-recovery.md, "The lease"):
# test_template_regions.py requires them everywhere, so that a function whose code starts to build a JobStore
# fences itself without a template change.
AUTHORITY_VARIABLES_EVERYWHERE = {"ONWARD_WITNESS", "ONWARD_HOME_REGION", "ONWARD_AUTHORITY_LEASE_S",
                                  "ONWARD_AUTHORITY_CHECK_S"}


@pytest.mark.parametrize(("role", "function"), ROLE_FUNCTIONS)
def test_the_template_sets_only_variables_the_code_reads(role: str, function: str) -> None:
    read = code_of(function, role).environment
    extra = {v for v in function_environment(function, role) if not v.startswith("POWERTOOLS_")} - read
    if role != "single":
        extra -= AUTHORITY_VARIABLES_EVERYWHERE
    assert not extra, f"{role} {function}: the template sets {sorted(extra)}, which no reachable code reads"


@pytest.mark.parametrize(("role", "function"), ROLE_FUNCTIONS)
def test_resource_variables_follow_the_naming_convention(role: str, function: str) -> None:
    resources = ROLE_TEMPLATES[role]["Resources"]
    for variable, value in function_environment(function, role).items():
        if isinstance(value, dict) and value.get("Ref") in resources:
            assert environment_variable_for(value["Ref"]) == variable


def test_the_environment_tests_read_the_reconciler_of_home_and_standby() -> None:
    """The single-Region template has no ReconcilerFunction: tests over it alone never read its variables."""
    read = {(param.values[0], param.values[1]) for param in ROLE_FUNCTIONS}
    assert {("home", "ReconcilerFunction"), ("standby", "ReconcilerFunction")} <= read
    assert ("single", "ReconcilerFunction") not in read


@pytest.mark.parametrize("function", FUNCTIONS)
def test_outbox_writers_get_the_retention_parameter(function: str) -> None:
    """Whoever builds a JobStore stamps outbox TTLs: it must get OutboxRetentionDays, not the default."""
    if "onward.store.service" in code_of(function).modules:
        assert function_environment(function)["ONWARD_OUTBOX_RETENTION_DAYS"] == {"Ref": "OutboxRetentionDays"}


def test_the_api_gets_the_freshness_parameters() -> None:
    """The API says "delayed" past the objective plus one heartbeat interval: both must be the stack's."""
    environment = function_environment("ApiFunction")
    assert environment["ONWARD_STALE_AFTER_S"] == {"Ref": "FreshnessObjectiveSeconds"}
    assert environment["ONWARD_HEARTBEAT_INTERVAL_S"] == {"Ref": "HeartbeatIntervalSeconds"}


def test_unset_on_purpose_lists_only_variables_some_function_reads() -> None:
    read = set().union(*(code_of(function).environment for function in FUNCTIONS))
    assert set(UNSET_ON_PURPOSE) <= read


# --- the HTTP API -------------------------------------------------------------------------------------------

OPEN_ROUTES = {("GET", "/"), ("POST", "/"), ("GET", "/web/{name}"), ("GET", "/health"), ("GET", "/openapi.json")}


def api_events() -> dict[tuple[str, str], dict[str, Any]]:
    events = RESOURCES["ApiFunction"]["Properties"]["Events"].values()
    assert all(event["Type"] == "HttpApi" and event["Properties"]["ApiId"] == {"Ref": "HttpApi"} for event in events)
    return {(e["Properties"]["Method"], e["Properties"]["Path"]): e["Properties"] for e in events}


def test_the_gateway_routes_exactly_the_apps_routes() -> None:
    """A route the app serves but the gateway lacks would 404 at API Gateway, before the function."""
    from onward.api.app import app

    served = {(route.method, route.path.replace("<", "{").replace(">", "}"))
              for route in [*app._static_routes, *app._dynamic_routes]}
    assert set(api_events()) == served


def test_only_the_page_health_and_openapi_are_open_every_other_route_needs_the_jwt() -> None:
    api = RESOURCES["HttpApi"]["Properties"]
    assert api["Auth"]["DefaultAuthorizer"] == "Jwt"
    jwt = api["Auth"]["Authorizers"]["Jwt"]
    # the stack's user pool, or the given issuer (tests/unit/project/test_template_identity.py)
    assert jwt["JwtConfiguration"] == {
        "issuer": {"Fn::If": ["CreatesUserPool",
                              {"Fn::Sub": "https://cognito-idp.${AWS::Region}.${AWS::URLSuffix}/${UserPool}"},
                              {"Ref": "JwtIssuer"}]},
        "audience": {"Fn::If": ["CreatesUserPool", [{"Ref": "UserPoolClient"}, {"Ref": "OperatorClient"}],
                                {"Ref": "JwtAudience"}]}}
    assert jwt["IdentitySource"] == "$request.header.Authorization"
    open_routes = {key for key, event in api_events().items() if event.get("Auth") == {"Authorizer": "NONE"}}
    assert open_routes == OPEN_ROUTES
    assert all(set(event.get("Auth", {})) <= {"Authorizer"} for event in api_events().values())
    environment = function_environment("ApiFunction")
    assert environment["ONWARD_AUTH"] == "jwt"
    assert environment["ONWARD_TENANT_CLAIM"] == {"Fn::If": ["CreatesUserPool", "custom:tenant",
                                                             {"Ref": "TenantClaim"}]}


def cors_when_allowed(translated: dict[str, Any]) -> dict[str, Any]:
    """The API's CORS configuration when CorsAllowedOrigin names an origin; none at all otherwise."""
    cors = translated["Resources"]["HttpApi"]["Properties"]["Body"]["x-amazon-apigateway-cors"]
    condition, allowed, otherwise = cors["Fn::If"]
    assert condition == "AllowsCors" and otherwise == {"Ref": "AWS::NoValue"}
    assert TEMPLATE["Conditions"]["AllowsCors"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "CorsAllowedOrigin"}, ""]}]}
    configuration: dict[str, Any] = allowed
    return configuration


def test_cors_is_off_unless_an_origin_is_named_and_then_allows_the_headers_the_api_reads_and_sets(
        translated: dict[str, Any]) -> None:
    """No other origin's script reads an answer unless the deployment names that origin: breaks with CORS on by
    default (`*`, as before)."""
    assert TEMPLATE["Parameters"]["CorsAllowedOrigin"]["Default"] == ""
    cors = cors_when_allowed(translated)
    assert {"authorization", "content-type", "idempotency-key"} <= set(cors["allowHeaders"])
    assert {"location", "retry-after"} <= set(cors["exposeHeaders"])


def test_the_open_routes_have_a_throttle_of_their_own_and_the_api_a_quota_per_tenant() -> None:
    """Each open route has route settings of its own (PageThrottlingRateLimit), so a flood of job requests, which
    the stage's throttling bounds, never takes the page's or health's, and the reverse; every tenant's requests
    are counted against its own quota. Breaks if an open route is added without its settings."""
    settings = RESOURCES["HttpApi"]["Properties"]["RouteSettings"]
    own = {"ThrottlingRateLimit": {"Ref": "PageThrottlingRateLimit"},
           "ThrottlingBurstLimit": {"Ref": "PageThrottlingRateLimit"}}
    assert settings == {f"{method} {path}": own for method, path in OPEN_ROUTES}
    assert function_environment("ApiFunction")["ONWARD_TENANT_REQUESTS_PER_S"] == {"Ref": "TenantRequestsPerSecond"}


# --- stream event sources --------------------------------------------------------------------------------

def mapping_of(translated: dict[str, Any], function: str) -> dict[str, Any]:
    mappings = [r["Properties"] for r in translated["Resources"].values()
                if r["Type"] == "AWS::Lambda::EventSourceMapping"
                and r["Properties"]["FunctionName"] in ({"Ref": function}, {"Ref": f"{function}Aliaslive"})]
    assert len(mappings) == 1
    return mappings[0]


def test_relay_reads_only_inserts_reports_partial_failures_bisects_and_parks_batches_it_gives_up(
        translated: dict[str, Any]) -> None:
    mapping = mapping_of(translated, "RelayFunction")
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["OutboxTable", "StreamArn"]}
    assert [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]] == [{"eventName": ["INSERT"]}]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRecordAgeInSeconds"] == {"Ref": "RelayMaximumRecordAgeSeconds"}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": ["RelayFailuresQueue", "Arn"]}}}


def test_projector_reports_partial_failures_one_batch_per_shard_at_a_time(translated: dict[str, Any]) -> None:
    """ParallelizationFactor > 1 would project a shard's heartbeat beside earlier batches of other jobs:
    the watermark would vouch for events still being projected. It is fixed at 1, not a parameter."""
    mapping = mapping_of(translated, "ProjectorFunction")
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["EventsStream", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ParallelizationFactor"] == 1
    assert "ProjectorParallelizationFactor" not in translated.get("Parameters", {})
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": ["ProjectorFailuresQueue", "Arn"]}}}


@pytest.mark.parametrize("function", ["RelayFunction", "ProjectorFunction", "WorkerFunction"])
def test_every_stream_mapping_bounds_its_retries_and_its_records_age(translated: dict[str, Any], function: str) -> None:
    """Without MaximumRetryAttempts Lambda retries a failing batch until its records are
    MaximumRecordAgeInSeconds old (6 h here): one poison record froze its shard, and every job on it, that long."""
    mapping = mapping_of(translated, function)
    assert 0 <= mapping["MaximumRetryAttempts"] <= 10
    assert "MaximumRecordAgeInSeconds" in mapping


@pytest.mark.parametrize("function", ["RelayFunction", "ProjectorFunction"])
def test_the_pipeline_mappings_bisect_to_the_failing_record(translated: dict[str, Any], function: str) -> None:
    assert mapping_of(translated, function)["BisectBatchOnFunctionError"] is True


def test_the_projector_parks_a_poison_record_before_its_mapping_gives_it_up(translated: dict[str, Any]) -> None:
    """A mapping delivers a record that keeps failing MaximumRetryAttempts + 1 times, then sends only its
    metadata to the on-failure queue: the projector must park the full record by then, with a margin of two
    deliveries for a count or a park that fails itself (onward/pipeline/poison.py)."""
    deliveries = mapping_of(translated, "ProjectorFunction")["MaximumRetryAttempts"] + 1
    assert deliveries >= PARK_AFTER_FAILURES + 2


def test_the_local_pollers_take_the_error_handling_of_the_template() -> None:
    assert stream_error_handling("ProjectorFunction", TEMPLATE) == {
        "maximum_retry_attempts": 5, "bisect_batch_on_function_error": True,
        "maximum_record_age_s": TEMPLATE["Parameters"]["ProjectorMaximumRecordAgeSeconds"]["Default"]}
    assert stream_error_handling("RelayFunction", TEMPLATE)["maximum_retry_attempts"] == 5


def test_reaper_runs_on_its_schedule_and_the_worker_only_when_enabled(translated: dict[str, Any]) -> None:
    rules = {name: r for name, r in translated["Resources"].items() if r["Type"] == "AWS::Events::Rule"}
    assert rules["ReaperFunctionSchedule"]["Properties"]["ScheduleExpression"] == {"Ref": "ReaperSchedule"}
    assert rules["WorkerFunctionSchedule"]["Properties"]["ScheduleExpression"] == {"Ref": "WorkerSchedule"}
    conditional = {name for name, r in translated["Resources"].items() if r.get("Condition") == "WorkerOnLambda"}
    assert {"WorkerFunction", "WorkerRole", "WorkerLogGroup", "WorkerFunctionSchedule"} <= conditional
    assert TEMPLATE["Parameters"]["WorkerRuntime"]["Default"] == "ecs"


def test_the_scheduler_is_driven_every_minute_by_an_eventbridge_rule_whatever_the_worker_runtime(
        translated: dict[str, Any]) -> None:
    """On AWS nothing else ticks the scheduler (locally `onward up` does): without this rule, or with a slower
    rate, or one conditioned on a worker runtime, no schedule would fire (or would fire minutes late), as the
    finest cron step of a schedule is a minute."""
    rules = [r for r in translated["Resources"].values() if r["Type"] == "AWS::Events::Rule"
             and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["SchedulerFunction", "Arn"]}]
    assert len(rules) == 1
    (rule,) = rules
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Properties"].get("State", "ENABLED") == "ENABLED" and "Condition" not in rule
    permissions = [r["Properties"] for r in translated["Resources"].values() if r["Type"] == "AWS::Lambda::Permission"
                   and r["Properties"]["FunctionName"] == {"Ref": "SchedulerFunction"}]
    assert [p["Principal"] for p in permissions] == ["events.amazonaws.com"]  # the rule may invoke it


# --- alarms ---------------------------------------------------------------------------------------------

def alarms() -> dict[str, dict[str, Any]]:
    return {n: r["Properties"] for n, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}


def alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, metric, dimensions) the alarm watches."""
    if "MetricName" in alarm:
        return [(alarm["Namespace"], alarm["MetricName"], {d["Name"]: d["Value"] for d in alarm["Dimensions"]})]
    return [(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"],
             {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"]["Dimensions"]})
            for m in alarm["Metrics"] if "MetricStat" in m]


def test_iterator_age_of_both_stream_consumers_alarms_above_the_freshness_objective() -> None:
    watched = {}
    for alarm in alarms().values():
        for namespace, metric, dimensions in alarm_metrics(alarm):
            if (namespace, metric) == ("AWS/Lambda", "IteratorAge"):
                watched[dimensions["FunctionName"]["Ref"]] = alarm
    assert set(watched) == {"RelayFunction", "ProjectorFunction", "ArchiverFunction"}
    for function, alarm in watched.items():
        wanted = "ArchiverLagAlarmSeconds" if function == "ArchiverFunction" else "FreshnessObjectiveSeconds"
        assert alarm["Threshold"] == {"Ref": wanted}
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert [m["Expression"] for m in alarm["Metrics"] if "Expression" in m] == ["age_ms / 1000"]  # ms -> s


def test_conflicts_parked_records_and_every_on_failure_queue_alarm_above_zero() -> None:
    watched = {(namespace, metric, json.dumps(dimensions, sort_keys=True)): alarm
               for alarm in alarms().values() for namespace, metric, dimensions in alarm_metrics(alarm)}
    # a queue a function consumes (the webhook deliveries) holds messages on purpose: its alarm is on their age
    consumed = {event["Properties"]["Queue"]["Fn::GetAtt"][0] for r in RESOURCES.values()
                if r["Type"] == "AWS::Serverless::Function"
                for event in r["Properties"].get("Events", {}).values() if event["Type"] == "SQS"}
    queues = [name for name, r in RESOURCES.items() if r["Type"] == "AWS::SQS::Queue" and name not in consumed]
    assert consumed == {"WebhookDeliveriesQueue"}
    assert ("AWS/SQS", "ApproximateAgeOfOldestMessage", json.dumps(
        {"QueueName": {"Fn::GetAtt": ["WebhookDeliveriesQueue", "QueueName"]}}, sort_keys=True)) in watched
    wanted = [("Onward", "ProjectionConflict", {"service": "projector"}),
              ("Onward", "ProjectionParked", {"service": "projector"}),
              ("Onward", "RelayParked", {"service": "relay"}),
              *[("AWS/SQS", "ApproximateNumberOfMessagesVisible",
                 {"QueueName": {"Fn::GetAtt": [queue, "QueueName"]}}) for queue in queues]]
    for namespace, metric, dimensions in wanted:
        alarm = watched[(namespace, metric, json.dumps(dimensions, sort_keys=True))]
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold"), metric
    assert len(queues) == 4


def test_the_dashboard_shows_relay_lag_projection_lag_throughput_and_outcomes() -> None:
    widgets = dashboard_body(TEMPLATE)["widgets"]
    titles = " | ".join(w["properties"]["title"] for w in widgets)
    for wanted in ("Relay lag", "Projection lag", "Throughput", "Outcomes"):
        assert wanted in titles
    shown = {tuple(m[:2]) for w in widgets for m in w["properties"].get("metrics", [])}
    for outcome in ("Applied", "Duplicate", "Stale", "Conflict", "Parked"):
        assert ("Onward", f"Projection{outcome}") in shown
    assert {("Onward", "RelayPublished"), ("Onward", "ProjectionLag"), ("AWS/Lambda", "IteratorAge")} <= shown

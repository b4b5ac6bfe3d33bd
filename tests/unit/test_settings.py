"""onward/settings.py: what the environment configures, and refusing what it cannot mean."""

from __future__ import annotations

import pytest

from onward.domain.freshness import STALE_AFTER_S
from onward.pipeline.heartbeats import AWS_BEAT_SLACK_MS
from onward.settings import InvalidSetting, MissingSetting, Settings


def test_names_come_from_the_variables_of_the_template() -> None:
    settings = Settings.from_environment({"JOBS_TABLE": "jobs", "EVENTS_STREAM": "events", "OUTBOX_TABLE": ""})
    assert settings.require("jobs_table") == "jobs" and settings.require("events_stream") == "events"
    with pytest.raises(MissingSetting, match="OUTBOX_TABLE"):
        settings.require("outbox_table")
    with pytest.raises(ValueError, match="unknown resource"):
        settings.require("jobs")


def test_the_stale_threshold_is_the_objective_plus_one_heartbeat_interval_and_a_beats_slack() -> None:
    """An idle view is confirmed once per beat, through the beat's listing less its slack (5 s on AWS)."""
    assert Settings.from_environment({}).stale_after_s == STALE_AFTER_S + AWS_BEAT_SLACK_MS / 1000
    local = Settings.from_environment({"ONWARD_BEAT_SLACK_MS": "0"})
    assert (local.beat_slack_ms, local.stale_after_s) == (0, STALE_AFTER_S)  # the embedded endpoint's
    settings = Settings.from_environment({"ONWARD_STALE_AFTER_S": "10", "ONWARD_HEARTBEAT_INTERVAL_S": "60"})
    assert settings.stale_after_s == 75.0
    assert Settings.from_environment({"ONWARD_OUTBOX_RETENTION_DAYS": "3"}).outbox_retention_days == 3


@pytest.mark.parametrize("variable", ["ONWARD_STALE_AFTER_S", "ONWARD_HEARTBEAT_INTERVAL_S",
                                      "ONWARD_OUTBOX_RETENTION_DAYS", "ONWARD_BEAT_SLACK_MS"])
@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_number_that_is_not_one_is_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(InvalidSetting, match=variable):
        Settings.from_environment({variable: value})


def test_unsigned_requests_are_for_an_endpoint_and_only_its_json_target_services() -> None:
    """Breaks if the flag signs nothing less (the local stack pays SigV4 on both sides of every request),
    unsigns a service the endpoint routes by the signature's scope (CloudFormation's query protocol), or is
    accepted without an endpoint (every request to AWS would be refused, 403)."""
    from botocore import UNSIGNED

    settings = Settings.from_environment({"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "us-east-1",
                                          "ONWARD_UNSIGNED_REQUESTS": "true"})
    assert settings.unsigned_requests
    for service in ("dynamodb", "dynamodbstreams", "kinesis"):
        assert settings.client(service).meta.config.signature_version is UNSIGNED
    assert settings.client("cloudformation").meta.config.signature_version is not UNSIGNED
    signed = Settings.from_environment({"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "us-east-1"})
    assert not signed.unsigned_requests
    assert signed.client("dynamodb").meta.config.signature_version is not UNSIGNED
    with pytest.raises(InvalidSetting, match="needs AWS_ENDPOINT_URL"):
        Settings.from_environment({"ONWARD_UNSIGNED_REQUESTS": "1"})
    with pytest.raises(InvalidSetting, match="ONWARD_UNSIGNED_REQUESTS must be true or false"):
        Settings.from_environment({"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "ONWARD_UNSIGNED_REQUESTS": "yes"})


def test_parameter_validation_is_on_unless_turned_off() -> None:
    """Breaks if the flag's default turns botocore's request validation off (a malformed request would reach
    the service, or moto, which may accept what AWS refuses), if "false" leaves it on (the local stack pays
    it on every request), or if a value that is no flag is taken for one."""
    from botocore.exceptions import ParamValidationError

    class Sent(Exception):
        """The request got past validation (raised where botocore would send it)."""

    def send_too_short_table_name(settings: Settings, service: str) -> None:
        client = settings.client(service)

        def refuse(**_: object) -> None:
            raise Sent

        client.meta.events.register("before-call", refuse)
        operation = {"dynamodb": lambda: client.describe_table(TableName=""),
                     "dynamodbstreams": lambda: client.describe_stream(StreamArn="t"),
                     "kinesis": lambda: client.describe_stream_summary(StreamName="")}[service]
        operation()  # each name is below its service's minimum length: botocore's validation refuses it

    local = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "us-east-1"}
    checked = Settings.from_environment(local)
    unchecked = Settings.from_environment({**local, "ONWARD_PARAMETER_VALIDATION": "false"})
    assert checked.parameter_validation and not unchecked.parameter_validation
    for service in ("dynamodb", "dynamodbstreams", "kinesis"):
        with pytest.raises(ParamValidationError):
            send_too_short_table_name(checked, service)
        with pytest.raises(Sent):
            send_too_short_table_name(unchecked, service)
    with pytest.raises(InvalidSetting, match="ONWARD_PARAMETER_VALIDATION must be true or false"):
        Settings.from_environment({**local, "ONWARD_PARAMETER_VALIDATION": "off"})

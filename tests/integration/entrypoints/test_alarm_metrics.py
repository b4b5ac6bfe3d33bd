"""The metrics the new alarms read are the ones the code prints: the Lambda handlers run against a stack on the
embedded endpoint with Powertools metrics enabled, and their EMF output is read back. An alarm on a metric name
or dimension the code never publishes is silent forever (or, for the heartbeat alarm, which breaches on missing
data, always firing): tests/unit/project/test_template_alarms.py checks the alarms, this checks that their data exists.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from onward.api import app as api_app
from onward.api.routes import about
from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.domain.models import NewJob
from onward.entrypoints import projector as projector_app
from onward.entrypoints import reaper as reaper_app
from onward.pipeline.heartbeats import Heartbeat, encode_heartbeat
from onward.telemetry import COUNTS_SENT_WHEN_NOT_ZERO
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.template import load_template
from tests.integration.entrypoints.test_lambda_events import http_event, kinesis_event, outbox_event, sample

pytestmark = pytest.mark.integration


def emf_documents(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{") and '"_aws"' in line]


def published(documents: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[str, list[float]]]:
    """(namespace, metric, dimensions as `name=value,...`) -> (unit, values), as CloudWatch files them."""
    found = {}
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            (dimension_names,) = directive["Dimensions"]  # Powertools publishes one dimension set
            dimensions = ",".join(f"{name}={document[name]}" for name in sorted(dimension_names))
            for metric in directive["Metrics"]:
                values = document[metric["Name"]]
                found[(directive["Namespace"], metric["Name"], dimensions)] = (
                    metric["Unit"], values if isinstance(values, list) else [values])
    return found


def alarm_metrics(service: str, role: str = "single") -> set[tuple[str, str, str]]:
    """(namespace, metric, dimensions) of the Onward metrics of `service` that some alarm of a stack with
    RegionRole=`role` reads."""
    wanted = set()
    for resource in load_template(role=role)["Resources"].values():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        properties = resource["Properties"]
        metrics = [properties] if "MetricName" in properties else [
            m["MetricStat"]["Metric"] for m in properties["Metrics"] if "MetricStat" in m]
        for metric in metrics:
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            if metric["Namespace"] == "Onward" and dimensions.get("service") == service:
                wanted.add(("Onward", metric["MetricName"],
                            ",".join(f"{name}={value}" for name, value in sorted(dimensions.items()))))
    return wanted


@pytest.fixture
def metrics_on(stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    return stack_environment


def test_the_reaper_publishes_the_backlog_age_the_alarm_reads(metrics_on: dict[str, str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A job due for over a second and claimed by nobody: the reaper's OldestDueAgeSeconds says so, in
    seconds, under the namespace and dimension BacklogAgeAlarm reads."""
    store = Deployment.from_environment().job_store
    created_at = system_clock()
    store.create("acme", NewJob(type="demo.echo"))
    time.sleep(1.2)

    reaper_app.handler(sample("cloudwatch-scheduled-event"), LocalLambdaContext("reaper"))

    found = published(emf_documents(capsys.readouterr().out))
    unit, values = found[("Onward", "OldestDueAgeSeconds", "service=reaper")]
    assert unit == "Seconds" and len(values) == 1
    assert 1.2 <= values[0] <= (system_clock() - created_at) / 1000
    missing = alarm_metrics("reaper") - set(found)
    assert not missing, f"alarms read reaper metrics it never publishes: {missing}"


def test_the_projector_counts_each_heartbeat_it_applies_and_reports_zero_without(
        metrics_on: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """PipelineHeartbeats is the heartbeat alarm's only input: one per heartbeat record projected, and 0 for a
    batch without one (so 'no data' means the projector did not run at all, and the sum tells the two apart)."""
    stream_arn = "arn:aws:kinesis:us-east-1:123456789012:stream/events"
    beat = encode_heartbeat(Heartbeat(slots=16, through={slot: system_clock() for slot in range(16)}))
    events = [outbox_event(version=1), outbox_event(version=1, result_inline={"rows": 1})]  # applied, conflict
    with_beats = kinesis_event([beat, *(json.dumps(event).encode() for event in events), beat], stream_arn)
    without = kinesis_event([json.dumps(outbox_event(version=2)).encode()], stream_arn)

    assert projector_app.handler(with_beats, LocalLambdaContext("projector")) == {"batchItemFailures": []}
    first = published(emf_documents(capsys.readouterr().out))
    assert projector_app.handler(without, LocalLambdaContext("projector")) == {"batchItemFailures": []}
    second = published(emf_documents(capsys.readouterr().out))

    assert first[("Onward", "PipelineHeartbeats", "service=projector")] == ("Count", [2.0])
    assert second[("Onward", "PipelineHeartbeats", "service=projector")] == ("Count", [0.0])
    unit, lag = first[("Onward", "ProjectionLag", "service=projector")]  # ProjectionLagAlarm's, in ms
    assert unit == "Milliseconds" and len(lag) == 1
    # ProjectionParked was 0 here, so not sent (a count is sent only when not zero; its alarm FILLs it with 0).
    missing = {key for key in alarm_metrics("projector") - set(first) if key[1] not in COUNTS_SENT_WHEN_NOT_ZERO}
    assert not missing, f"alarms read projector metrics it never publishes: {missing}"


def test_a_standby_projector_publishes_the_replicated_heartbeats_age_its_alarms_read(
        metrics_on: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """HomeRegionLost and ReplicatedHeartbeatAge (the standby's, issue 39) read ReplicatedHeartbeatAgeSeconds and
    count missing data as breaching: without it a standby pages forever; sent by a single-Region stack it would
    be a metric no alarm reads. The age is the projection time less the newest heartbeat's commit time."""
    stream_arn = "arn:aws:kinesis:us-east-1:123456789012:stream/events"
    committed = system_clock() - 2_000
    beat = encode_heartbeat(Heartbeat(slots=16, through={slot: committed - slot for slot in range(16)}))

    projector_app.handler(kinesis_event([beat], stream_arn), LocalLambdaContext("projector"))
    single = published(emf_documents(capsys.readouterr().out))
    monkeypatch.setenv("ONWARD_WITNESS", "ssm:eu-central-1:/onward/test/home")
    projector_app.handler(kinesis_event([beat], stream_arn), LocalLambdaContext("projector"))
    standby = published(emf_documents(capsys.readouterr().out))
    projector_app.handler(kinesis_event([json.dumps(outbox_event(version=3)).encode()], stream_arn),
                          LocalLambdaContext("projector"))
    no_beat = published(emf_documents(capsys.readouterr().out))

    age = ("Onward", "ReplicatedHeartbeatAgeSeconds", "service=projector")
    assert age not in single and age not in no_beat  # no heartbeat in the batch: no data (the alarm breaches)
    unit, values = standby[age]
    assert unit == "Seconds" and len(values) == 1 and 2.0 <= values[0] <= (system_clock() - committed) / 1000
    standby_only = alarm_metrics("projector", role="standby") - alarm_metrics("projector")  # (the others: above)
    assert age in standby_only and not standby_only - set(standby), standby_only


def test_the_api_counts_each_request_it_answers_with_an_unhandled_500(
        metrics_on: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """ApiUnhandledErrorsAlarm rolls a deploy of the API back (its DeploymentPreference): a route that raises
    is answered 500 by the resolver, no invocation error, so without this count a version whose route fails
    on every request deployed green."""
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug of the new version")

    monkeypatch.setattr(about, "json_answer", broken)
    answer = api_app.handler(http_event("GET", "/health"), LocalLambdaContext("api"))

    assert answer["statusCode"] == 500
    found = published(emf_documents(capsys.readouterr().out))
    assert found[("Onward", "ApiUnhandledErrors", "service=api")] == ("Count", [1.0])
    missing = alarm_metrics("api") - set(found)
    assert not missing, f"alarms read api metrics it never publishes: {missing}"

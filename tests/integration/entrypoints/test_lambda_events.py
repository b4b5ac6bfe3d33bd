"""Each Lambda handler named in template.yaml, fed the event shapes its source really sends (the samples
`sam local generate-event` prints, in tests/events/sam/), against a stack with empty tables on the embedded
endpoint; each answers what Lambda expects: `batchItemFailures` for stream sources, an HTTP API v2 response
for the API. Only fields that must point at this test's stack are replaced (stream ARN, payloads, path, claims).

With metrics disabled (POWERTOOLS_METRICS_DISABLED, as `onward up` and the fixtures set) nothing is printed;
enabled, the handlers print the EMF metrics the template's alarms and dashboard read.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from onward.api import app as api_app
from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.entrypoints import projector as projector_app
from onward.entrypoints import reaper as reaper_app
from onward.entrypoints import relay as relay_app
from onward.entrypoints import worker as worker_app
from onward.store.service import JobStore
from onward.telemetry import COUNTS_SENT_WHEN_NOT_ZERO
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.template import load_template
from tests.samtemplate import dashboard_body

pytestmark = pytest.mark.integration

EVENTS = Path(__file__).resolve().parents[2] / "events"
STREAM_RESPONSE_KEYS = {"batchItemFailures"}
HTTP_V2_RESPONSE_KEYS = {"statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded", "cookies"}


def sample(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / "sam" / f"{name}.json").read_text())


def emf_metrics(output: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(service, metric name) -> the EMF document that carried it, from printed lines."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for line in output.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == "Onward"
            for metric in directive["Metrics"]:
                found[(document.get("service", ""), metric["Name"])] = document
    return found


def template_emf_metrics() -> set[tuple[str, str]]:
    """(service, metric) in namespace Onward that alarms and the dashboard read."""
    template = load_template()
    wanted: set[tuple[str, str]] = set()
    for name, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            metrics = [properties] if "MetricName" in properties else [
                m["MetricStat"]["Metric"] for m in properties["Metrics"] if "MetricStat" in m]
            wanted |= {(d["Value"], m["MetricName"]) for m in metrics if m["Namespace"] == "Onward"
                       for d in m["Dimensions"] if d["Name"] == "service"}
        if resource["Type"] == "AWS::CloudWatch::Dashboard":
            body = dashboard_body(template, resource=name)
            wanted |= {(m[3], m[1]) for w in body["widgets"] for m in w["properties"].get("metrics", [])
                       if m[0] == "Onward"}
    return wanted


def outbox_event(**changes: Any) -> dict[str, Any]:
    event = json.loads((EVENTS / "outbox_event_v1.json").read_text())
    event.update(changes)
    event["event_id"] = f"{event['job_id']}:{event['version']}"
    return event


def kinesis_event(payloads: list[bytes], stream_arn: str) -> dict[str, Any]:
    """The generated get-records sample, one record per payload (sequence numbers ascending)."""
    template = sample("kinesis-get-records")["Records"][0]
    records = []
    for number, payload in enumerate(payloads, start=1):
        record = copy.deepcopy(template)
        record["kinesis"]["data"] = base64.b64encode(payload).decode()
        record["kinesis"]["sequenceNumber"] = str(number)
        record["kinesis"]["partitionKey"] = "job"
        record["eventID"] = f"shardId-000000000000:{number}"
        record["eventSourceARN"] = stream_arn
        records.append(record)
    return {"Records": records}


def http_event(method: str, path: str, *, claims: dict[str, str] | None = None, body: Any = None,
               path_parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The generated http-api-proxy sample, pointed at one route."""
    event = sample("apigateway-http-api-proxy")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
    event["rawQueryString"], event["queryStringParameters"] = "", None
    event["pathParameters"] = path_parameters or {}
    event["requestContext"]["authorizer"]["jwt"]["claims"] = claims or {}
    event["body"] = base64.b64encode(json.dumps(body).encode()).decode() if body is not None else None
    event["isBase64Encoded"] = body is not None
    if body is not None:  # what a client sending JSON declares (API Gateway lower-cases header names)
        event["headers"]["content-type"] = "application/json"
    return event


def assert_http_v2(response: dict[str, Any]) -> None:
    assert set(response) <= HTTP_V2_RESPONSE_KEYS and {"statusCode", "body"} <= set(response)
    assert isinstance(response["statusCode"], int) and isinstance(response["body"], str)


def job_store() -> JobStore:
    """The store the handlers use: their Deployment's, for this test's environment."""
    return Deployment.from_environment().job_store


# --- projector: kinesis get-records -------------------------------------------------------------------------

def test_projector_parks_the_unmodified_sample_and_reports_no_failure(lambda_environment, endpoint, capsys) -> None:
    """The sample's payload ("Hello, this is a test 123.") is no event: parked with its reason, not failed."""
    response = projector_app.handler(sample("kinesis-get-records"), LocalLambdaContext("projector"))
    assert response == {"batchItemFailures": []}
    parked = endpoint.client("dynamodb").scan(TableName=lambda_environment["PARKED_TABLE"])["Items"]
    assert len(parked) == 1 and "not JSON" in str(parked[0])
    assert '"_aws"' not in capsys.readouterr().out  # metrics disabled: no EMF on stdout


def test_projector_outcomes_reach_the_view_and_the_emf_metrics_the_alarms_read(
        lambda_environment, endpoint, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    newest, older = outbox_event(version=3), outbox_event(version=2, status="running")
    disagreeing = outbox_event(version=3, result_inline={"rows": 1})
    payloads = [json.dumps(e).encode() for e in (newest, newest, older, disagreeing)] + [b"\xff not json"]
    event = kinesis_event(payloads, "arn:aws:kinesis:us-east-1:123456789012:stream/events")

    response = projector_app.handler(event, LocalLambdaContext("projector"))

    assert set(response) == STREAM_RESPONSE_KEYS and response["batchItemFailures"] == []
    view = endpoint.client("dynamodb").get_item(TableName=lambda_environment["STATUS_TABLE"],
                                                 Key={"job_id": {"S": newest["job_id"]}})["Item"]
    assert view["version"] == {"N": "3"} and view["status"] == {"S": "succeeded"}
    emitted = emf_metrics(capsys.readouterr().out)
    counts = {name: emitted[("projector", name)][name] for _, name in emitted}
    # One value each: nothing left over from earlier invocations with metrics disabled (onward.telemetry).
    lag = counts.pop("ProjectionLag")
    assert counts == {"ProjectionApplied": [1.0], "ProjectionDuplicate": [1.0], "ProjectionStale": [1.0],
                      "ProjectionConflict": [1.0], "ProjectionParked": [1.0], "PipelineHeartbeats": [0.0],
                      "ProjectionWritesSaved": [3.0]}  # one job's four events, one view write
    assert len(lag) == 1
    wanted = {key for key in template_emf_metrics() if key[0] == "projector"}
    assert wanted <= set(emitted), (
        f"alarms or dashboard read metrics the projector never emits: {wanted - set(emitted)}")


# --- relay: dynamodb update ---------------------------------------------------------------------------------

def outbox_stream_arn(environment: dict[str, str], endpoint) -> str:
    return endpoint.client("dynamodb").describe_table(TableName=environment["OUTBOX_TABLE"])["Table"]["LatestStreamArn"]


def test_relay_takes_the_sample_parks_its_insert_ignores_the_rest(lambda_environment, endpoint) -> None:
    """The sample holds an INSERT, a MODIFY and a REMOVE of a table that is no outbox (Lambda's INSERT
    filter would drop the last two): the INSERT is parked, nothing fails."""
    event = sample("dynamodb-update")
    for record in event["Records"]:
        record["eventSourceARN"] = outbox_stream_arn(lambda_environment, endpoint)
    response = relay_app.handler(event, LocalLambdaContext("relay"))
    assert response == {"batchItemFailures": []}
    parked = endpoint.client("dynamodb").scan(TableName=lambda_environment["PARKED_TABLE"])["Items"]
    assert len(parked) == 1 and "invalid outbox image" in str(parked[0])


@pytest.mark.own_stack  # it reads the events stream back
def test_relay_publishes_a_real_outbox_insert_and_emits_its_metrics(
        lambda_environment, endpoint, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    job = job_store().create("acme", NewJob(type="demo.echo")).job
    dynamodb = endpoint.client("dynamodb")
    image = dynamodb.query(TableName=lambda_environment["OUTBOX_TABLE"], KeyConditionExpression="job_id = :j",
                           ExpressionAttributeValues={":j": {"S": job.job_id}})["Items"][0]
    event = sample("dynamodb-update")
    record = event["Records"][0]  # the INSERT
    record["eventSourceARN"] = outbox_stream_arn(lambda_environment, endpoint)
    record["dynamodb"].update(Keys={"job_id": image["job_id"], "version": image["version"]}, NewImage=image,
                              StreamViewType="NEW_IMAGE", SequenceNumber="900000000000000000001")
    event["Records"] = [record]

    response = relay_app.handler(event, LocalLambdaContext("relay"))

    assert response == {"batchItemFailures": []}
    kinesis = endpoint.client("kinesis")
    stream = lambda_environment["EVENTS_STREAM"]
    published = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        published += [json.loads(r["Data"]) for r in kinesis.get_records(ShardIterator=iterator)["Records"]]
    assert [(e["job_id"], e["version"]) for e in published if e.get("job_id") == job.job_id] == [(job.job_id, 1)]
    emitted = emf_metrics(capsys.readouterr().out)
    assert emitted[("relay", "RelayPublished")]["RelayPublished"] == [1.0]
    # Its retried entries and parked records were 0: not sent (counts are sent only when not zero).
    zero = {("relay", "RelayRetriedEntries"), ("relay", "RelayParked")}
    assert {name for _, name in zero} <= COUNTS_SENT_WHEN_NOT_ZERO and not zero & set(emitted)
    wanted = {key for key in template_emf_metrics() if key[0] == "relay"} - zero
    assert wanted <= set(emitted), f"alarms or dashboard read metrics the relay never emits: {wanted - set(emitted)}"


# --- API: apigateway http-api-proxy ---------------------------------------------------------------------

def test_api_answers_the_unmodified_sample_with_an_http_v2_problem(lambda_environment) -> None:
    response = api_app.handler(sample("apigateway-http-api-proxy"), LocalLambdaContext("api"))
    assert_http_v2(response)
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["title"] == "Not found"


def test_api_creates_and_reads_a_job_for_the_tenant_named_by_the_jwt_claim(lambda_environment) -> None:
    context = LocalLambdaContext("api")
    created = api_app.handler(http_event("POST", "/jobs", claims={"tenant": "acme"},
                                         body={"type": "demo.echo", "params": {"n": 1}}), context)
    assert_http_v2(created)
    assert created["statusCode"] == 202, created["body"]
    job_id = json.loads(created["body"])["job_id"]

    read = api_app.handler(http_event("GET", f"/jobs/{job_id}", claims={"tenant": "acme"},
                                      path_parameters={"job_id": job_id}), context)
    assert_http_v2(read)
    answer = json.loads(read["body"])  # no pipeline runs here: the view has not seen the job yet
    assert read["statusCode"] == 200 and answer["visible"] is False and answer["job_id"] == job_id

    other_tenant = api_app.handler(http_event("GET", f"/jobs/{job_id}", claims={"tenant": "globex"},
                                              path_parameters={"job_id": job_id}), context)
    assert other_tenant["statusCode"] == 404
    no_claims = api_app.handler(http_event("GET", "/jobs"), context)
    assert no_claims["statusCode"] == 401


def test_api_serves_health_without_a_token(lambda_environment) -> None:
    response = api_app.handler(http_event("GET", "/health"), LocalLambdaContext("api"))
    assert_http_v2(response)
    assert response["statusCode"] == 200 and json.loads(response["body"]) == {
        "status": "ok", "authority": "home", "writes": "accepted", "writes_refused_because": None}


# --- reaper and worker: cloudwatch scheduled-event ------------------------------------------------------------

def test_reaper_hands_back_a_lapsed_lease_on_the_scheduled_event(lambda_environment, capsys) -> None:
    store = job_store()
    job = store.create("acme", NewJob(type="demo.echo")).job
    assert store.claim("w-gone", 0.001) is not None
    time.sleep(0.05)
    response = reaper_app.handler(sample("cloudwatch-scheduled-event"), LocalLambdaContext("reaper"))
    assert response == {"reaped": 1}
    assert store.get(job.job_id).state.value in {"retry_wait", "queued"}
    assert '"_aws"' not in capsys.readouterr().out


def test_worker_runs_due_jobs_of_the_registered_types_on_the_scheduled_event(lambda_environment) -> None:
    store = job_store()
    jobs = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job for n in range(2)]
    response = worker_app.handler(sample("cloudwatch-scheduled-event"), LocalLambdaContext("worker"))
    assert response == {"ran": 2}
    assert [store.get(job.job_id).state.value for job in jobs] == ["succeeded", "succeeded"]
    assert worker_app.handler(sample("cloudwatch-scheduled-event"), LocalLambdaContext("worker")) == {"ran": 0}

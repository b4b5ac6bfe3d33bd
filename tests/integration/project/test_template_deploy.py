"""The SAM translation of template.yaml (what CloudFormation really receives) keeps data resources the
embedded endpoint's CloudFormation can create: tables with their indexes and streams, the events stream,
the on-failure queues, each named under the stack's name. test_embedded_endpoint.py deploys the untranslated
file the local stack uses."""

from __future__ import annotations

import pytest

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.template import as_json, data_resources_template, load_template
from tests.samtemplate import translate

pytestmark = pytest.mark.integration


def test_translated_data_resources_create_in_the_endpoints_cloudformation(endpoint: EmbeddedEndpoint) -> None:
    translated = translate()
    subset = data_resources_template(translated)
    assert subset["Resources"] == data_resources_template(load_template())["Resources"]  # the transform kept them
    cloudformation = endpoint.client("cloudformation")
    cloudformation.create_stack(StackName="translated", TemplateBody=as_json(subset))
    cloudformation.get_waiter("stack_create_complete").wait(StackName="translated",
                                                           WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    created = {r["LogicalResourceId"]: r for r in
               cloudformation.describe_stack_resources(StackName="translated")["StackResources"]}
    assert set(created) == set(subset["Resources"])
    assert all(r["ResourceStatus"] == "CREATE_COMPLETE" for r in created.values())

    assert {name: r["PhysicalResourceId"].rpartition("/")[2] for name, r in created.items()} == {
        "JobsTable": "translated-jobs", "OutboxTable": "translated-outbox", "StatusTable": "translated-status",
        "CheckpointTable": "translated-checkpoints", "ConflictsTable": "translated-conflicts",
        "ParkedTable": "translated-parked", "EventsStream": "translated-events",
        "RelayFailuresQueue": "translated-relay-failures", "ProjectorFailuresQueue": "translated-projector-failures",
        "ArchiverFailuresQueue": "translated-archiver-failures",
        "WebhookDeliveriesQueue": "translated-webhook-deliveries",
        "WebhookMatcherFailuresQueue": "translated-webhook-matcher-failures"}

    dynamodb, kinesis, sqs = (endpoint.client(name) for name in ("dynamodb", "kinesis", "sqs"))
    jobs = dynamodb.describe_table(TableName=created["JobsTable"]["PhysicalResourceId"])["Table"]
    assert {index["IndexName"] for index in jobs["GlobalSecondaryIndexes"]} == {
        "ready", "leases", "active", "parked", "overlaps"}
    outbox = dynamodb.describe_table(TableName=created["OutboxTable"]["PhysicalResourceId"])["Table"]
    assert outbox["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    stream = kinesis.describe_stream_summary(StreamName=created["EventsStream"]["PhysicalResourceId"])
    peak = translated["Parameters"]["TargetJobsPerSecond"]["Default"]
    assert stream["StreamDescriptionSummary"]["OpenShardCount"] == (
        translated["Mappings"]["EventsStreamSizing"][peak]["Shards"])  # sized for the default peak
    for queue in ("RelayFailuresQueue", "ProjectorFailuresQueue", "ArchiverFailuresQueue", "WebhookDeliveriesQueue",
                  "WebhookMatcherFailuresQueue"):
        attributes = sqs.get_queue_attributes(QueueUrl=created[queue]["PhysicalResourceId"],
                                              AttributeNames=["MessageRetentionPeriod"])["Attributes"]
        assert attributes["MessageRetentionPeriod"] == "1209600"


def test_two_stacks_on_one_endpoint_name_every_data_resource_apart(endpoint: EmbeddedEndpoint) -> None:
    """The fixed names begin with the stack's: two stacks deployed side by side share no table, stream or queue,
    and each stack's environment names its own."""
    first, second = (endpoint.deploy(name).environment for name in ("names-first", "names-second"))
    resources = sorted(variable for variable in first if variable.endswith(("_TABLE", "_STREAM", "_QUEUE")))
    assert len(resources) == len(data_resources_template(load_template())["Resources"])
    assert first["JOBS_TABLE"] == "names-first-jobs" and second["JOBS_TABLE"] == "names-second-jobs"
    assert not {first[variable] for variable in resources} & {second[variable] for variable in resources}
    assert all(first[variable].rpartition("/")[2].startswith("names-first-") for variable in resources)


def test_deleting_the_stack_keeps_every_data_resource_and_the_jobs_in_them(endpoint: EmbeddedEndpoint) -> None:
    """The walkthrough's tear-down (docs/deploy.md): `sam delete` removes the stack, not the data. Breaks if a
    data resource loses `DeletionPolicy: Retain` (its table, stream or queue deleted with the stack, and with
    it every job's history)."""
    from onward.domain.models import NewJob
    from onward.settings import Settings
    from onward.store.service import JobStore

    environment = endpoint.deploy("teardown").environment
    store = JobStore(Settings.from_environment(environment), client=endpoint.client("dynamodb"))
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    cloudformation = endpoint.client("cloudformation")
    cloudformation.delete_stack(StackName="teardown")
    cloudformation.get_waiter("stack_delete_complete").wait(StackName="teardown",
                                                           WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    # asked by name: a listing answers one page (100 tables), and a shared endpoint holds more than that
    dynamodb, kinesis, sqs = (endpoint.client(service) for service in ("dynamodb", "kinesis", "sqs"))
    for table in (environment[variable] for variable in environment if variable.endswith("_TABLE")):
        assert dynamodb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"
    assert kinesis.describe_stream_summary(StreamName=environment["EVENTS_STREAM"])["StreamDescriptionSummary"]
    for queue in ("teardown-relay-failures", "teardown-projector-failures", "teardown-archiver-failures"):
        assert sqs.get_queue_url(QueueName=queue)["QueueUrl"].endswith(queue)
    assert store.get(job_id).job_id == job_id  # the data is still there

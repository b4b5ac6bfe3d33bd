"""The SAM translation of template.yaml (what CloudFormation really receives) keeps data resources the
embedded endpoint's CloudFormation can create: tables with their indexes and streams, the events stream,
the on-failure queues. test_embedded_endpoint.py deploys the untranslated file the local stack uses."""

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

    dynamodb, kinesis, sqs = (endpoint.client(name) for name in ("dynamodb", "kinesis", "sqs"))
    jobs = dynamodb.describe_table(TableName=created["JobsTable"]["PhysicalResourceId"])["Table"]
    assert {index["IndexName"] for index in jobs["GlobalSecondaryIndexes"]} == {
        "ready", "leases", "active", "parked", "overlaps"}
    outbox = dynamodb.describe_table(TableName=created["OutboxTable"]["PhysicalResourceId"])["Table"]
    assert outbox["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    stream = kinesis.describe_stream_summary(StreamName=created["EventsStream"]["PhysicalResourceId"])
    assert stream["StreamDescriptionSummary"]["OpenShardCount"] == 2  # EventsStreamShards' default
    for queue in ("RelayFailuresQueue", "ProjectorFailuresQueue"):
        attributes = sqs.get_queue_attributes(QueueUrl=created[queue]["PhysicalResourceId"],
                                              AttributeNames=["MessageRetentionPeriod"])["Attributes"]
        assert attributes["MessageRetentionPeriod"] == "1209600"

"""The platform's own tables replicated between two Regions' stacks, as the design replicates them on AWS
(docs/regional-recovery.md): the jobs table and the outbox are global tables, so a job created in the home
Region is in the standby's jobs table, and its outbox event is in the standby's outbox stream too, where the
standby's relay would read it again (why the standby's pipeline stays off until a failover).

How it would break without the code: without `tables_of` the replicator would not know that both Regions'
`onward-jobs` tables are one global table; without the write tap nothing would reach the standby, and
without applying through moto's table the standby's stream would not show the replicated event nor its
indexes the replicated row.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.settings import Settings
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.replication.replicator import Replicator, tables_of

pytestmark = pytest.mark.integration

HOME, STANDBY = "ap-southeast-2", "ap-northeast-1"


@pytest.fixture(scope="module")
def stacks() -> Iterator[tuple[dict[str, str], dict[str, str], Replicator]]:
    with EmbeddedEndpoint(region=HOME) as home, EmbeddedEndpoint(region=STANDBY) as standby:
        environments = {HOME: home.deploy().environment, STANDBY: standby.deploy().environment}
        with Replicator([home, standby], tables_of(environments)) as replicator:
            yield environments[HOME], environments[STANDBY], replicator


def test_a_job_created_at_home_is_in_the_standbys_jobs_table_and_outbox_stream(
        stacks: tuple[dict[str, str], dict[str, str], Replicator]) -> None:
    home, standby, replicator = stacks
    assert home["JOBS_TABLE"] == standby["JOBS_TABLE"]  # replicas of a global table share its name
    created = Deployment(Settings.from_environment(home)).job_store.create("acme", NewJob(type="demo.ok"))
    assert replicator.wait_idle()

    standby_store = Deployment(Settings.from_environment(standby)).job_store
    assert standby_store.get(created.job.job_id, "acme").version == created.job.version
    assert replicator.counts()["superseded"] == 0 and replicator.counts()["dropped"] == 0
    streams = boto3.client("dynamodbstreams", endpoint_url=standby["AWS_ENDPOINT_URL"], region_name=STANDBY,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    outbox_stream = boto3.client("dynamodb", endpoint_url=standby["AWS_ENDPOINT_URL"], region_name=STANDBY,
                                 aws_access_key_id="testing", aws_secret_access_key="testing").describe_table(
        TableName=standby["OUTBOX_TABLE"])["Table"]["LatestStreamArn"]
    job_ids = []
    for shard in streams.describe_stream(StreamArn=outbox_stream)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=outbox_stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        job_ids += [record["dynamodb"]["NewImage"]["job_id"]["S"]
                    for record in streams.get_records(ShardIterator=iterator)["Records"]]
    assert created.job.job_id in job_ids

    # the replicated row is in the standby's sparse `ready` index too, where a claim there would find it
    dynamodb = boto3.client("dynamodb", endpoint_url=standby["AWS_ENDPOINT_URL"], region_name=STANDBY,
                            aws_access_key_id="testing", aws_secret_access_key="testing")
    row = dynamodb.get_item(TableName=standby["JOBS_TABLE"],
                            Key={"pk": {"S": f"JOB#{created.job.job_id}"}, "sk": {"S": "JOB"}})["Item"]
    ready = dynamodb.query(TableName=standby["JOBS_TABLE"], IndexName="ready",
                           KeyConditionExpression="ready_pk = :p", ExpressionAttributeValues={":p": row["ready_pk"]})
    assert [item["pk"]["S"] for item in ready["Items"]] == [f"JOB#{created.job.job_id}"]

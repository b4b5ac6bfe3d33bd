"""The archive's Firehose sink against the embedded endpoint's Firehose (moto): records sent through
PutRecordBatch arrive in the delivery stream's bucket, every one, as the JSON lines the sink sent.

What moto models, and so what this proves: a delivery stream with an ExtendedS3 destination writes each
PutRecordBatch's records, concatenated, as one object under the destination's Prefix (taken literally,
followed by YYYY/MM/DD/HH/). It does no buffering, no format conversion to Parquet, no dynamic partitioning and
no error prefix: those are AWS's, configured in template.yaml's ArchiveDeliveryStream and checked there
(tests/unit/project/test_template_archive.py), and the local stack's archive is a directory of Parquet files
(onward.pipeline.archive.parquet), not this."""

from __future__ import annotations

import json
import uuid

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun
from onward.pipeline.archive.firehose import FirehoseArchive
from onward_infra.endpoint import EmbeddedEndpoint


def _record(n: int) -> ArchivedJob:
    return ArchivedJob(job_id=f"job-{n}", tenant=f"tenant-{n % 3}", type="report", state="succeeded", version=4,
                       attempts=1, max_attempts=3, priority=0, created_ms=1_000 + n, finished_ms=5_000 + n,
                       waited_ms=10, ran_ms=20, params_json=f'{{"n":{n}}}', archived_ms=9, day="2026-12-04",
                       runs=[ArchivedRun(attempt=1, worker_id="w", claimed_ms=2_000, finished_ms=4_000,
                                         outcome="succeeded")],
                       events=[ArchivedEvent(version=1, status="queued", attempt=0, occurred_at="x")])


def test_records_sent_through_firehose_arrive_in_the_bucket_each_once(endpoint: EmbeddedEndpoint) -> None:
    """Breaks if the sink sent nothing, sent a record twice, or mangled the lines (a reader parses each object
    back into the record it was)."""
    s3, firehose = endpoint.client("s3"), endpoint.client("firehose")
    name = f"archive-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    firehose.create_delivery_stream(
        DeliveryStreamName=name, DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/archive-delivery", "BucketARN": f"arn:aws:s3:::{name}",
            "Prefix": "jobs/", "ErrorOutputPrefix": "errors/"})
    records = [_record(n) for n in range(1_203)]  # three requests: 500, 500, 203

    sink = FirehoseArchive(firehose, name)
    written = sink.write(records)

    keys = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            for item in page.get("Contents", [])]
    assert len(keys) == 3 and all(key.startswith("jobs/") for key in keys)
    bodies = [s3.get_object(Bucket=name, Key=key)["Body"].read() for key in keys]
    assert sum(map(len, bodies)) == written
    lines = [line for body in bodies for line in body.decode().splitlines()]
    assert sorted((ArchivedJob(**json.loads(line)) for line in lines), key=lambda r: r.created_ms) == records
    assert sink.stats.requests == 3 and sink.stats.retried_entries == 0

"""The local event-source pollers read the embedded endpoint's GetRecords answers raw (infra/onward_infra/pollers/
RecordReader) and hand the handlers the events botocore's parse made of the very same answers.

Each test deploys a stack of its own (onward_infra_tests/stream_stacks.py `Outbox`), writes straight
into its outbox table and events stream, lets a poller deliver to a recording handler, and reads the same
records again on a plain client (no reader registered on it: botocore parses) to build the reference with
the conversion the pollers applied to parsed records until now (test_poller_raw_records.py).
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from onward.settings import Settings
from onward_infra.pollers import (
    EventsStreamPoller,
    OutboxStreamPoller,
    RecordReader,
    ShardBackoff,
    dynamodb_lambda_record,
    dynamodb_record_fault,
)
from onward_infra_tests.pollers.test_poller_raw_records import (
    BINARY,
    Recorder,
    as_lambda_json,
    botocore_path_dynamodb,
    botocore_path_kinesis,
    drain,
)
from onward_infra_tests.stream_stacks import NoRecovery, Outbox, event_item

pytestmark = pytest.mark.integration

NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)


def rich_attributes(job: str) -> dict[str, Any]:
    """Every kind of attribute value, as an item's extra attributes (binary values as bytes: the SDK
    encodes them)."""
    return {
        "blob": {"B": BINARY}, "blobs": {"BS": [b"\x00", b"\xff\xfe"]}, "ratio": {"N": "-1.25e-7"},
        "numbers": {"NS": ["1", "2.5"]}, "names": {"SS": ["a", "\u00e9t\u00e9 \U0001f680"]},
        "nothing": {"NULL": True}, "flag": {"BOOL": True}, "owner": {"S": job},
        "nested": {"M": {"list": {"L": [{"N": "1"}, {"M": {"deep": {"L": [{"S": "x"}, {"B": b"\x01"}]}}}]},
                         "empty": {"M": {}}}},
    }


def test_outbox_stream_answers_make_the_same_events_raw_as_through_botocores_parse(endpoint) -> None:
    """INSERTs with binary values, numbers, nested maps and lists, a MODIFY and a REMOVE (Keys only: the
    outbox stream's view is NEW_IMAGE) on the endpoint's real stream: the relay's handler receives, through
    the poller, the INSERTs' events as botocore's parse made them (written as Lambda writes them: binary
    values as base64 text), and every record, MODIFY and REMOVE included, converts to the same event. A
    raw reader that lost, added or reshaped a member, or delivered a parsed value (a datetime, bytes), fails."""
    outbox = Outbox(endpoint)
    for job in ("a", "b", "c", "d", "e", "f"):
        outbox.put(job, 1, **rich_attributes(job))
    key = {"job_id": {"S": "a"}, "version": {"N": "1"}}
    outbox.db.update_item(TableName=outbox.table, Key=key, UpdateExpression="SET flag = :f",
                          ExpressionAttributeValues={":f": {"BOOL": False}})
    outbox.db.delete_item(TableName=outbox.table, Key={"job_id": {"S": "b"}, "version": {"N": "1"}})
    outbox.db.put_item(TableName=outbox.table, Item=event_item("g", 1))

    handler = Recorder()
    relay: Any = NoRecovery()
    drain(OutboxStreamPoller(endpoint.client("dynamodbstreams"), outbox.arn, handler, relay, outbox.positions,
                             backoff=NO_BACKOFF))

    parsed = {shard["ShardId"]: outbox.read(shard["ShardId"])[0] for shard in outbox.shards()}
    expected = sorted((botocore_path_dynamodb(record, outbox.arn) for records in parsed.values()
                       for record in records), key=lambda event: int(event["dynamodb"]["SequenceNumber"]))
    assert [event["eventName"] for event in expected].count("INSERT") == 7
    assert {"MODIFY", "REMOVE"} <= {event["eventName"] for event in expected}
    delivered = sorted(handler.records, key=lambda event: int(event["dynamodb"]["SequenceNumber"]))
    assert [as_lambda_json(event) for event in delivered] == [
        as_lambda_json(event) for event in expected if event["eventName"] == "INSERT"]

    reader = RecordReader(endpoint.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                          dynamodb_record_fault)
    converted = sorted((dynamodb_lambda_record(record, outbox.arn) for shard_id in parsed
                        for record in reader.read(outbox.iterator(shard_id), 1000).records),
                       key=lambda event: int(event["dynamodb"]["SequenceNumber"]))
    assert [as_lambda_json(event) for event in converted] == [as_lambda_json(event) for event in expected]


def test_events_stream_answers_make_the_same_events_raw_as_through_botocores_parse(endpoint) -> None:
    """Records of arbitrary bytes on the endpoint's real Kinesis stream (every byte value, random noise, a
    NUL, UTF-8 text) reach the projector's handler, through the poller, byte for byte as the events that
    botocore's parse plus base64-encoding its bytes again made. A raw reader that encoded the base64 text
    again, or delivered a parsed value (a datetime, bytes), fails."""
    outbox = Outbox(endpoint)
    stream = Settings.from_environment(outbox.environment).require("events_stream")
    kinesis = endpoint.client("kinesis")
    payloads = [BINARY, random.Random(11).randbytes(5000), b"\x00", "\u00e9t\u00e9 \U0001f680".encode()]
    for number, data in enumerate(payloads * 3):
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey=f"key-{number}")

    handler = Recorder()
    positions: Any = outbox.positions
    drain(EventsStreamPoller(endpoint.client("kinesis"), stream, handler, positions, backoff=NO_BACKOFF))

    plain = endpoint.client("kinesis")
    arn = plain.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    expected = []
    for shard in plain.list_shards(StreamName=stream)["Shards"]:
        iterator = plain.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                            ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        expected += [botocore_path_kinesis(record, shard["ShardId"], arn)
                     for record in plain.get_records(ShardIterator=iterator)["Records"]]
    assert len(expected) == len(payloads) * 3
    delivered = {event["eventID"]: event for event in handler.records}
    assert json.dumps([delivered.get(event["eventID"]) for event in expected]) == json.dumps(expected)
    assert sorted(base64.b64decode(event["kinesis"]["data"]) for event in handler.records) == sorted(payloads * 3)

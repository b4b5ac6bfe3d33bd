"""The local event-source pollers read GetRecords answers from their raw JSON (infra/onward_infra/pollers/
RecordReader), not through botocore's parser: the same events as before, errors still botocore's, and a record
that cannot become a Lambda event still set aside.

Each test runs real botocore clients (signing, retries, parsing) against a scripted service at their HTTP
layer (`ScriptedStream`, a `before-send` hook): no network. The reference for "as before" is botocore's own
parse of the very same answer bytes (a second client, which no reader is registered on) followed by the
conversion the pollers applied to parsed records until now (`botocore_path_*`, kept here verbatim).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParser

from onward_infra.pollers import (
    EventsStreamPoller,
    OutboxStreamPoller,
    RecordReader,
    ShardBackoff,
    dynamodb_lambda_record,
    dynamodb_record_fault,
    kinesis_record_fault,
)

SHARD = "shardId-000000000000"  # Kinesis
STREAM_SHARD = "shardId-00000001796188891963-7ef50bbe"  # DynamoDB Streams
STREAM_SEQUENCE_BASE = 4 * 10**27  # DynamoDB Streams' sequence numbers have 21 digits or more
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/2026-12-01T00:00:00.000"
KINESIS_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/events"
NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)
NOT_EPOCH = "ApproximateCreationDateTime is not epoch seconds"


# --- a scripted stream behind real botocore clients ----------------------------------------------------------

class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class ScriptedStream:
    """One open shard of DynamoDB Streams or Kinesis, answering a client's HTTP requests: its records are JSON
    texts (bytes, so that a test can write what no serializer would) whose sequence numbers are `base` plus
    their position from 1, iterators are "it-<position>", and `failures` answers the next GetRecords calls
    with (status, body) instead. `requests` counts GetRecords calls as they reach the wire (botocore's
    retries included)."""

    def __init__(self, records: list[bytes], base: int = 0) -> None:
        self.records = records
        self.base = base
        self.failures: list[tuple[int, bytes]] = []
        self.requests = 0

    def client(self, service: str) -> Any:
        client = boto3.client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                              aws_access_key_id="test", aws_secret_access_key="test",
                              config=Config(retries={"mode": "standard", "total_max_attempts": 2}))
        client.meta.events.register("before-send", self._answer)
        return client

    def _answer(self, request: Any, **_: Any) -> AWSResponse:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        status, body = self._respond(operation, json.loads(request.body))
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "scripted"}
        return AWSResponse(request.url, status, headers, _Body(body))

    def _respond(self, operation: str, request: dict[str, Any]) -> tuple[int, bytes]:
        if operation == "GetRecords":
            self.requests += 1
            if self.failures:
                return self.failures.pop(0)
            start = int(request["ShardIterator"].removeprefix("it-"))
            taken = self.records[start:start + request.get("Limit", 1000)]
            return 200, (b'{"Records":[' + b",".join(taken) + b'],"NextShardIterator":"it-'
                         + str(start + len(taken)).encode() + b'"}')
        if operation == "GetShardIterator":
            return 200, json.dumps({"ShardIterator": f"it-{self._start(request)}"}).encode()
        answers: dict[str, Any] = {
            "DescribeStream": {"StreamDescription": {"StreamArn": STREAM_ARN, "Shards": [
                {"ShardId": STREAM_SHARD, "SequenceNumberRange": {"StartingSequenceNumber": str(self.base + 1)}}]}},
            "ListShards": {"Shards": [{"ShardId": SHARD, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]},
            "DescribeStreamSummary": {"StreamDescriptionSummary": {"StreamARN": KINESIS_ARN}},
        }
        return 200, json.dumps(answers[operation]).encode()

    def _start(self, request: dict[str, Any]) -> int:
        """The position of an iterator request: records' sequence numbers are their positions plus one."""
        kind = request["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            return 0
        number = int(request.get("SequenceNumber") or request["StartingSequenceNumber"]) - self.base
        return number - 1 if kind == "AT_SEQUENCE_NUMBER" else number


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"__type": code, "message": message}).encode()


class NoPositions:
    """The checkpoint store as a poller uses it, remembering nothing."""

    def checkpoint(self, consumer: str, shard_id: str) -> None:
        return None

    def advance(self, consumer: str, checkpoint: Any) -> None:
        pass


class Parked:
    def __init__(self) -> None:
        self.records: list[tuple[str, str, bytes, str]] = []

    def park(self, source: str, shard_id: str, sequence_number: str, raw: bytes, reason: str) -> None:
        self.records.append((shard_id, sequence_number, raw, reason))


class Recorder:
    """A Lambda handler that accepts every record and keeps the events it was handed."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.records += event["Records"]
        return {"batchItemFailures": []}


class NoRecovery:
    def recover(self) -> None:
        raise AssertionError("nothing is trimmed")


def outbox_poller(streams: Any, handler: Recorder) -> OutboxStreamPoller:
    relay: Any = NoRecovery()
    positions: Any = NoPositions()
    return OutboxStreamPoller(streams, STREAM_ARN, handler, relay, positions, backoff=NO_BACKOFF)


def events_poller(kinesis: Any, handler: Recorder, parked: Parked | None = None) -> EventsStreamPoller:
    positions: Any = NoPositions()
    parked_records: Any = parked
    return EventsStreamPoller(kinesis, "events", handler, positions, parked=parked_records, backoff=NO_BACKOFF)


def drain(poller: OutboxStreamPoller | EventsStreamPoller) -> None:
    for _ in range(50):
        if not poller.poll_once():
            return
    raise AssertionError("the poller never caught up")


# --- the reference: botocore's parse, and the conversion the pollers applied to it until now ------------------

def _epoch_s(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def botocore_path_dynamodb(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    dynamodb = dict(record["dynamodb"])
    dynamodb["ApproximateCreationDateTime"] = _epoch_s(dynamodb["ApproximateCreationDateTime"])
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", "us-east-1"),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def botocore_path_kinesis(record: dict[str, Any], shard_id: str, stream_arn: str) -> dict[str, Any]:
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(record["Data"]).decode(),
            "approximateArrivalTimestamp": _epoch_s(record["ApproximateArrivalTimestamp"]),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/onward-projector",
        "awsRegion": "us-east-1",
        "eventSourceARN": stream_arn,
    }


def as_lambda_json(value: Any) -> str:
    """An event as Lambda hands it over (JSON: binary values as base64 text), keys sorted."""
    return json.dumps(value, sort_keys=True,
                      default=lambda raw: base64.b64encode(raw).decode() if isinstance(raw, bytes) else None)


def parsed_by_botocore(scripted: ScriptedStream, service: str) -> list[dict[str, Any]]:
    """Every record of the scripted shard as botocore parses it, on a client no reader is registered on."""
    client = scripted.client(service)
    answer: list[dict[str, Any]] = client.get_records(ShardIterator="it-0", Limit=1000)["Records"]
    return answer


# --- answers to read -----------------------------------------------------------------------------------------

BINARY = bytes(range(256))


def stream_record(sequence: int, event_name: str, change: dict[str, Any], created: float = 1796188896.789) -> bytes:
    """The `sequence`th record of the scripted DynamoDB stream."""
    record = {"eventID": f"e{sequence}", "eventName": event_name, "eventVersion": "1.1",
              "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
              "dynamodb": {"ApproximateCreationDateTime": created,
                           "SequenceNumber": str(STREAM_SEQUENCE_BASE + sequence),
                           "SizeBytes": 120, **change}}
    return json.dumps(record).encode()


def rich_image(job: str) -> dict[str, Any]:
    """An item with every kind of attribute value, nested maps and lists included."""
    return {
        "job_id": {"S": job}, "version": {"N": "3"}, "ratio": {"N": "-1.25e-7"},
        "blob": {"B": base64.b64encode(BINARY).decode()},
        "blobs": {"BS": [base64.b64encode(b"\x00").decode(), base64.b64encode(b"\xff\xfe").decode()]},
        "numbers": {"NS": ["1", "2.5"]}, "names": {"SS": ["a", "\u00e9t\u00e9 \U0001f680"]},
        "nothing": {"NULL": True}, "flag": {"BOOL": False},
        "nested": {"M": {"list": {"L": [{"N": "1"}, {"M": {"deep": {"L": [{"S": "x"}, {"NULL": True}]}}},
                                        {"B": base64.b64encode(b"\x01").decode()}]},
                         "empty": {"M": {}}, "empty_list": {"L": []}}},
    }


def outbox_answers() -> list[bytes]:
    keys = {"job_id": {"S": "j1"}, "version": {"N": "3"}}
    return [
        stream_record(1, "INSERT", {"Keys": keys, "NewImage": rich_image("j1"), "StreamViewType": "NEW_IMAGE"}),
        stream_record(2, "MODIFY", {"Keys": keys, "NewImage": rich_image("j1"), "OldImage": rich_image("j0"),
                                    "StreamViewType": "NEW_AND_OLD_IMAGES"}, created=1796188897),
        stream_record(3, "REMOVE", {"Keys": keys, "OldImage": rich_image("j1"), "StreamViewType": "OLD_IMAGE"}),
        stream_record(4, "REMOVE", {"Keys": keys, "StreamViewType": "KEYS_ONLY"}, created=1796188898.5),
        stream_record(5, "INSERT", {"Keys": keys, "NewImage": {"job_id": {"S": "j2"}, "n": {"N": "10"}},
                                    "StreamViewType": "NEW_IMAGE"}, created=1796188899.001),
    ]


def kinesis_record(sequence: int, data: bytes, arrived: float = 1796188896.123, **override: Any) -> bytes:
    record = {"SequenceNumber": str(sequence), "ApproximateArrivalTimestamp": arrived,
              "Data": base64.b64encode(data).decode(), "PartitionKey": f"key-{sequence}", **override}
    return json.dumps(record).encode()


def kinesis_answers() -> list[bytes]:
    noise = random.Random(7).randbytes(3000)
    return [kinesis_record(1, BINARY), kinesis_record(2, noise, arrived=1796188897),
            kinesis_record(3, b"\x00"), kinesis_record(4, "\u00e9t\u00e9 \U0001f680".encode(), arrived=1796188897.5),
            kinesis_record(5, b'{"schema": 1}', arrived=1796188899.999)]


# --- the same events -----------------------------------------------------------------------------------------

def test_dynamodb_stream_records_read_raw_make_the_events_botocores_parse_made() -> None:
    """Every kind of record (INSERT, MODIFY with both images, REMOVE with OldImage and Keys, or Keys only) and
    of attribute value (binary and binary sets, numbers, nested maps and lists, NULL, BOOL), times as whole
    and fractional epoch seconds: each raw record becomes the event botocore's parse plus the old conversion
    made, written as Lambda writes it (JSON). A conversion that kept the raw time (an int for whole seconds,
    "1796188897" instead of "1796188897.0"), dropped or renamed a member, or decoded a binary value would
    differ. The relay handler also receives exactly the INSERTs' events, through the poller. One deliberate
    difference: the old path handed binary values over as bytes, which no Lambda event holds; now they are
    the base64 text Lambda delivers."""
    scripted = ScriptedStream(outbox_answers(), STREAM_SEQUENCE_BASE)
    raw = RecordReader(scripted.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                       dynamodb_record_fault).read("it-0", 100)
    parsed = parsed_by_botocore(scripted, "dynamodbstreams")

    assert raw.unreadable is None and len(raw.records) == len(parsed) == 5
    expected = [botocore_path_dynamodb(record, STREAM_ARN) for record in parsed]
    converted = [dynamodb_lambda_record(record, STREAM_ARN) for record in raw.records]
    assert [as_lambda_json(event) for event in converted] == [as_lambda_json(event) for event in expected]
    assert converted[0]["dynamodb"]["NewImage"]["blob"] == {"B": base64.b64encode(BINARY).decode()}
    assert expected[0]["dynamodb"]["NewImage"]["blob"] == {"B": BINARY}  # the old path: bytes
    assert "NewImage" not in converted[2]["dynamodb"] and set(converted[3]["dynamodb"]) == {
        "ApproximateCreationDateTime", "SequenceNumber", "SizeBytes", "Keys", "StreamViewType"}

    handler = Recorder()
    drain(outbox_poller(scripted.client("dynamodbstreams"), handler))
    inserts = [event for event in expected if event["eventName"] == "INSERT"]
    assert [as_lambda_json(event) for event in handler.records] == [as_lambda_json(event) for event in inserts]


def test_kinesis_records_read_raw_make_the_events_botocores_parse_made() -> None:
    """Records holding arbitrary bytes (every byte value, random noise, a NUL, UTF-8 text, JSON) and arrival
    times with and without milliseconds reach the projector's handler, through the poller, as the same events
    botocore's parse plus base64-encoding its bytes again made. A conversion that encoded the base64 text a
    second time, or kept an int arrival time, would differ."""
    scripted = ScriptedStream(kinesis_answers())
    expected = [botocore_path_kinesis(record, SHARD, KINESIS_ARN)
                for record in parsed_by_botocore(scripted, "kinesis")]

    handler = Recorder()
    drain(events_poller(scripted.client("kinesis"), handler))

    assert len(handler.records) == len(expected) == 5
    assert json.dumps(handler.records) == json.dumps(expected)  # byte for byte, key order included
    assert base64.b64decode(handler.records[0]["kinesis"]["data"]) == BINARY


def test_other_calls_of_get_records_on_the_same_client_are_still_parsed_by_botocore() -> None:
    """The reader takes raw only the answers to its own calls: a client is shared (a test's helper, a
    replay), and a hook taking every GetRecords answer raw would hand other callers base64 text and numbers
    where botocore gives bytes and datetimes."""
    scripted = ScriptedStream(kinesis_answers())
    kinesis = scripted.client("kinesis")
    RecordReader(kinesis, lambda r: r["SequenceNumber"], kinesis_record_fault).read("it-0", 10)

    (record, *_) = kinesis.get_records(ShardIterator="it-0")["Records"]

    assert record["Data"] == BINARY and isinstance(record["ApproximateArrivalTimestamp"], datetime)


# --- errors are botocore's, as before --------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "code"), [
    (400, "ExpiredIteratorException"),  # no retry: the poller re-creates the iterator
    (400, "ProvisionedThroughputExceededException"),  # botocore retries it, then raises
    (500, "InternalFailure"),
])
def test_an_error_answer_still_raises_botocores_client_error(status: int, code: str) -> None:
    """A non-200 answer is left to botocore: the reader raises the ClientError a plain client raises for the
    same answers (code, message, status, retries). A hook that took every answer raw, or gave botocore an
    empty body whatever the status, would raise no error, or one without its code: the expired iterator
    would not be re-created, and a throttle would not be retried."""
    def failing(scripted: ScriptedStream) -> ScriptedStream:
        scripted.failures = [(status, error_body(code, "scripted failure"))] * 2
        return scripted

    plain_stream = failing(ScriptedStream(outbox_answers(), STREAM_SEQUENCE_BASE))
    with pytest.raises(ClientError) as plain:
        plain_stream.client("dynamodbstreams").get_records(ShardIterator="it-0", Limit=100)
    reader_stream = failing(ScriptedStream(outbox_answers(), STREAM_SEQUENCE_BASE))
    reader = RecordReader(reader_stream.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                          dynamodb_record_fault)
    with pytest.raises(ClientError) as raised:
        reader.read("it-0", 100)

    assert raised.value.response == plain.value.response
    assert raised.value.response["Error"]["Code"] == code
    assert reader_stream.requests == plain_stream.requests


# --- botocore walks no record --------------------------------------------------------------------------------

def count_parse_shape_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    parse_shape = ResponseParser._parse_shape

    def counted(self: ResponseParser, shape: Any, node: Any) -> Any:
        calls[0] += 1
        return parse_shape(self, shape, node)

    monkeypatch.setattr(ResponseParser, "_parse_shape", counted)
    return calls


def test_botocore_walks_no_record_of_a_200_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of reading raw: botocore's parser (ResponseParser._parse_shape, called for every member of
    every attribute value) is not called per record. Reading 1 record and reading 100 costs the same number
    of calls; without the raw read, botocore walks each record's images (hundreds of calls per record,
    checked here on a plain client as the counter's own control)."""
    calls = count_parse_shape_calls(monkeypatch)
    many = [outbox_answers()[0]] * 100

    def reader_calls(records: list[bytes]) -> int:
        scripted = ScriptedStream(records, STREAM_SEQUENCE_BASE)
        reader = RecordReader(scripted.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                              dynamodb_record_fault)
        calls[0] = 0
        assert len(reader.read("it-0", 1000).records) == len(records)
        return calls[0]

    assert reader_calls(many[:1]) == reader_calls(many) <= 3
    calls[0] = 0
    parsed_by_botocore(ScriptedStream(many, STREAM_SEQUENCE_BASE), "dynamodbstreams")
    assert calls[0] > 100 * 20, "the control: botocore's parse walks every record"


# --- what cannot be read is set aside, and the shard reads on --------------------------------------------------

def test_a_kinesis_record_that_cannot_become_an_event_is_parked_and_its_shard_reads_on() -> None:
    """Each record here lacks what the Lambda event needs (data that is not base64, or not text; an arrival
    time that is not epoch seconds; no partition key). Each is parked with its JSON and the reason, the
    records around it reach the handler, and no shard fails. Without the checks the bad record would reach
    the conversion or the handler (which would raise on it, so that the shard never moves again) or
    be delivered as an event Lambda never sends."""
    good = kinesis_answers()
    bad = [kinesis_record(11, b"", Data="not base64!"), kinesis_record(12, b"", Data=12345),
           kinesis_record(13, b"x", ApproximateArrivalTimestamp="2026-12-01T00:00:00Z"),
           kinesis_record(14, b"x", PartitionKey=None)]
    records = [good[0], bad[0], good[1], bad[1], bad[2], good[2], bad[3], good[3]]
    scripted = ScriptedStream([json.dumps({**json.loads(text), "SequenceNumber": str(position + 1)}).encode()
                               for position, text in enumerate(records)])
    handler, parked = Recorder(), Parked()
    poller = events_poller(scripted.client("kinesis"), handler, parked)

    drain(poller)

    assert [record["kinesis"]["sequenceNumber"] for record in handler.records] == ["1", "3", "6", "8"]
    assert [(shard, sequence) for shard, sequence, _, _ in parked.records] == [
        (SHARD, "2"), (SHARD, "4"), (SHARD, "5"), (SHARD, "7")]
    reasons = [reason for *_, reason in parked.records]
    assert "Data is not valid base64" in reasons[0] and "Data is not base64 text" in reasons[1]
    assert "ApproximateArrivalTimestamp" in reasons[2] and "PartitionKey" in reasons[3]
    assert json.loads(parked.records[1][2])["Data"] == 12345  # the record as the service sent it
    assert not poller.failing_shards


def test_a_record_whose_answer_is_not_json_is_found_one_by_one_and_parked_with_its_bytes() -> None:
    """A record holding bytes that are not UTF-8 makes its whole answer unreadable JSON. The batch is read
    again one record at a time: the records before it are delivered, it is parked with its answer's bytes as
    sent (named by decoding that answer leniently), and its shard reads on. Before, the record could not be
    named, so its shard failed on every poll and never moved past it."""
    good = kinesis_answers()
    broken = kinesis_record(2, b"x").replace(b'"key-2"', b'"key-\xff\xfe"')
    scripted = ScriptedStream([good[0], broken, kinesis_record(3, b"after")])
    handler, parked = Recorder(), Parked()
    poller = events_poller(scripted.client("kinesis"), handler, parked)

    drain(poller)

    assert [record["kinesis"]["sequenceNumber"] for record in handler.records] == ["1", "3"]
    ((shard, sequence, raw, reason),) = parked.records
    assert (shard, sequence) == (SHARD, "2") and broken in raw and "not JSON" in reason
    assert not poller.failing_shards


@pytest.mark.parametrize(("change", "reason"), [
    ({"NewImage": "not an image"}, "dynamodb.NewImage is not a map"),
    ({"OldImage": ["x"]}, "dynamodb.OldImage is not a map"),
    ({"Keys": None}, "dynamodb.Keys is not a map"),
    ({"ApproximateCreationDateTime": "2026-12-01T00:00:00Z"}, f"dynamodb.{NOT_EPOCH}"),
    ({"ApproximateCreationDateTime": True}, f"dynamodb.{NOT_EPOCH}"),
])
def test_a_stream_record_that_cannot_become_an_event_ends_its_batch_as_unreadable(
        change: dict[str, Any], reason: str) -> None:
    """The relay handler needs each record's change, sequence number and time as epoch seconds, and Lambda
    never sends an image that is not a map: such a record ends its batch, returned as it was sent with the
    reason, so that the poller parks it (an INSERT) and reads on after it. Without the check it would reach
    the handler, whose malformed-record refusal fails the whole batch on every redelivery: the shard
    would never move again."""
    answers = outbox_answers()
    broken = json.loads(answers[1])
    broken["dynamodb"] |= change
    scripted = ScriptedStream([answers[0], json.dumps(broken).encode(), answers[2]], STREAM_SEQUENCE_BASE)
    reader = RecordReader(scripted.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                          dynamodb_record_fault)

    batch = reader.read("it-0", 100)

    assert [record["eventID"] for record in batch.records] == ["e1"]
    assert batch.unreadable is not None and batch.next_iterator is None
    assert (batch.unreadable.sequence_number, batch.unreadable.event_name) == (
        str(STREAM_SEQUENCE_BASE + 2), "MODIFY")
    assert batch.unreadable.reason == reason and json.loads(batch.unreadable.raw) == broken


def test_a_record_without_a_sequence_number_fails_its_shard_instead_of_being_skipped() -> None:
    """A record that names no sequence number cannot be parked nor read past (a broken service, not a
    record): reading raises, so the poller backs the shard off and retries it, and loses nothing. Treating
    it as readable would hand the handler an event without a sequence number."""
    answers = outbox_answers()
    nameless = json.loads(answers[1])
    del nameless["dynamodb"]["SequenceNumber"]
    scripted = ScriptedStream([answers[0], json.dumps(nameless).encode()], STREAM_SEQUENCE_BASE)
    reader = RecordReader(scripted.client("dynamodbstreams"), lambda r: r["dynamodb"]["SequenceNumber"],
                          dynamodb_record_fault)

    with pytest.raises(ValueError, match="without a sequence number"):
        reader.read("it-0", 100)

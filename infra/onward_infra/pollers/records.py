"""Reading a stream's records as the service wrote them, for the local event source mappings.

GetRecords answers are read from their raw JSON, which is already the shape of Lambda's event, not walked by
botocore's parser (`RecordReader`); a record that cannot become a Lambda event (`dynamodb_record_fault`,
`kinesis_record_fault`) ends its batch as an `UnreadableRecord`, with its raw JSON and the reason, for the
poller to park. `dynamodb_lambda_record` and `kinesis_lambda_record` make the records of Lambda's events.
"""


from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

REGION = "us-east-1"
RAW_ANSWER_HOOK = "onward-local-mappings-raw-get-records"


@dataclass(frozen=True)
class UnreadableRecord:
    """A stream record that cannot become a record of a Lambda event, as the service sent it."""

    sequence_number: str
    raw: bytes  # the record's JSON from the service's answer (the whole one-record answer when not JSON)
    event_name: str | None  # DynamoDB stream records: INSERT, MODIFY, REMOVE; Kinesis records: None
    reason: str  # what is wrong with it


@dataclass(frozen=True)
class RecordBatch:
    """One GetRecords answer: its records as the service wrote them (the JSON wire shape: timestamps as
    epoch seconds, binary values as base64 text), in stream order, up to the first unreadable one if any."""

    records: list[dict[str, Any]]
    next_iterator: str | None
    unreadable: UnreadableRecord | None = None  # the record that ended the batch; read on after it


RecordFault = Callable[[dict[str, Any]], str | None]  # why a record cannot become a Lambda event; None: it can


class _UnparsableAnswer(Exception):
    """GetRecords answered 200 with a body that is not a JSON object holding a list of Records."""

    def __init__(self, body: bytes, error: Exception) -> None:
        super().__init__(type(error).__name__)
        self.body = body
        self.error = error


class _AnswerInFlight(threading.local):
    """The reader's GetRecords call under way on this thread (botocore parses on the caller's thread)."""

    wanted = False  # the call is a RecordReader's: its 200 answer is taken raw
    taken = False  # the hook took the answer raw (it is in the response, botocore parsed nothing)
    body: bytes | None = None  # the answer's body, when the hook saw the answer and did not take it


_in_flight = _AnswerInFlight()


def _take_raw_answer(response_dict: dict[str, Any], customized_response_dict: dict[str, Any],
                     **_: Any) -> None:
    """botocore's `before-parse` hook on a reader's client: a 200 answer to the reader's own GetRecords is
    loaded from its JSON as it is into `customized_response_dict` (botocore merges it into the response),
    and botocore's parser is given an empty object, so that it walks no record. Any other answer (an error,
    a body that is not a JSON object with Records) is parsed by botocore as ever, and so is any other
    caller's GetRecords on the same client."""
    if not _in_flight.wanted:
        return
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes):
        return  # botocore parses the error and raises it
    _in_flight.body = body
    try:
        answer = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        return
    if isinstance(answer, dict) and isinstance(answer.get("Records"), list):
        customized_response_dict.update(answer)
        response_dict["body"] = b"{}"
        _in_flight.taken, _in_flight.body = True, None


def _is_epoch(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_sequence_number(value: Any) -> bool:
    return isinstance(value, str) and value.isascii() and value.isdigit()


def _named_sequence(record: Any, sequence_of: Callable[[dict[str, Any]], str]) -> str | None:
    try:
        sequence_number = sequence_of(record)
    except (KeyError, TypeError, AttributeError):
        return None
    return sequence_number if _is_sequence_number(sequence_number) else None


class RecordReader:
    """GetRecords on one client (DynamoDB Streams or Kinesis) that reads the records of a 200 answer from its
    raw JSON, not through botocore's parser (which walks every attribute of every record only for the event
    to be written back into that same JSON shape), and isolates a record that cannot be read.

    botocore still signs, sends, retries and parses every other answer: an error answer (an expired
    iterator, a throttle) raises botocore's ClientError exactly as without this reader. The raw answer is
    taken by a `before-parse` hook registered on the client, for this reader's calls only; a client without
    `meta` (a test's fake) must answer records in the wire shape itself.

    A record "cannot be read" when it cannot become the record of a Lambda event (what `fault` says of it:
    a missing or mistyped field that the poller or the event needs, such as a sequence number, a timestamp
    that is not epoch seconds, an image that is not a map, Kinesis data that is not base64), or when the
    answer holding it is not JSON (bytes that are not UTF-8): then the batch is read again one record at a
    time from the same iterator, and the record whose own answer is not JSON is found by decoding that
    answer leniently. Either way it ends the batch as `unreadable` and its shard reads on after it, so one
    bad record never blocks its shard. What the handler makes of a record's contents is the handler's
    business, as on AWS: the attribute values of a DynamoDB image are not looked into (the relay parks an
    image it cannot read). A record without a sequence number, or an answer that names no record at all,
    raises: that is a broken service, not a record to set aside (its shard backs off and retries)."""

    def __init__(self, client: Any, sequence_of: Callable[[dict[str, Any]], str], fault: RecordFault) -> None:
        self._client = client
        self._sequence_of = sequence_of
        self._fault = fault
        meta = getattr(client, "meta", None)
        self._raw = meta is not None
        if meta is not None:
            service = meta.service_model.service_id.hyphenize()
            meta.events.register(f"before-parse.{service}.GetRecords", _take_raw_answer,
                                 unique_id=RAW_ANSWER_HOOK)

    def read(self, iterator: str, limit: int) -> RecordBatch:
        try:
            answer = self._get_records(iterator, limit)
        except _UnparsableAnswer:
            return self._read_one_by_one(iterator, limit)
        return self._batch(answer)

    def _batch(self, answer: dict[str, Any]) -> RecordBatch:
        """The answer's records up to the first that cannot be read (which ends the batch)."""
        records: list[dict[str, Any]] = answer["Records"]
        for position, record in enumerate(records):
            reason = self._fault(record) if isinstance(record, dict) else "not a JSON object"
            if reason is not None:
                return RecordBatch(records[:position], None, self._unreadable(record, reason))
        return RecordBatch(records, answer.get("NextShardIterator"))

    def _get_records(self, iterator: str, limit: int) -> dict[str, Any]:
        if not self._raw:
            fake_answer: dict[str, Any] = self._client.get_records(ShardIterator=iterator, Limit=limit)
            return fake_answer
        _in_flight.wanted, _in_flight.taken, _in_flight.body = True, False, None
        try:
            response: dict[str, Any] = self._client.get_records(ShardIterator=iterator, Limit=limit)
        except (ClientError, BotoCoreError):
            raise  # the service refused, or the connection failed: nothing to read
        except Exception as error:  # botocore's parser failed on a body the hook did not take
            body = _in_flight.body
            if body is None:
                raise
            raise _UnparsableAnswer(body, error) from error
        finally:
            _in_flight.wanted = False
        body, _in_flight.body = _in_flight.body, None  # not kept: a Kinesis answer can hold megabytes
        if _in_flight.taken:
            return response
        if body is not None:
            raise _UnparsableAnswer(body, ValueError("not a JSON object with a list of Records"))
        return response  # answered without the endpoint (a wrapper of the client): as the wrapper wrote it

    def _read_one_by_one(self, iterator: str, limit: int) -> RecordBatch:
        records: list[dict[str, Any]] = []
        for _ in range(limit):
            try:
                batch = self._batch(self._get_records(iterator, 1))
            except _UnparsableAnswer as unparsable:
                return RecordBatch(records, None, self._unreadable_answer(unparsable))
            records += batch.records
            if batch.unreadable is not None or not batch.records or batch.next_iterator is None:
                return RecordBatch(records, batch.next_iterator, batch.unreadable)
            iterator = batch.next_iterator
        return RecordBatch(records, iterator)

    def _unreadable(self, record: Any, reason: str) -> UnreadableRecord:
        sequence_number = _named_sequence(record, self._sequence_of)
        if sequence_number is None:
            raise ValueError(f"GetRecords answered a record without a sequence number ({reason})")
        event_name = record.get("eventName")
        return UnreadableRecord(sequence_number, json.dumps(record, separators=(",", ":")).encode(),
                                event_name if isinstance(event_name, str) else None, reason)

    def _unreadable_answer(self, unparsable: _UnparsableAnswer) -> UnreadableRecord:
        """The single record of a Limit=1 answer that is not JSON, found by decoding it leniently (bytes that
        are not UTF-8 replaced), with the answer's bytes as sent; the decoding's own error when the answer
        names no record even so."""
        try:
            (record,) = json.loads(unparsable.body.decode("utf-8", errors="replace"))["Records"]
        except (ValueError, KeyError, TypeError):
            raise unparsable.error from None
        sequence_number = _named_sequence(record, self._sequence_of)
        if sequence_number is None:
            raise unparsable.error
        event_name = record.get("eventName")
        reason = f"its answer is not JSON ({type(unparsable.error).__name__}: {unparsable.error})"
        return UnreadableRecord(sequence_number, unparsable.body,
                                event_name if isinstance(event_name, str) else None, reason)


def stream_record_sequence(record: dict[str, Any]) -> str:
    sequence_number: str = record["dynamodb"]["SequenceNumber"]
    return sequence_number


def kinesis_record_sequence(record: dict[str, Any]) -> str:
    sequence_number: str = record["SequenceNumber"]
    return sequence_number


def stream_record_arrival(record: dict[str, Any]) -> float:
    """When DynamoDB wrote the change (epoch seconds): its age is counted from then."""
    return float(record["dynamodb"]["ApproximateCreationDateTime"])


def kinesis_record_arrival(record: dict[str, Any]) -> float:
    """When Kinesis took the record (epoch seconds): its age is counted from then."""
    return float(record["ApproximateArrivalTimestamp"])


def dynamodb_record_fault(record: dict[str, Any]) -> str | None:
    """Why a DynamoDB Streams record (wire shape) cannot become the record of a Lambda event; None when it
    can. Only what the poller and the event need is looked at, never the images' attribute values."""
    change = record.get("dynamodb")
    if not isinstance(change, dict):
        return "no dynamodb member (an object)"
    if not _is_sequence_number(change.get("SequenceNumber")):
        return "dynamodb.SequenceNumber is not a sequence number"
    if not isinstance(record.get("eventID"), str) or not isinstance(record.get("eventName"), str):
        return "no eventID or eventName (strings)"
    if not _is_epoch(change.get("ApproximateCreationDateTime")):
        return "dynamodb.ApproximateCreationDateTime is not epoch seconds"
    for image in ("Keys", "NewImage", "OldImage"):
        if image in change and not isinstance(change[image], dict):
            return f"dynamodb.{image} is not a map"
    return None


def kinesis_record_fault(record: dict[str, Any]) -> str | None:
    """Why a Kinesis record (wire shape) cannot become the record of a Lambda event; None when it can."""
    if not _is_sequence_number(record.get("SequenceNumber")):
        return "SequenceNumber is not a sequence number"
    if not isinstance(record.get("PartitionKey"), str):
        return "no PartitionKey (a string)"
    if not _is_epoch(record.get("ApproximateArrivalTimestamp")):
        return "ApproximateArrivalTimestamp is not epoch seconds"
    data = record.get("Data")
    if not isinstance(data, str):
        return "Data is not base64 text"
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error as error:
        return f"Data is not valid base64 ({error})"
    return None


def dynamodb_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """The record of the Lambda event for a DynamoDB Streams record (wire shape, `dynamodb_record_fault`
    None): its change as the service wrote it (images untouched, binary values as base64 text), the time as
    float epoch seconds."""
    dynamodb = dict(record["dynamodb"])
    dynamodb["ApproximateCreationDateTime"] = float(dynamodb["ApproximateCreationDateTime"])
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", REGION),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def kinesis_lambda_record(record: dict[str, Any], shard_id: str, stream_arn: str) -> dict[str, Any]:
    """The record of the Lambda event for a Kinesis record (wire shape, `kinesis_record_fault` None): its
    data as the base64 text the service sent, the arrival time as float epoch seconds."""
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": record["Data"],
            "approximateArrivalTimestamp": float(record["ApproximateArrivalTimestamp"]),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/onward-projector",
        "awsRegion": REGION,
        "eventSourceARN": stream_arn,
    }

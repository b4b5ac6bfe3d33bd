"""Lambda's event source mappings on this machine: the relay's and the projector's pollers (mappings.py),
what they share shard by shard (shards.py), Lambda's error handling (failures.py), and reading the records
as the service wrote them (records.py)."""

from onward_infra.pollers.failures import DiscardedRecords, FailureHandling
from onward_infra.pollers.mappings import EventsStreamPoller, JobsStreamPoller, OutboxStreamPoller
from onward_infra.pollers.records import (
    RecordBatch,
    RecordReader,
    UnreadableRecord,
    dynamodb_lambda_record,
    dynamodb_record_fault,
    kinesis_lambda_record,
    kinesis_record_fault,
)
from onward_infra.pollers.shards import POSITION_EVERY_S, ShardBackoff, StreamPosition

__all__ = [
    "POSITION_EVERY_S",
    "DiscardedRecords",
    "EventsStreamPoller",
    "FailureHandling",
    "JobsStreamPoller",
    "OutboxStreamPoller",
    "RecordBatch",
    "RecordReader",
    "ShardBackoff",
    "StreamPosition",
    "UnreadableRecord",
    "dynamodb_lambda_record",
    "dynamodb_record_fault",
    "kinesis_lambda_record",
    "kinesis_record_fault",
]

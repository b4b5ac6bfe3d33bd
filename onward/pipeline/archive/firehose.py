"""The archive on AWS: records sent to a Firehose delivery stream as JSON lines (PutRecordBatch), which
converts them to Parquet with the Glue table's schema and writes them to S3 under
`jobs/day=<day>/tenant=<tenant>/` (template.yaml's ArchiveDeliveryStream; docs/archive.md says why Firehose).

A write returns only when Firehose took every record: batches of at most 500 records and 4 MiB, the entries a
partial failure names (FailedPutCount) sent again with capped exponential backoff and jitter, and an error
raised when some still fail, so that the archiver never lets a job expire whose record Firehose did not take.
Throttling of the request as a whole is botocore's to retry (the client's retry mode). Sending a record twice
is harmless: readers take the newest version of each job (onward.domain.archive.LATEST_VERSIONS)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onward.domain.archive import ArchivedJob
from onward.domain.backoff import BackoffPolicy

MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 4 * 1024 * 1024
# Firehose's limit on one record, before base64. An archived job's record is bounded far below it: params at
# most 4 KB, a result summary at most 1 KB, at most 100 runs (max_attempts <= 100) whose error messages are at
# most 1,000 characters each, and their events (tests/unit/pipeline/test_archive_firehose.py builds the largest
# such record); only a job replayed over and over gathers events enough to pass it, and it is refused whole.
MAX_RECORD_BYTES = 1000 * 1024
DEFAULT_BACKOFF = BackoffPolicy(base_s=0.1, cap_s=5.0)  # frozen: one instance serves every sink


class RecordTooLarge(ValueError):
    """A record over Firehose's 1,000 KiB limit: nothing of the batch is sent (the job keeps its place)."""


class ArchiveWriteFailed(RuntimeError):
    """Some records were still refused after every retry: the caller must not expire their jobs."""


@dataclass
class FirehoseStats:
    requests: int = 0
    records: int = 0
    retried_entries: int = 0


def encode(record: ArchivedJob) -> bytes:
    """One record as Firehose takes it: a JSON object and a newline (the OpenX JSON SerDe reads one object per
    record; the newline keeps objects apart wherever records are concatenated: the error prefix, a stand-in)."""
    return record.model_dump_json().encode() + b"\n"


def batches(lines: Sequence[bytes]) -> list[list[bytes]]:
    """`lines` in order, split into PutRecordBatch requests of at most 500 records and 4 MiB."""
    found: list[list[bytes]] = [[]]
    size = 0
    for line in lines:
        if len(found[-1]) == MAX_RECORDS_PER_REQUEST or size + len(line) > MAX_BYTES_PER_REQUEST:
            found.append([])
            size = 0
        found[-1].append(line)
        size += len(line)
    return [batch for batch in found if batch]


class FirehoseArchive:
    """The archiver's sink on AWS: `write(records)` sends them to `delivery_stream` through `client` (a boto3
    Firehose client) and returns the bytes sent."""

    def __init__(self, client: Any, delivery_stream: str, *, backoff: BackoffPolicy = DEFAULT_BACKOFF,
                 max_retries: int = 8, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        self._firehose = client
        self._stream = delivery_stream
        self._backoff = backoff
        self._max_retries = max_retries
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.stats = FirehoseStats()

    def write(self, records: Sequence[ArchivedJob]) -> int:
        lines = [encode(record) for record in records]
        for record, line in zip(records, lines, strict=True):
            if len(line) > MAX_RECORD_BYTES:
                raise RecordTooLarge(f"job {record.job_id} version {record.version}: its archive record is "
                                     f"{len(line)} bytes, over Firehose's {MAX_RECORD_BYTES}")
        for batch in batches(lines):
            self._put_batch(batch)
        return sum(len(line) for line in lines)

    def _put_batch(self, lines: list[bytes]) -> None:
        pending = lines
        for attempt in range(1, self._max_retries + 2):
            response = self._firehose.put_record_batch(DeliveryStreamName=self._stream,
                                                       Records=[{"Data": line} for line in pending])
            self.stats.requests += 1
            if response["FailedPutCount"] == 0:
                self.stats.records += len(pending)
                return
            # one entry per record sent, in order; a failed one carries ErrorCode
            failed = [line for line, entry in zip(pending, response["RequestResponses"], strict=True)
                      if entry.get("ErrorCode")]
            self.stats.records += len(pending) - len(failed)
            if attempt > self._max_retries:
                codes = sorted({entry["ErrorCode"] for entry in response["RequestResponses"] if entry.get("ErrorCode")})
                raise ArchiveWriteFailed(f"{len(failed)} records refused by {self._stream} after "
                                         f"{self._max_retries} retries ({', '.join(codes)})")
            self.stats.retried_entries += len(failed)
            self._sleep(self._backoff.delay(attempt, self._rng))
            pending = failed

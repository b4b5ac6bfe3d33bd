"""Publishing events to Kinesis with PutRecords: batches of at most 500 records and 5 MiB, only the failed
entries retried (capped exponential backoff with jitter), and never two events of one job in flight at once,
so a retried entry can never land behind a later event of the same job."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from onward.domain.backoff import BackoffPolicy
from onward.domain.models import OutboxEvent
from onward.domain.progress import ProgressEvent
from onward.pipeline.heartbeats import Heartbeat, encode_heartbeat
from onward.pipeline.shards import open_shards

MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 5 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024
RETRIABLE_CODES = frozenset({"ProvisionedThroughputExceededException", "InternalFailure", "KMSThrottlingException"})
DEFAULT_BACKOFF = BackoffPolicy(base_s=0.05, cap_s=2.0)  # frozen: one instance serves every publisher


class RecordTooLarge(ValueError):
    """An event whose record would exceed Kinesis' 1 MiB limit (results are summarised, so this is a bug)."""


@dataclass
class PublishStats:
    requests: int = 0
    records: int = 0
    retried_entries: int = 0
    failed_entries: int = 0
    error_codes: dict[str, int] = field(default_factory=dict)


def encode(event: OutboxEvent | ProgressEvent) -> bytes:
    """The public wire format: one JSON object per record."""
    return event.model_dump_json(by_alias=True, exclude_none=True).encode()


class KinesisPublisher:
    def __init__(
        self,
        client: Any,
        stream_name: str,
        *,
        backoff: BackoffPolicy = DEFAULT_BACKOFF,
        max_retries: int = 8,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._kinesis = client
        self._stream = stream_name
        self._backoff = backoff
        self._max_retries = max_retries
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.stats = PublishStats()

    def publish(self, events: Sequence[OutboxEvent | ProgressEvent]) -> list[bool]:
        """Publish `events` (in stream order); returns, per event, whether it was published. Stops at the
        first entry that still fails after its retries: no later event goes out after that."""
        published = [False] * len(events)
        pending = list(range(len(events)))
        while pending:
            wave, pending = _one_per_job(events, pending)
            for chunk in _chunks(events, wave):
                accepted = self._put_records([_record(events[i]) for i in chunk])
                for position in accepted:
                    published[chunk[position]] = True
                if len(accepted) < len(chunk):
                    return published
        return published

    def publish_heartbeat(self, heartbeat: Heartbeat) -> bool:
        """Put `heartbeat` on every open shard (ExplicitHashKey = the shard's first hash key), so that each
        shard's watermark moves; whether every shard took it. The shards are listed each time (one request
        per heartbeat), so a reshard is followed at once. Each copy names the parents of its shard: once it is
        projected, the parents are drained and their watermarks no longer bound the view's lag."""
        records = [{"Data": encode_heartbeat(heartbeat.model_copy(update={"parents": shard.parents})),
                    "PartitionKey": "heartbeat", "ExplicitHashKey": str(shard.starting_hash)}
                   for shard in open_shards(self._kinesis, self._stream)]
        return len(self._put_records(records)) == len(records)

    def _put_records(self, records: list[dict[str, Any]]) -> set[int]:
        """One PutRecords, then only its failed entries again while they fail retriably; the positions (in
        `records`) of the accepted ones."""
        accepted: set[int] = set()
        remaining = list(range(len(records)))
        for attempt in range(1, self._max_retries + 2):
            response = self._kinesis.put_records(StreamName=self._stream,
                                                 Records=[records[position] for position in remaining])
            self.stats.requests += 1
            retry: list[int] = []
            permanent = False
            # PutRecords answers one entry per record sent, in order
            for position, entry in zip(remaining, response["Records"], strict=True):
                code = entry.get("ErrorCode")
                if code is None:
                    accepted.add(position)
                    continue
                self.stats.error_codes[code] = self.stats.error_codes.get(code, 0) + 1
                permanent = permanent or code not in RETRIABLE_CODES
                retry.append(position)
            self.stats.records += len(remaining) - len(retry)
            if not retry:
                break
            if permanent or attempt > self._max_retries:
                self.stats.failed_entries += len(retry)
                break
            self.stats.retried_entries += len(retry)
            self._sleep(self._backoff.delay(attempt, self._rng))
            remaining = retry
        return accepted


def _record(event: OutboxEvent | ProgressEvent) -> dict[str, Any]:
    return {"Data": encode(event), "PartitionKey": event.job_id}


def _one_per_job(events: Sequence[OutboxEvent | ProgressEvent], pending: list[int]) -> tuple[list[int], list[int]]:
    """Split `pending` into the first pending event of each job, and the rest (still in order)."""
    wave: list[int] = []
    rest: list[int] = []
    seen: set[str] = set()
    for index in pending:
        key = events[index].job_id
        if key in seen:
            rest.append(index)
        else:
            seen.add(key)
            wave.append(index)
    return wave, rest


def _chunks(events: Sequence[OutboxEvent | ProgressEvent], wave: list[int]) -> list[list[int]]:
    chunks: list[list[int]] = [[]]
    size = 0
    for index in wave:
        record_size = len(encode(events[index])) + len(events[index].job_id)
        if record_size > MAX_RECORD_BYTES:
            raise RecordTooLarge(f"event {events[index].event_id} is {record_size} bytes")
        if len(chunks[-1]) == MAX_RECORDS_PER_REQUEST or size + record_size > MAX_BYTES_PER_REQUEST:
            chunks.append([])
            size = 0
        chunks[-1].append(index)
        size += record_size
    return [chunk for chunk in chunks if chunk]

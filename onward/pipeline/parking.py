"""Parked records: input a consumer could not parse or validate, or a record that kept failing it (a poison record,
onward/pipeline/poison.py), kept with its raw bytes, its stream metadata and the reason, so the stream behind it
keeps moving and a person can inspect it and re-drive it (`onward redrive`) later: for the job retention, counted
from when it was parked (TTL `expires_at`)."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

from onward.domain.clock import Clock, iso, system_clock
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS
from onward.store.dynamo.keys import ttl_after

MAX_RAW_BYTES = 300_000  # a DynamoDB item holds 400 KB; a larger record keeps its head, flagged as cut


@dataclass(frozen=True)
class ParkedRecord:
    source: str  # "projector" or "relay"
    shard_id: str
    sequence_number: str
    reason: str
    raw: bytes
    parked_at: str
    raw_size: int  # bytes of the record as received
    raw_truncated: bool = False  # True: `raw` holds the first MAX_RAW_BYTES only (an item holds 400 KB)
    job_id: str | None = None  # the job it belongs to, when known (what `onward redrive` replays)
    stream_record: str | None = None  # the rest of the record as the stream delivered it (JSON), beside `raw`
    failures: int = 0  # failed deliveries before it was parked (0: unreadable, parked at once)
    redriven_at: str | None = None  # when `onward redrive` replayed its job through the outbox
    parked_id: str | None = None  # its key in the table (set on a record read back)


class ParkedRecords:
    """Records that were set aside (a recorder: it only records and lists)."""

    def __init__(self, client: Any, table: str, clock: Clock = system_clock,
                 retention_s: int = DEFAULT_JOB_RETENTION_DAYS * DAY_S) -> None:
        """`retention_s`: how long a parked record is kept (Settings.job_retention_s)."""
        self._db = client
        self._table = table
        self._clock = clock
        self._retention_s = retention_s

    def park(self, source: str, shard_id: str, sequence_number: str, raw: bytes, reason: str, *,
             job_id: str | None = None, stream_record: str | None = None, failures: int = 0) -> None:
        now = self._clock()
        parked_at = iso(now)
        extra: dict[str, Any] = {"failures": {"N": str(failures)}}
        if job_id is not None:
            extra["job_id"] = {"S": job_id}
        if stream_record is not None:
            extra["stream_record"] = {"S": stream_record}
        self._db.put_item(
            TableName=self._table,
            Item=extra | {
                "source": {"S": source},
                # Idempotent for a redelivered record: the same shard and sequence number park once.
                "parked_id": {"S": f"{shard_id}#{int(sequence_number):080d}" if sequence_number.isdigit()
                              else f"{shard_id}#{uuid.uuid4().hex}"},
                "shard_id": {"S": shard_id},
                "sequence_number": {"S": sequence_number},
                "reason": {"S": reason[:2000]},
                "raw": {"B": raw[:MAX_RAW_BYTES]},
                "raw_size": {"N": str(len(raw))},
                "raw_truncated": {"BOOL": len(raw) > MAX_RAW_BYTES},
                "parked_at": {"S": parked_at},
                "expires_at": {"N": str(ttl_after(now, self._retention_s))},
            },
        )

    def parked_by(self, source: str) -> list[ParkedRecord]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "source"},
            ExpressionAttributeValues={":s": {"S": source}},
        )
        return [parked_record(item) for page in pages for item in page["Items"]]

    def mark_redriven(self, record: ParkedRecord) -> None:
        """Note that `onward redrive` replayed the record's job (it stays listed, marked, until it expires)."""
        self._db.update_item(
            TableName=self._table,
            Key={"source": {"S": record.source}, "parked_id": {"S": record.parked_id or ""}},
            UpdateExpression="SET redriven_at = :at",
            ConditionExpression="attribute_exists(parked_id)",
            ExpressionAttributeValues={":at": {"S": iso(self._clock())}},
        )


def parked_record(item: dict[str, Any]) -> ParkedRecord:
    """A parked record from its item (DynamoDB's typed shape)."""
    def text(name: str) -> str | None:
        return item[name]["S"] if name in item else None

    return ParkedRecord(item["source"]["S"], item["shard_id"]["S"], item["sequence_number"]["S"], item["reason"]["S"],
                        _bytes(item["raw"]["B"]), item["parked_at"]["S"], int(item["raw_size"]["N"]),
                        item["raw_truncated"]["BOOL"], text("job_id"), text("stream_record"),
                        int(item["failures"]["N"]) if "failures" in item else 0, text("redriven_at"),
                        item["parked_id"]["S"])


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else base64.b64decode(value)

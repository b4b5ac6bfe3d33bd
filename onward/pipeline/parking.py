"""Parked records: input a consumer could not parse or validate, kept with its raw bytes and the reason,
so the stream behind it keeps moving and a person can inspect (and re-drive) it later: for the job
retention, counted from when it was parked (TTL `expires_at`)."""

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


class ParkedRecords:
    """Records that were set aside (a recorder: it only records and lists)."""

    def __init__(self, client: Any, table: str, clock: Clock = system_clock,
                 retention_s: int = DEFAULT_JOB_RETENTION_DAYS * DAY_S) -> None:
        """`retention_s`: how long a parked record is kept (Settings.job_retention_s)."""
        self._db = client
        self._table = table
        self._clock = clock
        self._retention_s = retention_s

    def park(self, source: str, shard_id: str, sequence_number: str, raw: bytes, reason: str) -> None:
        now = self._clock()
        parked_at = iso(now)
        self._db.put_item(
            TableName=self._table,
            Item={
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

    def list(self, source: str) -> list[ParkedRecord]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "source"},
            ExpressionAttributeValues={":s": {"S": source}},
        )
        return [
            ParkedRecord(i["source"]["S"], i["shard_id"]["S"], i["sequence_number"]["S"], i["reason"]["S"],
                         _bytes(i["raw"]["B"]), i["parked_at"]["S"], int(i["raw_size"]["N"]),
                         i["raw_truncated"]["BOOL"])
            for page in pages for i in page["Items"]
        ]


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else base64.b64decode(value)

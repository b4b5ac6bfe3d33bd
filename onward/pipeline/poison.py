"""Poison records: a stream record that keeps failing its consumer is parked, in full, before the event source
mapping gives it up.

The mappings retry a failed record a bounded number of times (template.yaml: MaximumRetryAttempts, after
BisectBatchOnFunctionError has isolated it), then discard it and send only its METADATA (shard, sequence numbers,
times) to the on-failure queue. So the consumer counts each record's failed deliveries itself, keyed by shard and
sequence number (one UpdateItem on the parked table, only on a failure), and on the PARK_AFTER_FAILURES-th it
parks the record (its data and its stream metadata, with the error) and reports it done: the shard moves on, and
`onward redrive` replays it from the outbox once the cause is fixed (onward/operator/redrive.py).

Why count deliveries rather than park at the first failure: most failures are transient (a throttled write);
retried, they succeed, and nothing needs an operator. Why not leave it to the mapping: a record it discards is
gone but for its metadata. A mapping delivers a record that keeps failing at least MaximumRetryAttempts + 1
times before discarding it, so PARK_AFTER_FAILURES must not exceed that (tests/unit/project/test_template.py
checks it), with a margin for a count or a park that itself fails.
"""

from __future__ import annotations

from typing import Any

from onward.domain.clock import Clock, system_clock
from onward.settings import DAY_S
from onward.store.dynamo.keys import ttl_after

PARK_AFTER_FAILURES = 3  # a record's failed deliveries before it is parked
FAILING = "#failing"  # the parked table's source of a consumer's failure counts: `<consumer>#failing`
COUNT_RETENTION_S = DAY_S  # a count is forgotten a day after its last failure


def counted_id(shard_id: str, sequence_number: str) -> str:
    return f"{shard_id}#{int(sequence_number):080d}" if sequence_number.isdigit() else f"{shard_id}#{sequence_number}"


class FailureCounts:
    """How many times each record failed its consumer (items `<consumer>#failing` / `<shard>#<sequence>` of the
    parked table, expiring a day after their last failure)."""

    def __init__(self, client: Any, table: str, clock: Clock = system_clock) -> None:
        self._db = client
        self._table = table
        self._clock = clock

    def count(self, consumer: str, shard_id: str, sequence_number: str) -> int:
        """One more failed delivery of the record; how many it has had."""
        answer = self._db.update_item(
            TableName=self._table,
            Key={"source": {"S": consumer + FAILING}, "parked_id": {"S": counted_id(shard_id, sequence_number)}},
            UpdateExpression="ADD failures :one SET expires_at = :expires",
            ExpressionAttributeValues={":one": {"N": "1"},
                                       ":expires": {"N": str(ttl_after(self._clock(), COUNT_RETENTION_S))}},
            ReturnValues="UPDATED_NEW",
        )
        return int(answer["Attributes"]["failures"]["N"])

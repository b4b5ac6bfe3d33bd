"""Which of a batch's jobs are gone: the projector never writes a view row for a job that no longer exists.

A job's items expire its retention after it ended (onward.domain.retention), while its events stay in the
outbox for the outbox retention, which may be longer: a replay of the outbox (`onward replay`) can deliver the
events of a job deleted long ago. Only an event older than the policy's SHORTEST retention can describe a
deleted job (a job is kept at least that long after its last event), so only the jobs of a batch whose newest
event is that old, or which were re-published from the outbox, are looked up: one BatchGetItem of their job
rows' keys (per 100 jobs), projecting the version and the TTL only. Fresh events cost nothing extra.

A job row past its `expires_at` counts as gone although it may still be read: DynamoDB deletes expired items
on a best-effort basis, typically within two days, and until then reads still return them (the DynamoDB API
reference, UpdateTimeToLive).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from onward.domain.clock import EpochMs, epoch_ms
from onward.domain.models import OutboxEvent
from onward.store.dynamo.keys import job_id_of, job_key

BATCH_GET_KEYS = 100  # DynamoDB's limit of keys in one BatchGetItem
ROUNDS = 5  # BatchGetItem requests for one batch of keys before its unprocessed keys fail the lookup
FIRST_WAIT_S = 0.05


class JobsHeldBack(RuntimeError):
    """DynamoDB left some keys unprocessed through every round: the batch fails and is delivered again."""


def maybe_gone(events: Iterable[OutboxEvent], now: EpochMs, shortest_retention_s: int) -> bool:
    """Whether a job whose batch carries `events` may already be deleted: one of them was re-published from
    the outbox (`onward replay`: no `committed_at`; replays are an operator's, rare, and on a local stack whose
    TTLs are scaled an event's age says nothing of its job's), or its newest event is older than the shortest
    retention (a job is kept at least that long after the transition that ended it)."""
    events = list(events)
    if any(event.committed_at is None for event in events):
        return True
    newest = max(epoch_ms(event.committed_at or event.occurred_at) for event in events)
    return now - newest > shortest_retention_s * 1000


def gone_jobs(client: Any, jobs_table: str, job_ids: Sequence[str], now: EpochMs,
              sleep: Callable[[float], None] = time.sleep) -> set[str]:
    """The jobs among `job_ids` whose row is absent or past its TTL."""
    present: set[str] = set()
    for start in range(0, len(job_ids), BATCH_GET_KEYS):
        keys = [{"pk": {"S": key.pk}, "sk": {"S": key.sk}}
                for key in (job_key(job_id) for job_id in job_ids[start:start + BATCH_GET_KEYS])]
        request: dict[str, Any] = {jobs_table: {"Keys": keys, "ProjectionExpression": "pk, version, expires_at",
                                                "ConsistentRead": True}}
        for round_ in range(ROUNDS):
            if round_:
                sleep(FIRST_WAIT_S * 2 ** (round_ - 1))
            answer = client.batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(jobs_table, []):
                expires = item.get("expires_at", {}).get("N")
                if expires is None or int(expires) * 1000 > now:
                    present.add(job_id_of(item["pk"]["S"]))
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            raise JobsHeldBack(f"DynamoDB held keys of {jobs_table} back through {ROUNDS} BatchGetItem requests")
    return set(job_ids) - present

"""What one atomic create_many may hold, as every recorder refuses it: at most one transaction's actions
(DynamoDB's 100: a job's row, its first event and its Idempotency-Key, and one update per queue entry its
jobs enter), each job and each key once. onward.store.dynamo.transaction_limits adds the 4 MB of items."""

from __future__ import annotations

from collections.abc import Sequence

from onward.domain.errors import StoreInvariantViolation
from onward.store.ports.write_plans import NewJobWrite

TRANSACTION_MAX_ACTIONS = 100
TRANSACTION_MAX_BYTES = 4_000_000  # of items (onward.store.dynamo.keys.item_bytes, an upper bound): under 4 MB


def job_actions(write: NewJobWrite) -> int:
    """The puts of one create: its job row, its first event and, with one, its Idempotency-Key; with a unique
    key (issue 37) its put, and a takeover's check of the previous holder's row."""
    unique = 0 if write.unique is None else 1 + (write.unique.previous_holder is not None)
    return 2 + (write.idempotency is not None) + unique


def queue_entry(write: NewJobWrite) -> set[tuple[str, int]]:
    """The queue entry a create's job enters, as (tenant, ready shard), if it enters one."""
    return {(write.waiting.tenant_id, write.waiting.queue.shard)} if write.waiting is not None else set()


def create_actions(writes: Sequence[NewJobWrite]) -> int:
    """The actions of creating `writes` in one transaction: each job's puts and one update per queue entry
    its jobs enter (summed: queue_entry_updates)."""
    entries = set().union(*(queue_entry(write) for write in writes)) if writes else set()
    return sum(job_actions(write) for write in writes) + len(entries)


def check_one_transaction(writes: Sequence[NewJobWrite], *, item_bytes: int = 0) -> None:
    """Refuse (StoreInvariantViolation) creates that one transaction cannot hold: none, beyond its actions
    (or beyond its bytes, `item_bytes` where the recorder counts them), or naming an item twice (a job id or
    an Idempotency-Key), as DynamoDB refuses such a request."""
    actions = create_actions(writes)
    if not writes or actions > TRANSACTION_MAX_ACTIONS or item_bytes > TRANSACTION_MAX_BYTES:
        raise StoreInvariantViolation(f"{len(writes)} creates in one transaction: {actions} actions, {item_bytes} "
                                      f"bytes (1 to {TRANSACTION_MAX_ACTIONS} actions, {TRANSACTION_MAX_BYTES} bytes)")
    jobs = [write.job.job_id for write in writes]
    keys = [(write.job.tenant_id, write.idempotency[0]) for write in writes if write.idempotency is not None]
    if len(set(jobs)) < len(jobs) or len(set(keys)) < len(keys):
        raise StoreInvariantViolation("creates in one transaction name one item twice (a job id or a key)")

"""How many creates fit one TransactWriteItems: DynamoDB's limits (100 actions, 4 MB of items), what a batch
of creates takes (`transaction_size`, its items' bytes), where the store cuts a batch (`transaction_cuts`), and
the check both recorders make before a create_many (`check_one_transaction`)."""

from __future__ import annotations

from collections.abc import Sequence

from onward.domain.errors import StoreInvariantViolation
from onward.store.dynamo.plan_items import new_job_items
from onward.store.ports.write_plans import NewJobWrite

# What one TransactWriteItems may hold (DynamoDB's limits): both recorders refuse a create_many beyond them.
TRANSACTION_MAX_ACTIONS = 100
TRANSACTION_MAX_BYTES = 4_000_000  # of items, counted by keys.item_bytes (an upper bound): under 4 MB
QUEUE_ENTRY_BYTES = 1_000  # an upper bound of a queue entry's item (a few counters and index keys)


def transaction_size(writes: Sequence[NewJobWrite]) -> tuple[int, int]:
    """The actions and bytes of creating `writes` in one transaction: each job's puts, and one update per
    queue entry its jobs enter (summed: queue_entry_updates)."""
    entries = {(write.waiting.tenant_id, write.waiting.queue.shard) for write in writes if write.waiting}
    items = [new_job_items(write) for write in writes]
    actions = sum(len(job.puts) for job in items) + len(entries)
    return actions, sum(job.item_bytes for job in items) + len(entries) * QUEUE_ENTRY_BYTES


def transaction_cuts(writes: Sequence[NewJobWrite]) -> list[list[int]]:
    """`writes` cut into consecutive runs that each fit one transaction (TRANSACTION_MAX_ACTIONS actions,
    TRANSACTION_MAX_BYTES of items), as few as the order allows, as positions in `writes`. With one queue
    entry, 33 jobs with an Idempotency-Key fit one (99 puts + the entry's update), 49 without; a job with
    large params takes up to about 400 KB, so ten such fit one. Any part of a run fits too (a retry of
    fewer jobs). One write always fits (an item is at most 400 KB)."""
    cuts: list[list[int]] = []
    current: list[int] = []
    entries: set[tuple[str, int]] = set()
    actions = size = 0
    for position, write in enumerate(writes):
        items = new_job_items(write)
        entry = {(write.waiting.tenant_id, write.waiting.queue.shard)} if write.waiting else set()
        more_actions = len(items.puts) + len(entry - entries)
        more_bytes = items.item_bytes + len(entry - entries) * QUEUE_ENTRY_BYTES
        if current and (actions + more_actions > TRANSACTION_MAX_ACTIONS
                        or size + more_bytes > TRANSACTION_MAX_BYTES):
            cuts.append(current)
            current, entries, actions, size = [], set(), 0, 0
            more_actions = len(items.puts) + len(entry)
            more_bytes = items.item_bytes + len(entry) * QUEUE_ENTRY_BYTES
        current.append(position)
        entries |= entry
        actions += more_actions
        size += more_bytes
    if current:
        cuts.append(current)
    return cuts


def check_one_transaction(writes: Sequence[NewJobWrite]) -> None:
    """Refuse (StoreInvariantViolation) creates that one transaction cannot hold: beyond its limits, or naming
    an item twice (a job id or an Idempotency-Key), as DynamoDB refuses such a request."""
    actions, size = transaction_size(writes)
    if not writes or actions > TRANSACTION_MAX_ACTIONS or size > TRANSACTION_MAX_BYTES:
        raise StoreInvariantViolation(f"{len(writes)} creates in one transaction: {actions} actions, {size} bytes "
                                      f"(1 to {TRANSACTION_MAX_ACTIONS} actions, {TRANSACTION_MAX_BYTES} bytes)")
    keys = [("job", write.job.job_id) for write in writes]
    keys += [("key", f"{write.job.tenant_id}#{write.idempotency[0]}") for write in writes
             if write.idempotency is not None]
    if len(set(keys)) < len(keys):
        raise StoreInvariantViolation("creates in one transaction name one item twice (a job id or a key)")

"""How many creates fit one TransactWriteItems: what a batch of creates takes (`transaction_size`: its actions
and its items' bytes), where the store cuts a batch (`transaction_cuts`), and the DynamoDB recorder's check
before a create_many (`check_one_transaction`: onward.store.ports.transaction_limits' with the bytes)."""

from __future__ import annotations

from collections.abc import Sequence

from onward.store.dynamo.plan_items import new_job_items
from onward.store.ports import transaction_limits
from onward.store.ports.transaction_limits import (
    TRANSACTION_MAX_ACTIONS,
    TRANSACTION_MAX_BYTES,
    create_actions,
    job_actions,
    queue_entry,
)
from onward.store.ports.write_plans import NewJobWrite

QUEUE_ENTRY_BYTES = 1_000  # an upper bound of a queue entry's item (a few counters and index keys)


def transaction_size(writes: Sequence[NewJobWrite]) -> tuple[int, int]:
    """The actions and bytes of creating `writes` in one transaction: each job's puts, and one update per
    queue entry its jobs enter (summed: queue_entry_updates)."""
    entries = {entry for write in writes for entry in queue_entry(write)}
    size = sum(new_job_items(write).item_bytes for write in writes) + len(entries) * QUEUE_ENTRY_BYTES
    return create_actions(writes), size


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
        puts, item_bytes = job_actions(write), new_job_items(write).item_bytes
        entry = queue_entry(write)
        more_actions = puts + len(entry - entries)
        more_bytes = item_bytes + len(entry - entries) * QUEUE_ENTRY_BYTES
        if current and (actions + more_actions > TRANSACTION_MAX_ACTIONS
                        or size + more_bytes > TRANSACTION_MAX_BYTES):
            cuts.append(current)
            current, entries, actions, size = [], set(), 0, 0
            more_actions = puts + len(entry)
            more_bytes = item_bytes + len(entry) * QUEUE_ENTRY_BYTES
        current.append(position)
        entries |= entry
        actions += more_actions
        size += more_bytes
    if current:
        cuts.append(current)
    return cuts


def check_one_transaction(writes: Sequence[NewJobWrite]) -> None:
    """Refuse (StoreInvariantViolation) creates that one TransactWriteItems cannot hold: beyond its actions or
    its 4 MB of items, or naming an item twice, as DynamoDB refuses such a request."""
    transaction_limits.check_one_transaction(writes, item_bytes=transaction_size(writes)[1])

"""The partitions held entries are kept in (onward.store.held_jobs), named alike by both backends (on DynamoDB a
partition `p` is the partition key `HELD#p`: onward.store.dynamo.held_items).

- A paused type's hold key (`paused#<type>`) holds the waiting jobs of that type of every tenant: its entries are
  spread over HELD_SHARDS partitions `<hold key>#<n>`, n drawn from the job's id (HELD_SHARDS says why that many),
  so the holds of a type arriving faster than one partition takes (about 500 a second) are not throttled.
- A concurrency key's hold key (`concurrency#<key>`) is one partition, the hold key itself: its entries are put
  and deleted by the holds and releases of the key's jobs, whose transactions also write the key's item
  (`held + 1`, `held - 1`), one item written by every claim and end of them as well; so per tenant its entries
  take at most the writes of that one item, and one partition takes them. The end of an attempt reads the
  oldest held job of its (tenant, key) in one Query, which shards would turn into one per shard.
- Entries held before the shards (a stack deployed before them) are under the hold key itself: every reader of
  a paused type's entries reads that partition too (one Query more), so none is stranded.
"""

from __future__ import annotations

from onward.domain.concurrency import key_of_hold
from onward.store.ports.index_shards import HELD_SHARDS, held_shard


def sharded(hold_key: str) -> bool:
    """Whether `hold_key`'s entries are spread over shards (a pause's), or in one partition (a concurrency key's)."""
    return key_of_hold(hold_key) is None


def entry_partition(hold_key: str, job_id: str) -> str:
    """The partition a hold puts the job's entry in."""
    return f"{hold_key}#{held_shard(job_id)}" if sharded(hold_key) else hold_key


def partitions(hold_key: str) -> list[str]:
    """Every partition entries of `hold_key` may be in: its shards, then the hold key itself (entries held
    before the shards, for a pause's)."""
    if not sharded(hold_key):
        return [hold_key]
    return [*(f"{hold_key}#{shard}" for shard in range(HELD_SHARDS)), hold_key]


def entry_partitions(hold_key: str, job_id: str) -> list[str]:
    """The partitions the job's entry may be in: where a hold puts it now, and where one put it before the shards."""
    return list(dict.fromkeys([entry_partition(hold_key, job_id), hold_key]))

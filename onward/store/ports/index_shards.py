"""How the store's indexes are sharded: how many shards each has and which shard an entry falls in (pure).
Every tenant's jobs write these indexes, so each is spread over shards: none takes all the writes, and a
reader of a whole index reads every shard (onward.store.dynamo.keys names the partitions)."""

from __future__ import annotations

import zlib

# Partitions of the sparse indexes that every tenant's jobs write: each takes a share of the writes, so
# none nears DynamoDB's 1,000 write units/s per partition below the platform's ceiling (bench/scale.py).
LEASE_SHARDS = 32  # `leases`: a claim and an end write it (2 units per job): 16,000 jobs/s
# `active`: a deployment setting (Settings.active_shards, template parameter ActiveShards, 64 on AWS): a
# queue entry entering and leaving costs 2 units (and a re-key 2 more), drawn into a partition at each
# entering, so tenants whose every job is alone need 64 partitions for 10,000 jobs/s; a claim reads the
# head of each (once per HEAD_CACHE_MS per process). Only ever raised: entries in a partition past a
# lowered count are not read until a job enters them again.
DEFAULT_ACTIVE_SHARDS = 4  # a local stack (`onward up`, tests): each head read is a Query per partition
MAX_ACTIVE_SHARDS = 64
CLOCK_SHARDS = 4  # the system virtual clock: written at most once a second per claiming process
PARKED_SHARDS = 4  # `parked`: an entry whose jobs are all in backoff is parked and woken (2 units per park)
# held entries of a paused type (onward.store.held_partitions): every tenant's jobs of the type are held under one
# hold key, and a hold puts its entry in a transaction (2 units, under 1 KB), so one partition would take about
# 500 holds a second; the platform's 10,000 jobs/s of one type need 20,000 units/s, 20 partitions at the least:
# 32 take 16,000 holds/s (headroom for the hash's unevenness). A release sweep reads each of them (and the key
# held under before they were sharded): 33 Queries a sweep, not a job.
HELD_SHARDS = 32


def lease_shard(job_id: str) -> int:
    """The `leases` shard of a running job."""
    return int(job_id[-8:], 16) % LEASE_SHARDS


def held_shard(job_id: str) -> int:
    """The shard of a held entry of a paused type (onward.store.held_partitions): drawn from the job's id."""
    return zlib.crc32(job_id.encode()) % HELD_SHARDS


def active_shard(tenant_id: str, shard: int, active_shards: int, entering: str) -> int:
    """The `active` shard of a tenant's queue entry (of ready shard `shard`) as it enters the index, drawn from
    what makes it enter (`entering`: the id of the job entering, or the wake's time): the entry keeps it while
    it stays there. Drawn anew at each entering, so a partition takes its share of all the enterings, re-keys
    and leavings, not the fixed share of the tenants hashed to it (by tenant alone, 1,000 tenants over 32
    partitions made the hottest take 1.75 times the mean: bench/scale.py's realistic run)."""
    return zlib.crc32(f"{tenant_id}#{shard}#{entering}".encode()) % active_shards


def waking(now: int) -> str:
    """What draws the `active` partition of a parked entry woken at `now` (active_shard's `entering`)."""
    return f"wake@{now}"


def parked_shard(tenant_id: str, shard: int) -> int:
    """The `parked` shard of a tenant's queue entry."""
    return zlib.crc32(f"{tenant_id}#{shard}".encode()) % PARKED_SHARDS

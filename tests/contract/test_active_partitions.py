"""Which `active` partition a queue entry sits in: drawn anew each time it enters the index, kept while it
stays there (onward.store.ports.index_shards.active_shard), on both backends.

With the partition fixed by tenant, 1,000 tenants over 32 partitions made the hottest partition take 1.75
times the mean of the index's writes (bench/scale.py's realistic run): a busy tenant's enterings, re-keys and
leavings all fell on its one partition. Drawn per entering, every partition takes its share over time.
"""

from __future__ import annotations

from collections import Counter

from onward.domain.models import NewJob
from onward.store.ports import Tenant
from onward.store.ports.index_shards import active_shard
from tests.contract.backends import StoreBackend

ECHO = NewJob(type="demo.echo", params={"n": 1})


def entry_partitions(backend: StoreBackend) -> dict[str, str]:
    """active_pk of each queue entry in the index, by tenant, as stored."""
    return {item["tenant_id"]: item["active_pk"] for item in backend.jobs_table() if "active_pk" in item}


def test_an_entry_keeps_its_partition_while_it_stays_and_draws_another_as_it_enters_again(backend):
    """Without `if_not_exists` on the partition (onward.store.dynamo.writes.queue_entry_update) a second job
    entering an entry already in the index would move its index item (2 write units) to the partition the
    second job draws; without the draw, every entering of the tenant would land in one partition."""
    store = backend.store()
    store.register_tenant(Tenant("acme"))
    seen: Counter[str] = Counter()
    for _ in range(24):
        store.create("acme", ECHO)
        placed = entry_partitions(backend)["acme"]
        store.create("acme", ECHO)  # the entry is in the index already: it stays where it is
        assert entry_partitions(backend)["acme"] == placed
        for _ in range(2):
            lease = store.claim("w1", 30)
            assert lease is not None
            store.complete(lease, {})
        store.claim("w1", 30)  # (finds the entry empty and takes it out of the index)
        assert "acme" not in entry_partitions(backend)
        seen[placed] += 1
    assert len(seen) >= 3, f"24 enterings drew {dict(seen)}"


def test_enterings_spread_evenly_over_the_partitions():
    """One tenant's entry entering 6,400 times (a job id each) over 64 partitions: each takes its share within
    25% (a fixed partition per tenant would take all of them in one)."""
    counts = Counter(active_shard("acme", 0, 64, f"{n:032x}") for n in range(6_400))
    assert len(counts) == 64 and max(counts.values()) <= 125 and min(counts.values()) >= 75

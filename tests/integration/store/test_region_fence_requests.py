"""What the region fence (issue 39, onward.store.region_fence) costs in requests: nothing. The epoch's
condition is in the job row's own action of each transaction and its stamp in the items the transaction
writes anyway; a write refused for the epoch is told from a lost race by the row its refusal returns
(`ReturnValuesOnConditionCheckFailure`), not by a read."""

from __future__ import annotations

from onward.domain.errors import RegionFenced
from onward.domain.models import NewJob
from onward.domain.regions import first_version_of
from onward.domain.states import JobState
from tests.integration.store.test_requests_per_job import refusal

ECHO = NewJob(type="demo.echo", params={"n": 1})
LEASE_S = 30


def test_a_job_under_a_raised_epoch_costs_the_same_3_transactions(metered):
    """Breaks if the epoch cost a request: a read of the epoch item per transition (the store keeps the
    writer's epoch in memory, set by the authority lease), or a ConditionCheck's transaction of its own."""
    store = metered.store
    store.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1", reason="drill", decided_by="test")
    store.set_region_epoch(1)
    created, create_cost = metered.count(lambda: store.create("acme", ECHO, idempotency_key="order-1"))
    store.create("acme", ECHO, idempotency_key="order-2")
    store.claim("w1", LEASE_S)  # (the process's first claim reads the indexes' heads: not the fence's)
    lease, claim_cost = metered.count(lambda: store.claim("w1", LEASE_S))
    assert lease is not None
    report, complete_cost = metered.count(lambda: store.complete(lease, {"rows": 3}))
    assert create_cost == claim_cost == complete_cost == {"TransactWriteItems": 1}
    assert created.job.version == first_version_of(1)
    assert report.job.state is JobState.SUCCEEDED and report.job.version == first_version_of(1) + 2


def test_a_stale_writers_refused_complete_costs_its_transaction_and_no_read(metered):
    """Breaks if the refusal were judged by reading the row (a GetItem more on every fenced write), or were
    taken for a lost race (the row read and the report decided again, up to MAX_ROUNDS times)."""
    store = metered.store
    store.create("acme", ECHO)
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    home = metered.backend.store(region_epoch=1)
    home.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1", reason="drill", decided_by="test")
    assert home.adopt(lease.job_id, 1) is not None
    refused, cost = metered.count(lambda: refusal(lambda: store.complete(lease, {"rows": 3})))
    assert cost == {"TransactWriteItems": 1}
    assert isinstance(refused, RegionFenced)

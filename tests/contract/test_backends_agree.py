"""The two recorders hold the same state: one scenario of every kind of write, run on DynamoDB (the embedded
endpoint) and in memory with the same job ids and clock, leaves item for item the same jobs and outbox tables
(what the memory holds rendered as the items DynamoDB would hold: tests/contract/memory_items.py). Without it
the in-memory recorder could pass the contract suite with other state (an entry left out of an index, a
counter not charged, a number kept differently), and the fast tests would check a store that production
does not have."""

from __future__ import annotations

import random
import uuid

import pytest

import onward.store.service
from onward.domain.dispatch import TenantPolicy
from onward.domain.models import ErrorSummary, NewJob
from onward.store.ports import Tenant
from tests.contract.backends import DynamoBackend, MemoryBackend, StoreBackend
from tests.support import ManualClock

pytestmark = pytest.mark.integration


class SeededIds:
    """Stands in for the `uuid` module inside onward.store.service: the same job ids on both backends."""

    def __init__(self) -> None:
        self.rng = random.Random(7)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)


def scenario(backend: StoreBackend, clock: ManualClock) -> None:
    store = backend.store(rng=random.Random(3))
    store.register_tenant(Tenant("capped", TenantPolicy(weight=2.5, cap=1), ready_shards=2))
    store.create("capped", NewJob(type="demo.echo", params={"n": 1, "nested": {"x": [1, 2.5, None]}}),
                 idempotency_key="k-1")
    store.create("capped", NewJob(type="demo.echo", priority=3))
    store.create("acme", NewJob(type="demo.echo", max_attempts=1))
    store.create("acme", NewJob(type="demo.echo"))
    leases = [store.claim(f"w{n}", 30) for n in range(3)]
    clock.advance(5)
    store.renew_lease(leases[0], 60)
    store.fail(leases[1], ErrorSummary.of("Flaky", "once"))
    store.complete(leases[0], {"rows": 3, "ratio": 0.5, "whole": 1.0})  # a result may hold a whole float
    clock.advance(40)
    store.register_tenant(Tenant("capped", TenantPolicy(weight=0.75, cap=1), ready_shards=2))  # rebased
    store.reap()
    store.complete(leases[2], {"late": True})  # reaped: fenced and marked on its run
    clock.advance(400)
    more = [store.claim(f"w{n}", 30) for n in range(3, 6)]
    for lease in more:
        if lease is not None:
            store.release(lease)
    for job in list(store.all_jobs()):
        if job.state.value in ("queued", "retry_wait"):
            store.cancel(job.job_id)
    for job in list(store.all_jobs()):
        if job.state.value in ("dead", "quarantined"):
            store.replay(job.job_id)
    store.create("acme", NewJob(type="demo.echo", params={"left": "waiting"}))
    store.create("acme", NewJob(type="demo.echo", params={"left": "running"}))
    store.fail(store.claim("w8", 30), ErrorSummary.of("E", "x"))  # left in retry_wait: in the ready index
    store.renew_lease(store.claim("w9", 30), 45)  # left running: in the leases index


def test_dynamodb_and_memory_store_the_same_items(settings, dynamodb, monkeypatch):
    snapshots = []
    for make in (MemoryBackend, lambda clock: DynamoBackend(clock, settings, dynamodb)):
        monkeypatch.setattr(onward.store.service, "uuid", SeededIds())
        clock = ManualClock()
        backend = make(clock)
        scenario(backend, clock)
        snapshots.append(backend.snapshot())
    (memory_jobs, memory_outbox), (dynamo_jobs, dynamo_outbox) = snapshots
    assert len(memory_jobs) > 15 and len(memory_outbox) > 15
    assert memory_jobs == dynamo_jobs
    assert memory_outbox == dynamo_outbox

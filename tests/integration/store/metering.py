"""Counting what the store's operations cost in AWS requests, on each backend: in memory the recorder's calls
(named by the request each one is on DynamoDB), on DynamoDB the requests the embedded endpoint serves on the
stack's jobs table. The `metered` fixture (tests/integration/store/conftest.py) gives a store on each in turn."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from onward.domain.clock import EpochMs
from onward.domain.models import Run
from onward.domain.states import RunOutcome
from onward.store.memory.recorder import MemoryRecorder
from onward.store.ports import (
    ActiveEntry,
    CommitOutcome,
    CreateOutcome,
    DueJob,
    IdempotencyRecord,
    JobRow,
    ManyCreated,
    NewJobWrite,
    OverlapMark,
    RenewalAnswer,
    Tenant,
    TenantState,
    TransitionWrite,
)
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS, PARKED_SHARDS
from onward.store.ports.ready_queues import ReadyQueue
from onward_infra.endpoint import EmbeddedEndpoint
from tests.contract.backends import DynamoBackend, MemoryBackend, StoreBackend
from tests.support import ManualClock

T = TypeVar("T")

# --- counting ---------------------------------------------------------------------------------------------


class CountingMemoryRecorder(MemoryRecorder):
    """The in-memory recorder, counting its calls under the DynamoDB operation each one is on DynamoDB
    (onward.store.dynamo.recorder), so that both backends are held to the same numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        switches = self.flow_book.switches

        def counted_switches() -> Any:  # the pauses and the drain switch: one Query on DynamoDB
            self.calls["Query"] += 1
            return switches()

        self.flow_book.switches = counted_switches  # type: ignore[method-assign]

    def job(self, job_id: str) -> JobRow | None:
        self.calls["GetItem"] += 1
        return super().job(job_id)

    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        self.calls["Query"] += 1  # the row on the tenant's condition (onward.store.dynamo.tenant_reads)
        return super().tenant_job(job_id, tenant_id)

    def rate_limits_of(self, tenant_id: str, keys: Collection[str]) -> dict[str, Any]:
        self.calls["BatchGetItem"] += 1  # the limits a claimed job is subject to (cached per process)
        return super().rate_limits_of(tenant_id, keys)

    def run(self, job_id: str, attempt: int) -> Run | None:
        self.calls["Query"] += 1  # the job's partition: a running attempt's run is its row's (issue 34)
        return super().run(job_id, attempt)

    def runs(self, job_id: str) -> list[Run]:
        self.calls["Query"] += 1
        return super().runs(job_id)

    def result(self, job_id: str) -> Any:
        self.calls["Query"] += 1  # the job's last run record (onward.store.dynamo.results)
        return super().result(job_id)

    def _old_result(self, job_id: str) -> Any:
        self.calls["GetItem"] += 1  # a result item written before issue 34
        return super()._old_result(job_id)

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        self.calls["GetItem"] += 1
        return super().idempotency(tenant_id, key)

    def create(self, write: NewJobWrite) -> CreateOutcome:
        self.calls["TransactWriteItems"] += 1
        return super().create(write)

    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        self.calls["TransactWriteItems"] += 1
        return super().create_many(writes)

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        self.calls["TransactWriteItems"] += 1
        return super().commit(write)

    def renew_lease(self, job_id: str, attempt: int, worker_id: str, expires_at: EpochMs, *,
                    region_epoch: int = 0) -> RenewalAnswer:
        self.calls["UpdateItem"] += 1
        return super().renew_lease(job_id, attempt, worker_id, expires_at, region_epoch=region_epoch)

    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        self.calls["UpdateItem"] += 1
        return super().mark_fenced(job_id, attempt, worker_id, late_report, at, expires_at=expires_at,
                                   overlap=overlap)

    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        self.calls["UpdateItem"] += 1
        return super().mark_lease_lost(job_id, attempt, worker_id, at, overlap=overlap)

    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        self.calls["UpdateItem"] += 1
        if attempt not in self._state.runs.get(job_id, {}):  # (a running attempt's partial record: issue 34)
            self.calls["TransactWriteItems"] += 1
        return super().mark_overlap(job_id, attempt, overlap)

    def due(self, tenant_id: str, queue: ReadyQueue, now: EpochMs, limit: int) -> list[DueJob]:
        self.calls["Query"] += 1
        return super().due(tenant_id, queue, now, limit)

    def active_head(self, limit_per_shard: int) -> list[ActiveEntry]:
        self.calls["Query"] += DEFAULT_ACTIVE_SHARDS
        return super().active_head(limit_per_shard)

    def parked_due(self, now: EpochMs, limit_per_shard: int) -> list[tuple[str, int]]:
        self.calls["Query"] += PARKED_SHARDS
        return super().parked_due(now, limit_per_shard)

    def tenants(self, tenant_ids: Collection[str] | None = None) -> dict[str, Tenant]:
        self.calls["BatchGetItem" if tenant_ids is not None else "Query"] += 1
        return super().tenants(tenant_ids)

    def tenant_counters(self, wanted: Mapping[Tenant, Collection[int] | None], *,
                        consistent: bool = False) -> dict[str, TenantState]:
        self.calls["BatchGetItem"] += 1
        return super().tenant_counters(wanted, consistent=consistent)

    def clock(self) -> float:
        self.calls["BatchGetItem"] += 1
        return super().clock()

    def advance_clock(self, shard: int, value: float) -> bool:
        self.calls["UpdateItem"] += 1
        return super().advance_clock(shard, value)

    def deactivate(self, tenant_id: str, shard: int) -> bool:
        self.calls["UpdateItem"] += 1
        return super().deactivate(tenant_id, shard)

    def rekey(self, tenant_id: str, shard: int, active_vt: float) -> bool:
        self.calls["UpdateItem"] += 1
        return super().rekey(tenant_id, shard, active_vt)

    def lift(self, tenant_id: str, lift_vt: int) -> bool:
        self.calls["UpdateItem"] += 1
        return super().lift(tenant_id, lift_vt)

    def park(self, tenant_id: str, shard: int, until: EpochMs, entered: int) -> bool:
        self.calls["UpdateItem"] += 1
        return super().park(tenant_id, shard, until, entered)

    def wake(self, tenant_id: str, shard: int, now: EpochMs) -> bool:
        self.calls["UpdateItem"] += 1
        return super().wake(tenant_id, shard, now)

    def put_tenant(self, tenant: Tenant, *, only_if_new: bool = False) -> bool:
        self.calls["PutItem"] += 1
        return super().put_tenant(tenant, only_if_new=only_if_new)


class Metered:
    """A store on one backend, and what its operations cost: `count(operation)` runs it and returns its
    answer and the requests it made, by operation ("GetItem": 1, ...)."""

    def __init__(self, backend: StoreBackend, seen: Counter[str]) -> None:
        self.backend = backend
        self.store = backend.store()
        self.store.register_tenant(Tenant("acme"))  # known to the store: no tenant write in the counts
        self.store.registry.virtual_clock()  # read once a second by a process that creates or claims jobs
        self._seen = seen

    def count(self, operation: Callable[[], T]) -> tuple[T, dict[str, int]]:
        self.store.registry.virtual_clock()  # its once-a-second read is not the operation's
        # nor are a process's reads of the pauses (once per FLOW_CACHE_MS) and of the declared job types
        # (once per their cache's seconds): per process, not per job (test_process_reads counts them)
        self.store.flow.switches()
        self.store.type_catalog.declared_types()
        before = Counter(self._seen)
        answer = operation()
        made = Counter(self._seen)
        made.subtract(before)
        return answer, {name.rsplit(".", 1)[-1]: n for name, n in made.items() if n}


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def metered(request: pytest.FixtureRequest, clock: ManualClock) -> Any:
    """Each backend in turn: in memory (recorder calls counted), then DynamoDB on the embedded endpoint
    (every request naming the stack's jobs table counted by the endpoint, X-Amz-Target by X-Amz-Target)."""
    if request.param == "memory":
        backend = MemoryBackend(clock)
        counting = CountingMemoryRecorder()
        backend.recorder = backend.memory = counting
        yield Metered(backend, counting.calls)
        return
    settings = request.getfixturevalue("settings")
    endpoint: EmbeddedEndpoint = request.getfixturevalue("endpoint")
    seen = endpoint.watch(settings.jobs_table)
    try:
        yield Metered(DynamoBackend(clock, settings, request.getfixturevalue("dynamodb")), seen)
    finally:
        endpoint.unwatch(settings.jobs_table)


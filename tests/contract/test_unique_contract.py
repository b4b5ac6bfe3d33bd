"""Unique jobs (issue 37), ONE suite on both recorders (in memory, and DynamoDB on the embedded endpoint) through
the `store_backend` fixture, as tests/contract/test_recorder_contract.py.

What the store must honour: a tenant's unique key is taken only by the create's own transaction, on its
condition (no item, or its window ended by now; a takeover: the item still names a holder that finished or
whose row is gone), so a second create within the window, or while the holder has not finished, answers as its
`on_conflict` says and writes nothing; `replace` cancels a holder that has not started; concurrent creates of
one key make exactly one job.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.errors import UniqueKeyHeld
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState
from onward.domain.uniqueness import UniqueHold
from onward.store.dynamo.keys import Entity
from onward.store.ports import CreateOutcome, NewJobWrite
from onward.store.ports.unique_keys import UniqueClaim
from onward.store.service import Created, JobStore
from tests.contract.backends import StoreBackend


def unique_job(key: str = "order-42", *, params: dict[str, Any] | None = None, **rule: Any) -> NewJob:
    return NewJob.model_validate({"type": "demo.echo", "params": params or {}, "unique": {"key": key, **rule}})


def key_items(backend: StoreBackend) -> list[dict[str, Any]]:
    return [item for item in backend.jobs_table() if item.get("entity") == Entity.UNIQUE_KEY]


def test_a_second_create_within_the_window_answers_the_holder_and_writes_nothing(
        store: JobStore, backend: StoreBackend) -> None:
    """Without the key item's conditional put, the second create would make a second job."""
    first = store.create("acme", unique_job(window_s=60))
    before = backend.snapshot()
    second = store.create("acme", unique_job(window_s=60, params={"other": 1}))
    assert (second.created, second.duplicate_of_unique, second.job.job_id) == (False, True, first.job.job_id)
    assert backend.snapshot() == before
    other_tenant = store.create("globex", unique_job(window_s=60))
    assert other_tenant.created and other_tenant.job.job_id != first.job.job_id


def test_the_window_ends_by_the_stored_expiry_not_by_the_item_going(
        store: JobStore, backend: StoreBackend) -> None:
    """The item is still there after the window (TTL lags): without comparing held_until with now, the key
    would stay held until TTL deleted it, days late."""
    first = store.create("acme", unique_job(window_s=60))
    backend.clock.advance(59)
    assert store.create("acme", unique_job(window_s=60)).duplicate_of_unique
    backend.clock.advance(1)
    assert len(key_items(backend)) == 1
    after = store.create("acme", unique_job(window_s=60))
    assert after.created and after.job.job_id != first.job.job_id
    (item,) = key_items(backend)
    assert item["job_id"] == after.job.job_id
    assert item["held_until"] == after.job.created_at + 60_000 and item["expires_at"] == item["held_until"] // 1000 + 1


def test_the_window_holds_the_key_whatever_becomes_of_the_holder(store: JobStore) -> None:
    """A finished holder does not free a windowed key (only the "until finished" mode frees on the end)."""
    first = store.create("acme", unique_job(window_s=60))
    store.cancel(first.job.job_id)
    again = store.create("acme", unique_job(window_s=60))
    assert again.duplicate_of_unique and again.job.job_id == first.job.job_id
    assert again.job.state is JobState.CANCELLED


def test_until_finished_holds_while_waiting_and_running_and_frees_on_any_end(
        store: JobStore, backend: StoreBackend) -> None:
    """Without the takeover's check of the holder's row, a finished holder's key would stay held forever."""
    first = store.create("acme", unique_job())
    assert store.create("acme", unique_job()).duplicate_of_unique
    lease = store.claim("w1", 30)
    assert lease is not None and lease.job.job_id == first.job.job_id
    backend.clock.advance(31 * 86_400)  # no window: time alone never frees it
    assert store.create("acme", unique_job()).job.job_id == first.job.job_id
    store.complete(lease)
    second = store.create("acme", unique_job())
    assert second.created and second.job.job_id != first.job.job_id
    (item,) = key_items(backend)
    assert item["job_id"] == second.job.job_id and "held_until" not in item and "expires_at" not in item
    store.cancel(second.job.job_id)  # cancelled is an end too
    third = store.create("acme", unique_job())
    assert third.created and third.job.job_id not in (first.job.job_id, second.job.job_id)


def test_reject_names_the_holder_and_writes_nothing(store: JobStore, backend: StoreBackend) -> None:
    """reject must refuse (409 over HTTP), not answer the holder as keep does."""
    first = store.create("acme", unique_job(window_s=60))
    before = backend.snapshot()
    with pytest.raises(UniqueKeyHeld) as refused:
        store.create("acme", unique_job(window_s=60, on_conflict="reject"))
    assert refused.value.job_id == first.job.job_id and "unique.key" in str(refused.value)
    assert backend.snapshot() == before


def test_replace_cancels_a_waiting_holder_and_takes_the_key(store: JobStore, backend: StoreBackend) -> None:
    """Without the cancel, the old job would still run beside the new one; without the takeover condition the
    key would keep naming the old one."""
    first = store.create("acme", unique_job(window_s=60))
    second = store.create("acme", unique_job(window_s=60, on_conflict="replace", params={"v": 2}))
    assert second.created and second.replaced == first.job.job_id
    assert store.get(first.job.job_id).state is JobState.CANCELLED
    (item,) = key_items(backend)
    assert item["job_id"] == second.job.job_id
    assert store.create("acme", unique_job(window_s=60)).job.job_id == second.job.job_id


def test_replace_leaves_a_running_holder_alone_and_refuses(store: JobStore) -> None:
    """A running holder has started work: replacing it would cancel work in flight, so it is refused (409)."""
    first = store.create("acme", unique_job(on_conflict="replace"))
    lease = store.claim("w1", 30)
    assert lease is not None
    with pytest.raises(UniqueKeyHeld) as refused:
        store.create("acme", unique_job(on_conflict="replace"))
    assert refused.value.job_id == first.job.job_id and "running" in str(refused.value)
    running = store.get(first.job.job_id)
    assert running.state is JobState.RUNNING and not running.cancel_requested


def test_the_idempotency_key_answers_first_and_a_new_one_meets_the_unique_key(store: JobStore) -> None:
    """A retry of one request (same Idempotency-Key) is that request's job, not a duplicate; another request
    (another key) wanting the same unique key is answered the holder."""
    first = store.create("acme", unique_job(), idempotency_key="req-1")
    retried = store.create("acme", unique_job(), idempotency_key="req-1")
    assert (retried.created, retried.duplicate_of_unique, retried.job.job_id) == (False, False, first.job.job_id)
    other = store.create("acme", unique_job(), idempotency_key="req-2")
    assert other.duplicate_of_unique and other.job.job_id == first.job.job_id


def test_a_batch_makes_one_job_per_unique_key(store: JobStore) -> None:
    """Two entries of one batch with one key cannot both be put (one transaction names an item once): the
    later is answered as a create after the first; a key held before the batch answers its holder."""
    held = store.create("acme", unique_job("held"))
    answers = store.create_batch("acme", [(unique_job("a"), None), (unique_job("a"), None),
                                          (unique_job("held"), None), (NewJob(type="demo.echo"), None)])
    assert all(isinstance(answer, Created) for answer in answers)
    first, repeat, on_held, plain = (answer for answer in answers if isinstance(answer, Created))
    assert first.created and repeat.duplicate_of_unique and repeat.job.job_id == first.job.job_id
    assert on_held.duplicate_of_unique and on_held.job.job_id == held.job.job_id
    assert plain.created


def test_concurrent_creates_of_one_key_make_exactly_one_job(backend: StoreBackend) -> None:
    """Eight stores (as eight API processes) create one key at once: the condition on the key's item lets one
    transaction in; without it every thread would create its own job."""
    stores = [backend.store() for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    answers: list[Created] = []
    errors: list[BaseException] = []

    def create(store: JobStore, number: int) -> None:
        barrier.wait()
        try:
            answers.append(store.create("acme", unique_job("race", params={"n": number})))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=create, args=(store, number)) for number, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(answer.created for answer in answers) == 1
    assert len({answer.job.job_id for answer in answers}) == 1
    assert sum(1 for item in backend.jobs_table() if item.get("entity") == Entity.JOB) == 1


def takeover_write(backend: StoreBackend, job_id: str, previous_holder: str) -> NewJobWrite:
    """A create of `job_id` taking key `order-42` over from `previous_holder`, as the store writes it after
    reading that holder finished."""
    request = unique_job()
    change = lifecycle.create(job_id, "acme", request, backend.clock.now)
    return NewJobWrite.of(change, ready_shards=1, retention_s=86_400, job_retention_s=86_400,
                          unique=UniqueClaim("order-42", UniqueHold(job_id, None), backend.clock.now, previous_holder))


def test_a_takeover_is_refused_unless_the_key_still_names_a_finished_holder(
        store: JobStore, backend: StoreBackend) -> None:
    """The create decides a takeover from two reads; between them and its write the holder may be replayed, or
    another create may take the key. Without the ConditionCheck on the holder's row (or the job_id condition
    on the key's item) the takeover would make a second holder."""
    holder = store.create("acme", unique_job())
    lease = store.claim("w1", 30)
    assert lease is not None
    store.fail(lease, ErrorSummary.of("Broken", "permanent"), permanent=True)
    store.replay(holder.job.job_id)  # dead, then queued again: it holds its key again
    before = backend.snapshot()
    assert backend.recorder.create(takeover_write(backend, "c" * 32, holder.job.job_id)) is CreateOutcome.UNIQUE_HELD
    assert backend.recorder.create(takeover_write(backend, "d" * 32, "e" * 32)) is CreateOutcome.UNIQUE_HELD
    assert backend.snapshot() == before
    store.cancel(holder.job.job_id)
    assert backend.recorder.create(takeover_write(backend, "f" * 32, holder.job.job_id)) is CreateOutcome.CREATED
    (item,) = key_items(backend)
    assert item["job_id"] == "f" * 32

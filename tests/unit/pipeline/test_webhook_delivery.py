"""The webhook matcher and deliverer in memory (MemoryWebhooks, MemoryDeliveryQueue, a sender standing in for
HTTP): what a batch records and queues, the retry schedule up to failure, a redeliver, the isolation of a
slow endpoint, and that a crash between any two steps only delivers again."""

from __future__ import annotations

import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from onward import faults
from onward.domain.clock import ManualClock
from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.domain.webhooks import DeliveryState, RetryPolicy, Webhook, signature_is_valid
from onward.pipeline.webhooks.deliverer import Deliverer, redeliver
from onward.pipeline.webhooks.matcher import WebhookMatcher
from onward.pipeline.webhooks.queue import MemoryDeliveryQueue
from onward.pipeline.webhooks.sender import SendOutcome
from onward.store.webhooks import MemoryWebhooks

SECRET = "whsec-0123456789abcdef"
POLICY = RetryPolicy(first_delay_s=1, max_delay_s=4, give_up_after_s=20)


class FakeSender:
    """Answers as told per URL; a URL in `hanging` blocks until `release` is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []
        self.failing: set[str] = set()
        self.hanging: set[str] = set()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def send(self, url: str, body: bytes, headers: dict[str, str]) -> SendOutcome:
        with self._lock:
            self.sent.append((url, body, headers))
        if url in self.hanging:
            self.release.wait(10)
            return SendOutcome(False, error="timed out")
        if url in self.failing:
            return SendOutcome(False, 500, "answered 500")
        return SendOutcome(True, 204)


def job_id(n: int) -> str:
    return f"{n:032x}"


def record(n: int, status: JobState = JobState.SUCCEEDED, tenant: str = "acme", version: int = 3) -> bytes:
    event = OutboxEvent(event_id=f"{job_id(n)}:{version}", job_id=job_id(n), tenant_id=tenant, type="demo.echo",
                        version=version, status=status, attempt=1, occurred_at="2026-12-04T10:00:00.000Z")
    return event.model_dump_json(by_alias=True).encode()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def parts(clock: ManualClock) -> tuple[MemoryWebhooks, MemoryDeliveryQueue, FakeSender]:
    store = MemoryWebhooks()
    for webhook_id, tenant, events in (("wh_a", "acme", ("succeeded",)), ("wh_g", "globex", ("*",))):
        store.register(Webhook(webhook_id=webhook_id, tenant_id=tenant, url=f"https://{webhook_id}.example.com/",
                          kinds=events, secret=SECRET, created_at=0))
    return store, MemoryDeliveryQueue(clock, visibility_ms=30_000), FakeSender()


def drain(deliverer: Deliverer, queue: MemoryDeliveryQueue) -> list[str]:
    return [deliverer.handle(message, queue).handled for message in queue.receive(100)]


def test_a_batch_records_and_queues_one_delivery_per_wanting_endpoint(parts, clock) -> None:
    """Catches a delivery for a status the endpoint did not ask for, for another tenant's endpoint, for a
    heartbeat, or a matcher that calls endpoints itself (nothing may be sent before the deliverer runs)."""
    store, queue, sender = parts
    heartbeat = b'{"kind": "heartbeat", "slots": 1, "through": {"0": 1}}'
    tally = WebhookMatcher(store, queue, POLICY, clock).match_batch(
        [record(1), record(2, JobState.RUNNING), record(3, tenant="globex"), heartbeat])
    assert (tally.events, tally.recorded, tally.queued) == (3, 2, 2)
    assert sender.sent == []
    assert sorted(d.job_id for d in store.recent("wh_a")) == [job_id(1)]
    assert sorted(d.job_id for d in store.recent("wh_g")) == [job_id(3)]


def test_a_progress_record_is_never_delivered(parts, clock) -> None:
    """Progress events share the events stream with transitions (docs/progress.md) and their own shape: a
    matcher that read them as transitions would fail the batch on them (stalling every job's deliveries on
    the shard) or, reading them loosely, deliver a running job's every update to an endpoint that asked for
    "*" under the version of its last transition, which a receiver could not tell from a duplicate."""
    store, queue, sender = parts
    progress = json.dumps({"kind": "progress", "schema": 1, "job_id": job_id(5), "tenant_id": "globex",
                           "version": 2, "attempt": 1, "seq": 7, "fraction": 0.4, "message": "step 4 of 10",
                           "at": "2026-12-04T10:00:01.000Z", "committed_at": "2026-12-04T10:00:01.000Z"}).encode()
    tally = WebhookMatcher(store, queue, POLICY, clock).match_batch([progress, record(3, tenant="globex")])
    assert (tally.events, tally.unreadable, tally.recorded) == (1, 0, 1)
    assert [d.job_id for d in store.recent("wh_g")] == [job_id(3)]
    assert sender.sent == []


def test_a_delivery_is_signed_and_settled_once(parts, clock) -> None:
    """Catches an unsigned send, and a settled delivery sent again when its message is seen twice."""
    store, queue, sender = parts
    matcher = WebhookMatcher(store, queue, POLICY, clock)
    deliverer = Deliverer(store, sender, POLICY, clock)
    matcher.match_batch([record(1)])
    matcher.match_batch([record(1)])  # the stream delivered the batch again: queued again, settled once
    assert drain(deliverer, queue) == ["delivered", "settled"]
    (_, body, headers), = sender.sent
    assert signature_is_valid(SECRET, headers["Onward-Signature"], body, now_s=clock() / 1000)
    assert headers["Onward-Delivery"] == store.recent("wh_a")[0].delivery_id
    assert len(queue) == 0


def test_a_failing_endpoint_is_retried_with_backoff_then_failed_and_redelivered(parts, clock) -> None:
    """Catches retries that are not spaced (sent again before their time), that never stop, and a redeliver
    that does not make a failed delivery pending and queued again."""
    store, queue, sender = parts
    sender.failing.add("https://wh_a.example.com/")
    WebhookMatcher(store, queue, POLICY, clock).match_batch([record(1)])
    deliverer = Deliverer(store, sender, POLICY, clock)
    assert drain(deliverer, queue) == ["retry"]
    assert drain(deliverer, queue) == []  # not visible before its backoff
    outcomes: list[str] = []
    for _ in range(40):
        clock.advance(1)
        outcomes += drain(deliverer, queue)
    assert outcomes[-1] == "failed" and set(outcomes[:-1]) == {"retry"}
    failed = store.recent("wh_a")[0]
    assert failed.state is DeliveryState.FAILED and failed.last_status_code == 500
    assert 3 <= len(sender.sent) <= 1 + 20  # spaced by at least half a growing delay over the 20 s
    sender.failing.clear()
    again = redeliver(store, queue, failed, POLICY, clock())
    assert again is not None and again.state is DeliveryState.PENDING
    assert drain(deliverer, queue) == ["delivered"]


def test_a_hanging_endpoint_holds_only_its_own_slots(parts, clock) -> None:
    """Catches head-of-line blocking in the deliverer: with acme's endpoint hanging and many of its deliveries
    queued, globex's delivery is sent at once by a free thread; acme's sends never exceed its 2 slots (the
    others are put back, not waited on)."""
    store, queue, sender = parts
    sender.hanging.add("https://wh_a.example.com/")
    matcher = WebhookMatcher(store, queue, POLICY, clock)
    matcher.match_batch([record(n) for n in range(8)])
    deliverer = Deliverer(store, sender, POLICY, clock, slots_per_endpoint=2)
    with ThreadPoolExecutor(max_workers=6) as pool:
        stuck = [pool.submit(deliverer.handle, message, queue) for message in queue.receive(8)]
        deadline = threading.Event()
        while len(sender.sent) < 2 and not deadline.wait(0.01):
            pass
        matcher.match_batch([record(100, tenant="globex")])
        (message,) = queue.receive(10)
        assert pool.submit(deliverer.handle, message, queue).result(timeout=5).handled == "delivered"
        hanging_sends = [url for url, _, _ in sender.sent if "wh_a" in url]
        assert len(hanging_sends) == 2
        sender.release.set()
        handled = sorted(future.result(timeout=10).handled for future in stuck)
    assert handled.count("busy") == 6 and handled.count("retry") == 2


@pytest.mark.parametrize("point", ["webhooks.after_record", "webhooks.after_send"])
def test_a_crash_between_any_two_steps_only_delivers_again(parts, clock, point: str) -> None:
    """Catches a delivery lost to a crash: after the record and before the queue (the batch comes again and
    queues it), or after the POST and before the record's update (the message shows again after its
    visibility timeout and the delivery is POSTed again, same delivery id)."""
    store, queue, sender = parts
    matcher = WebhookMatcher(store, queue, POLICY, clock)
    deliverer = Deliverer(store, sender, POLICY, clock)
    with faults.injected(point) as fired:
        for _ in range(3):
            try:
                matcher.match_batch([record(1)])
                break
            except faults.InjectedCrash:
                continue  # the stream hands the unacknowledged batch over again
        with contextlib.suppress(faults.InjectedCrash):
            drain(deliverer, queue)
    assert fired == [point]
    clock.advance(31)  # past the queue's visibility timeout
    drain(deliverer, queue)
    assert store.recent("wh_a")[0].state is DeliveryState.DELIVERED
    ids = {headers["Onward-Delivery"] for _, _, headers in sender.sent}
    assert len(ids) == 1 and 1 <= len(sender.sent) <= 2

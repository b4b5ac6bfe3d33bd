"""The webhooks' two request savings: the matcher's cache of each tenant's endpoints
(onward.pipeline.webhooks.endpoint_cache) and the delivery queue's SendMessageBatch with its partial failures
sent again (onward.pipeline.webhooks.queue.send_batch)."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain.clock import ManualClock
from onward.domain.webhooks import Webhook
from onward.pipeline.webhooks.deliverer import Deliverer
from onward.pipeline.webhooks.matcher import WebhookMatcher
from onward.pipeline.webhooks.queue import (
    SEND_BATCH,
    SEND_TRIES,
    DeliveryRef,
    MemoryDeliveryQueue,
    SendFailed,
    SqsDeliveryQueue,
    send_batch,
)
from onward.store.webhooks import MemoryWebhooks
from tests.unit.pipeline.test_webhook_delivery import POLICY, SECRET, FakeSender, drain, record

pytestmark = pytest.mark.fast


def hook(webhook_id: str, tenant: str = "acme") -> Webhook:
    return Webhook(webhook_id=webhook_id, tenant_id=tenant, url=f"https://{webhook_id}.example.com/",
                   kinds=("succeeded",), secret=SECRET, created_at=0)


class CountingStore(MemoryWebhooks):
    def __init__(self) -> None:
        super().__init__()
        self.tenant_reads = 0

    def of_tenant(self, tenant_id: str) -> list[Webhook]:
        self.tenant_reads += 1
        return super().of_tenant(tenant_id)


def test_the_matcher_reads_a_tenants_endpoints_once_per_cache_period() -> None:
    """Catches a read of the tenant's endpoints on every batch (the cost this cache removes), and a cache that
    never expires: an endpoint registered meanwhile is matched once the period is over."""
    clock = ManualClock()
    store = CountingStore()
    store.register(hook("wh_1"))
    queue = MemoryDeliveryQueue(clock)
    matcher = WebhookMatcher(store, queue, POLICY, clock, endpoint_cache_ms=5_000)
    for n in range(1, 6):
        matcher.match_batch([record(n)])
    assert store.tenant_reads == 1 and queue.sent == 5
    store.register(hook("wh_2"))
    matcher.match_batch([record(6)])
    assert queue.sent == 6  # within the period: the new endpoint is not matched yet
    clock.advance(5_000)
    matcher.match_batch([record(7)])
    assert store.tenant_reads == 2 and queue.sent == 8  # both endpoints from then on


def test_an_endpoint_deleted_while_cached_receives_nothing() -> None:
    """Catches the cache sending to a deleted endpoint: the matcher still matches it for the period, but the
    deliverer reads the endpoint again before the send and records the delivery failed without calling it."""
    clock = ManualClock()
    store = MemoryWebhooks()
    store.register(hook("wh_1"))
    queue = MemoryDeliveryQueue(clock)
    sender = FakeSender()
    matcher = WebhookMatcher(store, queue, POLICY, clock, endpoint_cache_ms=5_000)
    matcher.match_batch([record(1)])
    assert store.remove("acme", "wh_1")
    matcher.match_batch([record(2)])
    deliverer = Deliverer(store, sender, POLICY, clock)
    assert sorted(drain(deliverer, queue)) == ["failed", "failed"]
    assert sender.sent == []
    assert {d.last_error for d in store.recent("wh_1")} == {"endpoint deleted"}


def test_no_cache_reads_every_batch() -> None:
    """ONWARD_WEBHOOK_ENDPOINT_CACHE_S=0: every batch reads (as before the cache)."""
    clock = ManualClock()
    store = CountingStore()
    matcher = WebhookMatcher(store, MemoryDeliveryQueue(clock), POLICY, clock, endpoint_cache_ms=0)
    for n in range(3):
        matcher.match_batch([record(n)])
    assert store.tenant_reads == 3


class FakeSqs:
    """SendMessageBatch answering the ids in `fail` (per call, in order) as failed."""

    def __init__(self, fail: list[set[str]] | None = None, sender_fault: bool = False) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail = fail or []
        self.sender_fault = sender_fault

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        entries: list[dict[str, Any]] = request["Entries"]
        assert len(entries) <= SEND_BATCH
        failing = self.fail[len(self.calls)] if len(self.calls) < len(self.fail) else set()
        self.calls.append(entries)
        return {"Successful": [{"Id": e["Id"]} for e in entries if e["Id"] not in failing],
                "Failed": [{"Id": e["Id"], "Code": "InternalError", "SenderFault": self.sender_fault}
                           for e in entries if e["Id"] in failing]}


def refs(count: int) -> list[DeliveryRef]:
    return [DeliveryRef("acme" if n % 2 else "globex", "wh_1", f"d{n}") for n in range(count)]


def test_deliveries_are_queued_ten_a_request_each_with_its_tenants_group() -> None:
    """Catches one SendMessage per delivery (23 requests here instead of 3) and a lost fair-queue group."""
    sqs = FakeSqs()
    SqsDeliveryQueue(sqs, "q").enqueue(refs(23), delay_ms=1_500)
    assert [len(call) for call in sqs.calls] == [10, 10, 3]
    sent = [entry for call in sqs.calls for entry in call]
    assert [DeliveryRef.of_body(entry["MessageBody"]) for entry in sent] == refs(23)
    assert {entry["DelaySeconds"] for entry in sent} == {2}
    assert all(entry["MessageGroupId"] == DeliveryRef.of_body(entry["MessageBody"]).tenant_id for entry in sent)


def test_a_batchs_failed_entries_are_sent_again_and_only_they() -> None:
    """Catches partial failures taken as success (those deliveries would never be sent: the matcher's batch is
    acknowledged), and the whole batch sent again (duplicates of the ones queued)."""
    sqs = FakeSqs(fail=[{"2", "7"}, {"7"}])
    assert send_batch(sqs, "q", [{"Id": str(n), "MessageBody": "{}"} for n in range(10)], sleep=lambda _: None) == 3
    assert [[entry["Id"] for entry in call] for call in sqs.calls][1:] == [["2", "7"], ["7"]]


def test_entries_still_failing_raise_so_the_batch_is_delivered_again() -> None:
    """Catches a queue that drops what SQS never took: SendFailed reaches the matcher, whose stream batch is then
    retried; a sender's fault (a body SQS refuses) is not sent again."""
    sqs = FakeSqs(fail=[{"1"}] * SEND_TRIES)
    with pytest.raises(SendFailed, match="1: InternalError"):
        send_batch(sqs, "q", [{"Id": "0", "MessageBody": "{}"}, {"Id": "1", "MessageBody": "{}"}],
                   sleep=lambda _: None)
    assert len(sqs.calls) == SEND_TRIES
    refused = FakeSqs(fail=[{"0"}], sender_fault=True)
    with pytest.raises(SendFailed):
        send_batch(refused, "q", [{"Id": "0", "MessageBody": "{}"}], sleep=lambda _: None)
    assert len(refused.calls) == 1

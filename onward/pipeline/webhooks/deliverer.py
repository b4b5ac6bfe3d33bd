"""The webhook deliverer: takes a queued delivery, reads its record, signs and POSTs it, and records what came
of it (delivered; pending with its next try after a backoff; failed once the retry time is spent).

Isolation: sends run on a pool of threads, and at most `slots_per_endpoint` of them send to one endpoint at
once (EndpointSlots). A message whose endpoint has no free slot is put back for BUSY_RETRY_MS instead of
waiting for one, so a slow or hanging endpoint holds only its own slots (each at most the sender's timeout)
and every other endpoint's and tenant's deliveries go on through the other threads.

At least once: the record is updated only after the POST, conditional on the attempts read; the message is
dropped only after that. A crash between the POST and the update shows the message again (the queue's
visibility timeout) and the delivery is POSTed again, with the same Onward-Delivery id and event version, so
the receiver drops the duplicate.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Literal, Protocol

from onward.domain.clock import Clock, system_clock
from onward.domain.webhooks import (
    DEFAULT_RETRY_POLICY,
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    Delivery,
    DeliveryState,
    RetryPolicy,
    delivery_body,
    signature,
)
from onward.faults import fault_point
from onward.pipeline.webhooks.queue import DeliveryQueue, DeliveryRef, Received
from onward.pipeline.webhooks.sender import SendOutcome
from onward.store.webhooks import WebhookRecorder

BUSY_RETRY_MS = 1000  # when a message's endpoint has no free slot, it shows again after this
DEFAULT_SLOTS_PER_ENDPOINT = 4

Handled = Literal["delivered", "retry", "failed", "busy", "not_due", "settled", "lost_race"]


class Sender(Protocol):
    def send(self, url: str, body: bytes, headers: dict[str, str]) -> SendOutcome: ...


class EndpointSlots:
    """At most `per_endpoint` sends to one endpoint at once, in this process."""

    def __init__(self, per_endpoint: int) -> None:
        self._per_endpoint = per_endpoint
        self._lock = threading.Lock()
        self._busy: Counter[str] = Counter()

    def take(self, webhook_id: str) -> bool:
        with self._lock:
            if self._busy[webhook_id] >= self._per_endpoint:
                return False
            self._busy[webhook_id] += 1
            return True

    def give(self, webhook_id: str) -> None:
        with self._lock:
            self._busy[webhook_id] -= 1
            if self._busy[webhook_id] <= 0:
                del self._busy[webhook_id]


@dataclass(frozen=True)
class Step:
    """What handling one message did, and what is to become of the message: `later_ms` None drops it."""

    handled: Handled
    later_ms: int | None = None


class Deliverer:
    def __init__(self, store: WebhookRecorder, sender: Sender, policy: RetryPolicy = DEFAULT_RETRY_POLICY,
                 clock: Clock = system_clock, slots_per_endpoint: int = DEFAULT_SLOTS_PER_ENDPOINT) -> None:
        self._store = store
        self._sender = sender
        self._policy = policy
        self._clock = clock
        self.slots = EndpointSlots(slots_per_endpoint)

    def step(self, ref: DeliveryRef) -> Step:
        """Send the delivery if it is pending and due and its endpoint has a free slot."""
        delivery = self._store.delivery(ref.webhook_id, ref.delivery_id)
        if delivery is None or delivery.state is not DeliveryState.PENDING:
            return Step("settled")
        wait = delivery.next_attempt_at - self._clock()
        if wait > 0:
            return Step("not_due", wait)
        if not self.slots.take(ref.webhook_id):
            return Step("busy", BUSY_RETRY_MS)
        try:
            return self._attempt(delivery)
        finally:
            self.slots.give(ref.webhook_id)

    def handle(self, received: Received, queue: DeliveryQueue) -> Step:
        """step(), then drop the message or show it again when the step says."""
        step = self.step(received.ref)
        if step.later_ms is None:
            queue.acknowledge(received.receipt)
        else:
            queue.show_later(received.receipt, step.later_ms)
        return step

    def _attempt(self, delivery: Delivery) -> Step:
        webhook = self._store.get(delivery.tenant_id, delivery.webhook_id)
        if webhook is None:
            changed = delivery.model_copy(update={"state": DeliveryState.FAILED, "last_error": "endpoint deleted"})
            return Step("failed" if self._store.update(changed, delivery.attempts) else "lost_race")
        body = delivery_body(delivery)
        headers = {SIGNATURE_HEADER: signature(webhook.secret, self._clock() // 1000, body),
                   DELIVERY_HEADER: delivery.delivery_id}
        sent = self._sender.send(webhook.url, body, headers)
        fault_point("webhooks.after_send", delivery.delivery_id)
        now = self._clock()
        attempts = delivery.attempts + 1
        if sent.delivered:
            changed = delivery.model_copy(update={"state": DeliveryState.DELIVERED, "attempts": attempts,
                                                  "delivered_at": now, "last_status_code": sent.status_code,
                                                  "last_error": None})
            return Step("delivered" if self._store.update(changed, delivery.attempts) else "lost_race")
        delay = self._policy.delay_ms(attempts)
        failure = {"attempts": attempts, "last_status_code": sent.status_code, "last_error": sent.error}
        if now + delay > delivery.give_up_at:
            changed = delivery.model_copy(update={**failure, "state": DeliveryState.FAILED})
            return Step("failed" if self._store.update(changed, delivery.attempts) else "lost_race")
        changed = delivery.model_copy(update={**failure, "next_attempt_at": now + delay})
        if not self._store.update(changed, delivery.attempts):
            return Step("lost_race")
        return Step("retry", delay)


def redeliver(store: WebhookRecorder, queue: DeliveryQueue, delivery: Delivery, policy: RetryPolicy,
              now: int) -> Delivery | None:
    """A delivery (failed, or delivered: a receiver that lost it asks again) made pending again, with a fresh
    retry time, and queued; None when it changed meanwhile (nothing written)."""
    again = delivery.model_copy(update={"state": DeliveryState.PENDING, "next_attempt_at": now,
                                        "give_up_at": now + policy.give_up_after_ms,
                                        "attempts": delivery.attempts + 1, "last_error": None})
    # attempts + 1 as well: a deliverer still holding the old record cannot overwrite this one
    if not store.update(again, delivery.attempts):
        return None
    queue.enqueue([DeliveryRef(again.tenant_id, again.webhook_id, again.delivery_id)])
    return again
